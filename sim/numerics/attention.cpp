// Inputs, the fp64 reference, the checks, and the helpers the rooms' tiled numerics share.
//
// [SECTION] Inputs
// [SECTION] Reference
// [SECTION] Tiled algorithms: helpers for the rooms
// [SECTION] Checks
#include "sim/numerics/attention.hpp"

#include "sim/algo/algorithm.hpp"
#include "sim/numerics/tiles.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace hbmlab {

// [SECTION] Inputs

std::string_view to_string(InputKind kind) {
  switch (kind) {
    case InputKind::unit: return "unit";
    case InputKind::large_logits: return "large_logits";
    case InputKind::dominant_key: return "dominant_key";
  }
  return "?";
}

namespace {

// splitmix64 and Box–Muller: the same numbers on every platform and standard library.
class Rng {
public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  // As if `normals` normal() calls had been made: each takes two draws, and a draw only advances
  // the state by a constant.
  void skip_normals(std::int64_t normals) { state_ += static_cast<std::uint64_t>(2 * normals) * 0x9e3779b97f4a7c15ULL; }
  double normal() {
    const double u = uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }

private:
  std::uint64_t state_;
};

Matrix random_matrix(std::int64_t rows, std::int64_t cols, Rng& rng) {
  Matrix m(rows, cols);
  for (double& x : m.data) x = rng.normal();
  return m;
}

}  // namespace

Inputs make_inputs(std::int64_t N, std::int64_t d, InputKind kind, std::uint64_t seed, std::int64_t Nq) {
  if (Nq <= 0 || Nq > N) Nq = N;
  Rng rng(seed);
  Inputs in;
  in.scale = 1.0 / std::sqrt(double(d));
  if (kind == InputKind::dominant_key) {  // K = 4·Q over all N positions: every row of Q is needed
    const Matrix Q = random_matrix(N, d, rng);
    in.Q = Matrix(Nq, d);
    std::copy(Q.data.end() - Nq * d, Q.data.end(), in.Q.data.begin());
    in.K = Q;
    for (double& x : in.K.data) x *= 4.0;  // own score ≈ 4√d
    (void)random_matrix(N, d, rng);        // K's draws, kept so that V is the same as without the kind
    in.V = random_matrix(N, d, rng);
  } else {
    rng.skip_normals((N - Nq) * d);  // Q: only the last NQ rows are queries
    in.Q = random_matrix(Nq, d, rng);
    in.K = random_matrix(N, d, rng);
    in.V = random_matrix(N, d, rng);
    if (kind == InputKind::large_logits)
      for (double& x : in.Q.data) x *= 1e4;  // scale·q·k ~ 1e4·N(0, 1)
  }
  // dO from a stream of its own, after Q, K and V are drawn: the forward's inputs stay as they were.
  Rng gradient_rng(seed ^ 0x644f5f6772616469ULL);  // "dO_gradi"
  in.dO = random_matrix(Nq, d, gradient_rng);
  return in;
}

namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

std::vector<std::int64_t> all_rows_if_empty(std::span<const std::int64_t> rows, std::int64_t N) {
  if (!rows.empty()) return {rows.begin(), rows.end()};
  std::vector<std::int64_t> all(static_cast<std::size_t>(N));
  for (std::int64_t r = 0; r < N; ++r) all[static_cast<std::size_t>(r)] = r;
  return all;
}

}  // namespace

// [SECTION] Reference

