// Shared-memory traffic and warp instructions from a kernel's warp layout (warp_layout.hpp).
#include "sim/algo/warp_layout.hpp"

#include <fmt/format.h>

#include "sim/engine/plan.hpp"

namespace hbmlab {
SmemBytes OnChipCounts::total() const {
  SmemBytes sum;
  for (const SmemBytes& b : by_tensor) sum += b;
  return sum;
}

OnChipCounts& OnChipCounts::operator+=(const OnChipCounts& o) {
  modelled = modelled || o.modelled;
  if (layout.empty()) layout = o.layout;
  for (int t = 0; t < kTensorCount; ++t) by_tensor[t] += o.by_tensor[t];
  mma += o.mma, ldmatrix += o.ldmatrix, ld_shared += o.ld_shared, st_shared += o.st_shared, ex2 += o.ex2;
  return *this;
}

OnChipCounts OnChipCounts::times(std::int64_t n) const {
  OnChipCounts out = *this;
  for (SmemBytes& b : out.by_tensor) b.fill *= n, b.read *= n, b.mma_read *= n, b.write *= n;
  out.mma *= n, out.ldmatrix *= n, out.ld_shared *= n, out.st_shared *= n, out.ex2 *= n;
  return out;
}

OnChipCounts warp_gemm(const WarpGemm& g, std::int64_t elem_bytes) {
  OnChipCounts c;
  c.modelled = true;
  // Each of the Wn warp columns loads all M rows of A (its warp row's share, over the Wm rows);
  // each of the Wm warp rows loads all N columns of B.
  const std::int64_t a_bytes = g.a_in_registers ? 0 : g.Wn * g.M * g.K * elem_bytes;
  const std::int64_t b_bytes = g.b_in_registers ? 0 : g.Wm * g.N * g.K * elem_bytes;
  c[g.a].read += a_bytes;
  c[g.b].read += b_bytes;
  c.ldmatrix = ceil_div(a_bytes, OnChipCounts::kLdmatrixBytes) + ceil_div(b_bytes, OnChipCounts::kLdmatrixBytes);
  c.mma = ceil_div(g.M, 16) * ceil_div(g.N, 8) * ceil_div(g.K, 16);
  return c;
}

OnChipCounts fa2_forward_pair(const Fa2ForwardLayout& l) {
  const std::int64_t W = l.warps;
  // S_ij = Q_i K_jᵀ: warps stacked along the rows, each reads Q_i's rows and all of K_j.
  OnChipCounts c = warp_gemm({.a = Tensor::Q, .b = Tensor::K, .M = l.Br, .N = l.Bc, .K = l.d, .Wm = W, .Wn = 1},
                             l.elem_bytes);
  // O_i += P̃_ij V_j: P̃_ij is S's accumulator, converted in registers; every warp reads all of V_j.
  c += warp_gemm({.a = Tensor::P, .b = Tensor::V, .M = l.Br, .N = l.d, .K = l.Bc, .Wm = W, .Wn = 1,
                  .a_in_registers = true},
                 l.elem_bytes);
  c[Tensor::K].fill += l.Bc * l.d * l.elem_bytes;
  c[Tensor::V].fill += l.Bc * l.d * l.elem_bytes;
  // exp2 of every score, and of (m_old − m_new) for each row a thread holds: two rows of each
  // 16-row group per thread, so two warp instructions per 16 rows.
  c.ex2 = ceil_div(l.Br * l.Bc, 32) + 2 * ceil_div(l.Br, 16);
  return c;
}

OnChipCounts fa2_forward_cta(const Fa2ForwardLayout& l) {
  OnChipCounts c;
  c.modelled = true;
  c[Tensor::Q].fill = l.Br * l.d * l.elem_bytes;
  if (l.staged_output_bytes > 0) {
    // O_i goes registers → shared memory (a 32-bit store per accumulator pair) → 16-byte loads →
    // global, so that the global stores are whole rows.
    const std::int64_t bytes = l.Br * l.d * l.staged_output_bytes;
    c[Tensor::O].write = bytes;
    c[Tensor::O].read = bytes;
    c.st_shared = ceil_div(bytes, 32 * 4);
    c.ld_shared = ceil_div(bytes, 32 * 16);
  }
  return c;
}

std::int64_t computed_pairs(const KernelPlan& plan) {
  std::int64_t pairs = 0;
  for (const CtaProgram& prog : plan.programs)
    for (std::int32_t k = 0; k < prog.phase_count; ++k)
      if (plan.phases[prog.first_phase + k].matmul_flops > 0) ++pairs;
  return pairs * plan.instances;
}

OnChipCounts fa2_forward_kernel(const KernelPlan& plan, const Fa2ForwardLayout& l) {
  OnChipCounts c = fa2_forward_pair(l).times(computed_pairs(plan));
  c += fa2_forward_cta(l).times(plan.ctas());
  c.layout = fmt::format("{} warps x {} query rows; every warp reads all of K_j and V_j (ldmatrix), Q_i again at "
                         "every j; S and P stay in registers{}",
                         l.warps, l.Br / l.warps, l.staged_output_bytes > 0 ? "; O staged through shared memory" : "");
  return c;
}

}  // namespace hbmlab
