// Tiled attention in the algorithms' own loop orders, and the fp64 reference.
//
// [SECTION] Inputs
// [SECTION] Reference
// [SECTION] Tiled algorithms
// [SECTION] Checks
#include "sim/numerics/attention.hpp"

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

Inputs make_inputs(std::int64_t N, std::int64_t d, InputKind kind, std::uint64_t seed) {
  Rng rng(seed);
  Inputs in{random_matrix(N, d, rng), random_matrix(N, d, rng), random_matrix(N, d, rng), 1.0 / std::sqrt(double(d))};
  if (kind == InputKind::large_logits) {
    for (double& x : in.Q.data) x *= 1e4;  // scale·q·k ~ 1e4·N(0, 1)
  } else if (kind == InputKind::dominant_key) {
    for (std::size_t k = 0; k < in.K.data.size(); ++k) in.K.data[k] = 4.0 * in.Q.data[k];  // own score ≈ 4√d
  }
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

bool masked(bool causal, std::int64_t query, std::int64_t key) { return causal && key > query; }

}  // namespace

// [SECTION] Reference

Matrix reference_attention(const Inputs& in, bool causal, std::span<const std::int64_t> rows_in) {
  const std::int64_t N = in.Q.rows, d = in.Q.cols;
  Matrix O(N, d);
  std::vector<double> s(static_cast<std::size_t>(N));
  for (std::int64_t q : all_rows_if_empty(rows_in, N)) {
    double mx = kMinusInf;
    for (std::int64_t k = 0; k < N; ++k) {
      double dot = 0;
      for (std::int64_t x = 0; x < d; ++x) dot += in.Q(q, x) * in.K(k, x);
      s[k] = masked(causal, q, k) ? kMinusInf : in.scale * dot;
      mx = std::max(mx, s[k]);
    }
    double sum = 0;
    for (std::int64_t k = 0; k < N; ++k) sum += (s[k] = masked(causal, q, k) ? 0.0 : std::exp(s[k] - mx));
    for (std::int64_t k = 0; k < N; ++k)
      for (std::int64_t x = 0; x < d; ++x) O(q, x) += s[k] / sum * in.V(k, x);
  }
  return O;
}

// [SECTION] Tiled algorithms
//
// Rows of a block never interact, so each selected query row is carried through the blocks
// on its own; which keys share a block, and the order of blocks, follow the algorithm.

namespace {

template <class T>
struct Tiles {
  std::int64_t N, d;
  std::vector<T> Q, K, V;  // N × d in precision T
  T scale;

  explicit Tiles(const Inputs& in) : N(in.Q.rows), d(in.Q.cols), scale(static_cast<T>(in.scale)) {
    auto convert = [](const Matrix& m) { return std::vector<T>(m.data.begin(), m.data.end()); };
    Q = convert(in.Q);
    K = convert(in.K);
    V = convert(in.V);
  }

  // Scores of query q against keys [c0, c0 + c): scale·q·k, −∞ where the causal mask hides k.
  void scores(std::int64_t q, std::int64_t c0, std::int64_t c, bool causal, std::vector<T>& s) const {
    s.resize(static_cast<std::size_t>(c));
    for (std::int64_t k = 0; k < c; ++k) {
      if (masked(causal, q, c0 + k)) {
        s[k] = -std::numeric_limits<T>::infinity();
        continue;
      }
      T dot = 0;
      for (std::int64_t x = 0; x < d; ++x) dot += Q[q * d + x] * K[(c0 + k) * d + x];
      s[k] = scale * dot;
    }
  }

