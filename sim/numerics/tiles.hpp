// Helpers for the rooms' tiled numerics (Algorithm::run_tiled): Q, K, V of one head in the
// precision being tested, a block's scores and its P·V, and the precision dispatch. Rows of a block
// never interact, so each selected query row is carried through the blocks on its own; which keys
// share a block, and the order of blocks, are the room's.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "sim/numerics/attention.hpp"

namespace hbmlab::tiled {

// Query q (a row of Q, the last NQ positions) may not see key k: causal and k after its position.
inline bool masked(bool causal, std::int64_t position, std::int64_t key) { return causal && key > position; }

template <class T>
struct Tiles {
  std::int64_t Nq, N, d;  // query rows, keys, head dimension
  std::vector<T> Q, K, V;
  T scale;

  explicit Tiles(const Inputs& in)
      : Nq(in.Q.rows), N(in.K.rows), d(in.Q.cols), scale(static_cast<T>(in.scale)) {
    auto convert = [](const Matrix& m) { return std::vector<T>(m.data.begin(), m.data.end()); };
    Q = convert(in.Q);
    K = convert(in.K);
    V = convert(in.V);
  }

  std::int64_t position(std::int64_t q) const { return N - Nq + q; }

  // Scores of query q against keys [c0, c0 + c): scale·q·k, −∞ where the causal mask hides k.
  void scores(std::int64_t q, std::int64_t c0, std::int64_t c, bool causal, std::vector<T>& s) const {
    s.resize(static_cast<std::size_t>(c));
    for (std::int64_t k = 0; k < c; ++k) {
      if (masked(causal, position(q), c0 + k)) {
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

// The rows to compute (all when none are given, plus the watched row), an output of the inputs'
// shape, and the selected rows grouped by row block i.
std::vector<std::int64_t> rows_to_compute(const Inputs& in, const TiledOptions& options);
TiledResult empty_result(const Inputs& in);
std::vector<std::vector<std::int64_t>> rows_by_block(const BlockGrid& g, const std::vector<std::int64_t>& rows);

// Calls run(T{}) with T = float or double.
template <class F>
TiledResult in_precision(Precision precision, F run) {
  return precision == Precision::fp32 ? run(float{}) : run(double{});
}

}  // namespace hbmlab::tiled