Matrix reference_attention(const Inputs& in, bool causal, std::span<const std::int64_t> rows_in, const BlockGrid* blocks) {
  const std::int64_t Nq = in.Q.rows, N = in.K.rows, d = in.Q.cols;
  Matrix O(Nq, d);
  std::vector<double> s(static_cast<std::size_t>(N));
  for (std::int64_t q : all_rows_if_empty(rows_in, Nq)) {
    const std::int64_t position = N - Nq + q;  // the queries are the last NQ positions
    auto hidden = [&](std::int64_t k) {
      return tiled::masked(causal, position, k) || (blocks && blocks->skipped(q / blocks->Br, k / blocks->Bc));
    };
    double mx = kMinusInf;
    for (std::int64_t k = 0; k < N; ++k) {
      double dot = 0;
      for (std::int64_t x = 0; x < d; ++x) dot += in.Q(q, x) * in.K(k, x);
      s[k] = hidden(k) ? kMinusInf : in.scale * dot;
      mx = std::max(mx, s[k]);
    }
    double sum = 0;
    for (std::int64_t k = 0; k < N; ++k) sum += (s[k] = hidden(k) ? 0.0 : std::exp(s[k] - mx));
    if (sum == 0) continue;  // every key hidden: the row stays 0
    for (std::int64_t k = 0; k < N; ++k)
      for (std::int64_t x = 0; x < d; ++x) O(q, x) += s[k] / sum * in.V(k, x);
  }
  return O;
}

Gradients reference_backward(const Inputs& in, bool causal, std::span<const std::int64_t> rows_in, const BlockGrid* blocks) {
  const std::int64_t Nq = in.Q.rows, N = in.K.rows, d = in.Q.cols;
  Gradients g{Matrix(Nq, d), Matrix(N, d), Matrix(N, d)};
  std::vector<double> p(static_cast<std::size_t>(N)), dp(static_cast<std::size_t>(N));
  for (std::int64_t q : all_rows_if_empty(rows_in, Nq)) {
    const std::int64_t position = N - Nq + q;
    auto hidden = [&](std::int64_t k) {  // as reference_attention hides keys
      return tiled::masked(causal, position, k) || (blocks && blocks->skipped(q / blocks->Br, k / blocks->Bc));
    };
    // P_q = softmax(scale·q Kᵀ), then O_q = P_q V as the forward leaves it.
    double mx = kMinusInf;
    for (std::int64_t k = 0; k < N; ++k) {
      double dot = 0;
      for (std::int64_t x = 0; x < d; ++x) dot += in.Q(q, x) * in.K(k, x);
      p[k] = hidden(k) ? kMinusInf : in.scale * dot;
      mx = std::max(mx, p[k]);
    }
    double sum = 0;
    for (std::int64_t k = 0; k < N; ++k) sum += (p[k] = hidden(k) ? 0.0 : std::exp(p[k] - mx));
    if (sum == 0) continue;  // every key hidden: O_q = 0 and no gradient flows from this row
    for (double& x : p) x /= sum;
    // D_q = rowsum(dO_q ∘ O_q) = Σ_k P_qk dP_qk, with dP_qk = dO_q · V_k.
    double D = 0;
    for (std::int64_t k = 0; k < N; ++k) {
      double dot = 0;
      for (std::int64_t x = 0; x < d; ++x) dot += in.dO(q, x) * in.V(k, x);
      dp[k] = dot;
      D += p[k] * dot;
    }
    for (std::int64_t k = 0; k < N; ++k) {
      if (p[k] == 0) continue;  // masked (or underflowed): no gradient flows through it
      const double ds = p[k] * (dp[k] - D);
      for (std::int64_t x = 0; x < d; ++x) {
        g.dV(k, x) += p[k] * in.dO(q, x);
        g.dQ(q, x) += in.scale * ds * in.K(k, x);
        g.dK(k, x) += in.scale * ds * in.Q(q, x);
      }
    }
  }
  return g;
}

// [SECTION] Tiled algorithms: helpers for the rooms

namespace tiled {

std::vector<std::int64_t> rows_to_compute(const Inputs& in, const TiledOptions& options) {
  std::vector<std::int64_t> rows = all_rows_if_empty(options.rows, in.Q.rows);
  if (options.watch_row && std::find(rows.begin(), rows.end(), *options.watch_row) == rows.end())
    rows.push_back(*options.watch_row);
  return rows;
}

TiledResult empty_result(const Inputs& in) { return TiledResult{Matrix(in.Q.rows, in.Q.cols), {}, std::nullopt, {}}; }

std::vector<std::vector<std::int64_t>> rows_by_block(const BlockGrid& g, const std::vector<std::int64_t>& rows) {
  std::vector<std::vector<std::int64_t>> by_block(static_cast<std::size_t>(g.Tr));
  for (std::int64_t r : rows) by_block[static_cast<std::size_t>(r / g.Br)].push_back(r);
  return by_block;
}

}  // namespace tiled