  // pv += w_k · V[c0 + k] over the block.
  void add_pv(const std::vector<T>& w, std::int64_t c0, std::vector<T>& pv) const {
    for (std::size_t k = 0; k < w.size(); ++k)
      if (w[k] != 0)
        for (std::int64_t x = 0; x < d; ++x) pv[x] += w[k] * V[(c0 + std::int64_t(k)) * d + x];
  }
};

template <class T>
T exp_diff(T a, T b) {  // e^(a − b), 0 when a is −∞ (nothing seen yet)
  return a == -std::numeric_limits<T>::infinity() ? T(0) : std::exp(a - b);
}

// Selected rows, grouped by row block i.
std::vector<std::vector<std::int64_t>> rows_by_block(const BlockGrid& g, const std::vector<std::int64_t>& rows) {
  std::vector<std::vector<std::int64_t>> by_block(static_cast<std::size_t>(g.Tr));
  for (std::int64_t r : rows) by_block[static_cast<std::size_t>(r / g.Br)].push_back(r);
  return by_block;
}

template <class T>
void run_standard(const Tiles<T>& t, const BlockGrid& g, const std::vector<std::int64_t>& rows, Matrix& O) {
  std::vector<T> s, block;
  for (std::int64_t q : rows) {
    s.clear();
    for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 1: S row, block by block
      t.scores(q, g.col_begin(j), g.cols(j), g.causal, block);
      s.insert(s.end(), block.begin(), block.end());
    }
    T mx = -std::numeric_limits<T>::infinity();  // line 2: P = softmax(S)
    for (T x : s) mx = std::max(mx, x);
    T sum = 0;
    for (T& x : s) sum += (x = exp_diff(x, mx));
    for (T& x : s) x /= sum;
    std::vector<T> o(static_cast<std::size_t>(t.d), T(0));  // line 3: O = PV
    t.add_pv(s, 0, o);
    for (std::int64_t x = 0; x < t.d; ++x) O(q, x) = o[x];
  }
}

template <class T>
void run_flash1(const Tiles<T>& t, const BlockGrid& g, const std::vector<std::int64_t>& rows,
                std::optional<std::int64_t> watch, Matrix& O_out, std::vector<SoftmaxEvent>& events) {
  const std::int64_t d = t.d;
  // line 2: O ← 0, ℓ ← 0, m ← −∞ "in HBM"
  std::vector<T> hbm_O(static_cast<std::size_t>(g.N * d), T(0)), hbm_l(g.N, T(0)),
      hbm_m(g.N, -std::numeric_limits<T>::infinity());
  const auto by_block = rows_by_block(g, rows);
  std::vector<T> S_row, pv(static_cast<std::size_t>(d));
  for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 5
    const std::int64_t c0 = g.col_begin(j), c = g.cols(j);
    for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 7
      if (g.skipped(i, j)) continue;
      for (std::int64_t q : by_block[i]) {
        t.scores(q, c0, c, g.causal, S_row);  // line 9: S_ij = Q_i K_jᵀ
        T m_tilde = -std::numeric_limits<T>::infinity();  // line 10: m̃, P̃, ℓ̃
        for (T x : S_row) m_tilde = std::max(m_tilde, x);
        T l_tilde = 0;
        for (T& x : S_row) l_tilde += (x = exp_diff(x, m_tilde));
        const T m_i = hbm_m[q], l_i = hbm_l[q];  // line 11
        const T m_new = std::max(m_i, m_tilde);
        const T a = exp_diff(m_i, m_new), b = exp_diff(m_tilde, m_new);
        const T l_new = a * l_i + b * l_tilde;
        std::fill(pv.begin(), pv.end(), T(0));  // line 12
        t.add_pv(S_row, c0, pv);
        T* O_i = &hbm_O[q * d];
        if (l_new > 0)
          for (std::int64_t x = 0; x < d; ++x) O_i[x] = (l_i * a * O_i[x] + b * pv[x]) / l_new;
        hbm_l[q] = l_new;  // line 13
        hbm_m[q] = m_new;
        if (watch && q == *watch)
          events.push_back({j, double(m_i), double(m_new), double(l_i), double(l_new), double(a),
                            std::vector<double>(O_i, O_i + d)});
      }
    }
  }
  for (std::int64_t q : rows)
    for (std::int64_t x = 0; x < d; ++x) O_out(q, x) = hbm_O[q * d + x];
}

