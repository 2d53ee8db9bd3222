// Bounds and closed-form pieces shared by the rooms.
#include "sim/bounds/bound.hpp"

#include <algorithm>

namespace hbmlab {

std::string_view to_string(SweepAxis axis) {
  switch (axis) {
    case SweepAxis::N: return "N";
    case SweepAxis::d: return "d";
    case SweepAxis::M: return "M";
    case SweepAxis::s: return "s";
  }
  return "?";
}

// With NQ < N query rows (decoding) one N of each expression is NQ: S and P are NQ × N; a tiled
// algorithm makes ⌈NQ/Br⌉ passes over K and V (NQ·N·d²/M) but never fewer than one (N·d).
Bound materialised_bound(const AttentionProblem& p) {
  const double N = double(p.seq_len), Nq = double(p.Nq()), d = double(p.head_dim), BH = double(p.instances());
  return {p.Nq() == p.seq_len ? "N d + N^2" : "N d + NQ N", "Θ", BH * (N * d + Nq * N), 0};
}

Bound tiled_bound(const AttentionProblem& p, std::int64_t M) {
  const double N = double(p.seq_len), Nq = double(p.Nq()), d = double(p.head_dim), BH = double(p.instances());
  if (p.Nq() != p.seq_len) return {"NQ N d^2 / M + N d", "Θ", BH * (Nq * N * d * d / double(M) + N * d), 0};
  // Proposition 3: no exact attention does o(N²d²/M) accesses for all M in [d, Nd].
  const std::string kind = (M >= p.head_dim && double(M) <= N * d) ? "Θ and Ω" : "Θ";
  return {"N^2 d^2 / M", kind, BH * N * N * d * d / double(M), 0};
}

Bound block_sparse_bound(const AttentionProblem& p, std::int64_t M, double s) {
  const double N = double(p.seq_len), d = double(p.head_dim), BH = double(p.instances());
  return {"N d + N^2 d^2 s / M", "Θ", BH * (N * d + N * N * d * d * s / double(M)), 0};
}

std::int64_t visited_blocks(const BlockGrid& g, std::int64_t i) {
  if (!g.causal) return g.Tc;
  const std::int64_t last_query = g.query_position(g.row_begin(i) + g.rows(i) - 1);
  return std::min(g.Tc, last_query / g.Bc + 1);
}

void add_traffic(Counts& c, Tensor t, std::int64_t read_elems, std::int64_t write_elems, std::int64_t elem_bytes) {
  c[t].read_elems += read_elems;
  c[t].write_elems += write_elems;
  c[t].read_bytes += read_elems * elem_bytes;
  c[t].write_bytes += write_elems * elem_bytes;
}

}  // namespace hbmlab