TiledResult run_tiled(Algo algo, Precision precision, const Inputs& in, Blocks blocks, bool causal,
                      const TiledOptions& options) {
  AttentionProblem head(1, 1, in.K.rows, in.Q.cols, Dtype::fp32, causal);
  head.query_len = in.Q.rows;
  return algo->run_tiled(precision, in, BlockGrid(head, blocks), options);
}

// [SECTION] Checks

namespace {

NumericsCheck check_tiled(Algo algo, Precision precision, const Inputs& in, Blocks blocks, bool causal,
                          std::span<const std::int64_t> rows_in, TiledOptions options,
                          std::shared_ptr<const BlockMask> block_mask) {
  const std::vector<std::int64_t> rows = all_rows_if_empty(rows_in, in.Q.rows);
  options.rows = rows;
  AttentionProblem head(1, 1, in.K.rows, in.Q.cols, Dtype::fp32, causal);
  head.query_len = in.Q.rows;
  head.block_mask = std::move(block_mask);
  const BlockGrid grid(head, blocks);
  const BlockGrid* mask_grid = grid.mask ? &grid : nullptr;  // the references hide its pairs too
  const TiledResult tiled = algo->run_tiled(precision, in, grid, options);
  NumericsCheck check;
  check.rows_checked = static_cast<std::int64_t>(rows.size());
  check.recomputed_rows = static_cast<std::int64_t>(tiled.recomputed_rows.size());
  auto compare = [&](double value, double reference) {
    if (!std::isfinite(value)) check.finite = false;
    check.max_abs_error = std::max(check.max_abs_error, std::fabs(value - reference));
  };
  if (tiled.grads) {  // a backward room: its gradients, not the O it was given
    check.compared = "dQ, dK, dV";
    const Gradients reference = reference_backward(in, causal, rows, mask_grid);
    for (std::int64_t q : rows)
      for (std::int64_t x = 0; x < in.Q.cols; ++x) compare(tiled.grads->dQ(q, x), reference.dQ(q, x));
    for (std::size_t k = 0; k < reference.dK.data.size(); ++k) {
      compare(tiled.grads->dK.data[k], reference.dK.data[k]);
      compare(tiled.grads->dV.data[k], reference.dV.data[k]);
    }
  } else {
    const Matrix reference = reference_attention(in, causal, rows, mask_grid);
    for (std::int64_t q : rows)
      for (std::int64_t x = 0; x < in.Q.cols; ++x) compare(tiled.O(q, x), reference(q, x));
  }
  if (!check.finite) check.max_abs_error = std::numeric_limits<double>::infinity();
  return check;
}

}  // namespace

NumericsCheck check_numerics(Algo algo, Precision precision, const Inputs& in, Blocks blocks, bool causal,
                             std::span<const std::int64_t> rows, std::shared_ptr<const BlockMask> block_mask) {
  return check_tiled(algo, precision, in, blocks, causal, rows, {}, std::move(block_mask));
}

NumericsCheck check_numerics(Algo algo, Precision precision, const Inputs& in, const AttentionProblem& p, Blocks blocks,
                             std::span<const std::int64_t> rows) {
  TiledOptions options;
  options.problem = &p;
  return check_tiled(algo, precision, in, blocks, p.causal, rows, options, p.block_mask);
}

std::vector<std::int64_t> sample_rows(std::int64_t N, std::int64_t Br, int count) {
  std::set<std::int64_t> rows = {0, N - 1, std::min(Br, N) - 1, ((N - 1) / Br) * Br};
  for (int k = 1; static_cast<int>(rows.size()) < count && k < count; ++k) rows.insert(N * k / count);
  std::vector<std::int64_t> out(rows.begin(), rows.end());
  if (static_cast<int>(out.size()) > count) out.resize(static_cast<std::size_t>(count));
  return out;
}

}  // namespace hbmlab
