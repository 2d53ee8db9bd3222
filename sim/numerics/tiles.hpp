// Helpers for the rooms' tiled numerics (Algorithm::run_tiled): Q, K, V of one head in the
// precision being tested, a block's scores and its P·V, and the precision dispatch. Rows of a block
// never interact, so each selected query row is carried through the blocks on its own; which keys
// share a block, and the order of blocks, are the room's.
#pragma once

#include <algorithm>
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
  std::vector<T> dO;  // the backward's input (empty when the inputs carry none)
  T scale;

  explicit Tiles(const Inputs& in)
      : Nq(in.Q.rows), N(in.K.rows), d(in.Q.cols), scale(static_cast<T>(in.scale)) {
    auto convert = [](const Matrix& m) { return std::vector<T>(m.data.begin(), m.data.end()); };
    Q = convert(in.Q);
    K = convert(in.K);
    V = convert(in.V);
    dO = convert(in.dO);
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

// [backward] What the forward left in HBM for the backward rooms, in precision T, for the rows
// asked: O, each row's max m and sum ℓ over every key it sees (Algorithm 1's final ℓ, m) and the
// log-sum-exp L = m + log ℓ (FlashAttention-2's). A key is seen unless the causal mask hides it or
// the grid skips its block pair (a block mask). Computed row by row: the backward rooms test their
// own tiles, not the forward's.
template <class T>
struct ForwardRows {
  std::vector<T> O, m, l, L;  // O: NQ × d; the others one per row
};

template <class T>
ForwardRows<T> forward_rows(const Tiles<T>& t, const std::vector<std::int64_t>& rows, const BlockGrid& g) {
  ForwardRows<T> f;
  f.O.assign(static_cast<std::size_t>(t.Nq * t.d), T(0));
  f.m.assign(static_cast<std::size_t>(t.Nq), -std::numeric_limits<T>::infinity());
  f.l.assign(static_cast<std::size_t>(t.Nq), T(0));
  f.L.assign(static_cast<std::size_t>(t.Nq), -std::numeric_limits<T>::infinity());
  std::vector<T> s;
  std::vector<T> o(static_cast<std::size_t>(t.d));
  for (std::int64_t q : rows) {
    t.scores(q, 0, t.N, g.causal, s);
    for (std::int64_t j = 0; j < g.Tc; ++j)
      if (g.skipped(q / g.Br, j)) std::fill_n(s.begin() + g.col_begin(j), g.cols(j), -std::numeric_limits<T>::infinity());
    T m = -std::numeric_limits<T>::infinity(), l = 0;
    for (T x : s) m = std::max(m, x);
    for (T& x : s) l += (x = exp_diff(x, m));
    std::fill(o.begin(), o.end(), T(0));
    t.add_pv(s, 0, o);
    for (std::int64_t x = 0; x < t.d; ++x) f.O[q * t.d + x] = l > 0 ? o[x] / l : T(0);
    f.m[q] = m;
    f.l[q] = l;
    if (l > 0) f.L[q] = m + std::log(l);
  }
  return f;
}

// D_q = rowsum(dO_q ∘ O_q) (Algorithm 4 line 19; FlashAttention-2's Algorithm 2 line 4).
template <class T>
T rowsum_dO_O(const Tiles<T>& t, const ForwardRows<T>& f, std::int64_t q) {
  T D = 0;
  for (std::int64_t x = 0; x < t.d; ++x) D += t.dO[q * t.d + x] * f.O[q * t.d + x];
  return D;
}

// dQ, dK, dV "in HBM" while a backward room runs, in precision T.
template <class T>
struct GradientTiles {
  std::vector<T> dQ, dK, dV;
  explicit GradientTiles(const Tiles<T>& t)
      : dQ(static_cast<std::size_t>(t.Nq * t.d), T(0)), dK(static_cast<std::size_t>(t.N * t.d), T(0)),
        dV(static_cast<std::size_t>(t.N * t.d), T(0)) {}

  // Query row q against the keys [c0, c0 + |P|) of one K/V block, given its recomputed P_ij row and
  // D_q: dV_j += P_ijᵀ dO_i; dP_ij = dO_i V_jᵀ; dS_ij = P_ij ∘ (dP_ij − D_i); dQ_i += scale·dS_ij K_j;
  // dK_j += scale·dS_ijᵀ Q_i (Algorithm 4 lines 16 to 22; FlashAttention-2's Algorithm 2 lines 12 to 16).
  void add_block(const Tiles<T>& t, std::int64_t q, std::int64_t c0, const std::vector<T>& P, T D_q) {
    const std::int64_t d = t.d;
    const T* dO_q = &t.dO[q * d];
    T* dQ_q = &dQ[q * d];
    for (std::size_t k = 0; k < P.size(); ++k) {
      if (P[k] == 0) continue;  // masked key (or one whose weight underflowed): nothing flows through it
      const std::int64_t key = c0 + static_cast<std::int64_t>(k);
      const T* V_k = &t.V[key * d];
      T dP = 0;
      for (std::int64_t x = 0; x < d; ++x) dP += dO_q[x] * V_k[x];
      const T dS = P[k] * (dP - D_q);
      for (std::int64_t x = 0; x < d; ++x) {
        dV[key * d + x] += P[k] * dO_q[x];
        dQ_q[x] += t.scale * dS * t.K[key * d + x];
        dK[key * d + x] += t.scale * dS * t.Q[q * d + x];
      }
    }
  }

  Gradients to_matrices(const Tiles<T>& t) const {
    auto matrix = [](std::int64_t rows, std::int64_t cols, const std::vector<T>& v) {
      Matrix m(rows, cols);
      for (std::size_t k = 0; k < v.size(); ++k) m.data[k] = double(v[k]);
      return m;
    };
    return {matrix(t.Nq, t.d, dQ), matrix(t.N, t.d, dK), matrix(t.N, t.d, dV)};
  }
};

// The rows to compute (all when none are given, plus the watched row), an output of the inputs'
// shape, and the selected rows grouped by row block i. A backward room's output also carries the
// forward's O of those rows (what the window's softmax panel shows).
std::vector<std::int64_t> rows_to_compute(const Inputs& in, const TiledOptions& options);
TiledResult empty_result(const Inputs& in);
std::vector<std::vector<std::int64_t>> rows_by_block(const BlockGrid& g, const std::vector<std::int64_t>& rows);

// Calls run(T{}) with T = float or double.
template <class F>
TiledResult in_precision(Precision precision, F run) {
  return precision == Precision::fp32 ? run(float{}) : run(double{});
}

}  // namespace hbmlab::tiled