template <class T>
void run_flash2(const Tiles<T>& t, const BlockGrid& g, const std::vector<std::int64_t>& rows,
                std::optional<std::int64_t> watch, Matrix& O_out, std::vector<SoftmaxEvent>& events) {
  const std::int64_t d = t.d;
  std::vector<T> S_row, acc(static_cast<std::size_t>(d));
  for (std::int64_t q : rows) {
    const std::int64_t i = q / g.Br;
    std::fill(acc.begin(), acc.end(), T(0));  // line 5: O_i ← 0, ℓ_i ← 0, m_i ← −∞ on chip
    T l = 0, m = -std::numeric_limits<T>::infinity();
    for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 6
      if (g.skipped(i, j)) continue;
      const std::int64_t c0 = g.col_begin(j);
      t.scores(q, c0, g.cols(j), g.causal, S_row);  // line 8
      T m_new = m;  // line 9: m_i' = max(m_i, rowmax(S_ij))
      for (T x : S_row) m_new = std::max(m_new, x);
      if (m_new == -std::numeric_limits<T>::infinity()) continue;  // every key so far masked
      const T alpha = exp_diff(m, m_new);
      T rowsum = 0;
      for (T& x : S_row) rowsum += (x = exp_diff(x, m_new));
      const T l_old = l;
      l = alpha * l + rowsum;
      for (T& x : acc) x *= alpha;  // line 10: O_i ← diag(e^(m_i − m_i'))O_i + P̃_ij V_j
      t.add_pv(S_row, c0, acc);
      if (watch && q == *watch) {
        SoftmaxEvent e{j, double(m), double(m_new), double(l_old), double(l), double(alpha), {}};
        for (T x : acc) e.O_partial.push_back(double(x / l));
        events.push_back(std::move(e));
      }
      m = m_new;
    }
    for (std::int64_t x = 0; x < d; ++x) O_out(q, x) = double(acc[x] / l);  // line 12
  }
}

template <class T>
TiledResult run_in(Algo algo, const Inputs& in, Blocks blocks, bool causal, const TiledOptions& options) {
  const Tiles<T> tiles(in);
  const BlockGrid grid(in.Q.rows, blocks, causal);
  std::vector<std::int64_t> rows = all_rows_if_empty(options.rows, in.Q.rows);
  if (options.watch_row && std::find(rows.begin(), rows.end(), *options.watch_row) == rows.end())
    rows.push_back(*options.watch_row);
  TiledResult result{Matrix(in.Q.rows, in.Q.cols), {}};
  switch (algo) {
    case Algo::standard: run_standard(tiles, grid, rows, result.O); break;
    case Algo::flash1: run_flash1(tiles, grid, rows, options.watch_row, result.O, result.watch); break;
    case Algo::flash2: run_flash2(tiles, grid, rows, options.watch_row, result.O, result.watch); break;
  }
  return result;
}

}  // namespace

TiledResult run_tiled(Algo algo, Precision precision, const Inputs& in, Blocks blocks, bool causal,
                      const TiledOptions& options) {
  return precision == Precision::fp32 ? run_in<float>(algo, in, blocks, causal, options)
                                      : run_in<double>(algo, in, blocks, causal, options);
}

// [SECTION] Checks

NumericsCheck check_numerics(Algo algo, Precision precision, const Inputs& in, Blocks blocks, bool causal,
                             std::span<const std::int64_t> rows_in) {
  const std::vector<std::int64_t> rows = all_rows_if_empty(rows_in, in.Q.rows);
  const TiledResult tiled = run_tiled(algo, precision, in, blocks, causal, {rows, std::nullopt});
  const Matrix reference = reference_attention(in, causal, rows);
  NumericsCheck check;
  check.rows_checked = static_cast<std::int64_t>(rows.size());
  for (std::int64_t q : rows)
    for (std::int64_t x = 0; x < in.Q.cols; ++x) {
      const double value = tiled.O(q, x);
      if (!std::isfinite(value)) check.finite = false;
      check.max_abs_error = std::max(check.max_abs_error, std::fabs(value - reference(q, x)));
    }
  if (!check.finite) check.max_abs_error = std::numeric_limits<double>::infinity();
  return check;
}

std::vector<std::int64_t> sample_rows(std::int64_t N, std::int64_t Br, int count) {
  std::set<std::int64_t> rows = {0, N - 1, std::min(Br, N) - 1, ((N - 1) / Br) * Br};
  for (int k = 1; static_cast<int>(rows.size()) < count && k < count; ++k) rows.insert(N * k / count);
  std::vector<std::int64_t> out(rows.begin(), rows.end());
  if (static_cast<int>(out.size()) > count) out.resize(static_cast<std::size_t>(count));
  return out;
}

}  // namespace hbmlab
