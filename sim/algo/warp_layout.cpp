// Shared-memory traffic and warp instructions from a kernel's warp layout (warp_layout.hpp).
#include "sim/algo/warp_layout.hpp"

#include <algorithm>

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
  wgmma += o.wgmma, wgmma_flops += o.wgmma_flops;
  return *this;
}

OnChipCounts OnChipCounts::times(std::int64_t n) const {
  OnChipCounts out = *this;
  for (SmemBytes& b : out.by_tensor) b.fill *= n, b.read *= n, b.mma_read *= n, b.write *= n;
  out.mma *= n, out.ldmatrix *= n, out.ld_shared *= n, out.st_shared *= n, out.ex2 *= n;
  out.wgmma *= n, out.wgmma_flops *= n;
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

namespace {

// The rows the warps compute: each warp takes whole 16-row MMA tiles, so a block of fewer rows than
// 16 per warp is padded (a decode step's few query rows still cost W·16 rows of MMAs).
std::int64_t padded_rows(std::int64_t rows, std::int64_t warps) {
  return warps * 16 * ceil_div(ceil_div(rows, warps), 16);
}

// An output block staged on its way to global memory: registers → shared memory (a 32-bit store
// per accumulator pair) → 16-byte loads, so that the global stores are whole rows.
void stage(OnChipCounts& c, Tensor t, std::int64_t bytes) {
  c[t].write += bytes;
  c[t].read += bytes;
  c.st_shared += ceil_div(bytes, 32 * 4);
  c.ld_shared += ceil_div(bytes, 32 * 16);
}

// A kernel's counts: its block pairs' and its CTAs'.
OnChipCounts per_kernel(const KernelPlan& plan, const OnChipCounts& pair, const OnChipCounts& cta) {
  OnChipCounts c = pair.times(computed_pairs(plan));
  c += cta.times(plan.ctas());
  return c;
}

}  // namespace

OnChipCounts fa2_forward_pair(const Fa2ForwardLayout& l) {
  const std::int64_t W = l.warps, Br = padded_rows(l.Br, l.warps);
  // S_ij = Q_i K_jᵀ: warps stacked along the rows, each reads Q_i's rows and all of K_j.
  OnChipCounts c = warp_gemm({.a = Tensor::Q, .b = Tensor::K, .M = Br, .N = l.Bc, .K = l.d, .Wm = W, .Wn = 1},
                             l.elem_bytes);
  // O_i += P̃_ij V_j: P̃_ij is S's accumulator, converted in registers; every warp reads all of V_j.
  c += warp_gemm({.a = Tensor::P, .b = Tensor::V, .M = Br, .N = l.d, .K = l.Bc, .Wm = W, .Wn = 1,
                  .a_in_registers = true},
                 l.elem_bytes);
  c[Tensor::K].fill += l.Bc * l.d * l.elem_bytes;
  c[Tensor::V].fill += l.Bc * l.d * l.elem_bytes;
  // exp2 of every score, and of (m_old − m_new) for each row a thread holds: two rows of each
  // 16-row group per thread, so two warp instructions per 16 rows.
  c.ex2 = ceil_div(Br * l.Bc, 32) + 2 * ceil_div(Br, 16);
  return c;
}

OnChipCounts fa2_forward_cta(const Fa2ForwardLayout& l) {
  OnChipCounts c;
  c.modelled = true;
  c[Tensor::Q].fill = l.Br * l.d * l.elem_bytes;
  if (l.staged_output_bytes > 0) stage(c, Tensor::O, padded_rows(l.Br, l.warps) * l.d * l.staged_output_bytes);
  return c;
}

Fa2BackwardLayout Fa2BackwardLayout::for_blocks(std::int64_t Br, std::int64_t Bc, std::int64_t d, std::int64_t warps) {
  Fa2BackwardLayout l{.Br = Br, .Bc = Bc, .d = d, .warps = warps};
  l.sdp_rows = l.dq_rows = std::clamp<std::int64_t>(Br / 32, 1, warps);
  l.dkv_rows = std::min<std::int64_t>(4, warps);
  return l;
}

OnChipCounts fa2_backward_pair(const Fa2BackwardLayout& l) {
  const std::int64_t W = l.warps, e = l.elem_bytes;
  auto grid = [&](Tensor a, Tensor b, std::int64_t M, std::int64_t N, std::int64_t K, std::int64_t rows) {
    return warp_gemm({.a = a, .b = b, .M = M, .N = N, .K = K, .Wm = rows, .Wn = W / rows}, e);
  };
  OnChipCounts c = grid(Tensor::Q, Tensor::K, l.Br, l.Bc, l.d, l.sdp_rows);  // S_ij = Q_i K_jᵀ
  c += grid(Tensor::dO, Tensor::V, l.Br, l.Bc, l.d, l.sdp_rows);             // dP_ij = dO_i V_jᵀ
  c += grid(Tensor::P, Tensor::dO, l.Bc, l.d, l.Br, l.dkv_rows);             // dV_j += P_ijᵀ dO_i
  c += grid(Tensor::dS, Tensor::Q, l.Bc, l.d, l.Br, l.dkv_rows);             // dK_j += dS_ijᵀ Q_i
  c += grid(Tensor::dS, Tensor::K, l.Br, l.d, l.Bc, l.dq_rows);              // dQ_i = dS_ij K_j
  // P_ij and dS_ij: registers → shared memory, a 32-bit store per accumulator pair.
  c[Tensor::P].write += l.Br * l.Bc * e;
  c[Tensor::dS].write += l.Br * l.Bc * e;
  c.st_shared += 2 * ceil_div(l.Br * l.Bc * e, 32 * 4);
  c[Tensor::Q].fill += l.Br * l.d * e;
  c[Tensor::dO].fill += l.Br * l.d * e;
  c.ex2 = ceil_div(l.Br * l.Bc, 32);  // P_ij = exp2(S_ij·scale − L_i), no rescaling
  return c;
}

OnChipCounts fa2_backward_cta(const Fa2BackwardLayout& l) {
  OnChipCounts c;
  c.modelled = true;
  const std::int64_t tile = l.Bc * l.d * l.elem_bytes;
  c[Tensor::K].fill = c[Tensor::V].fill = tile;
  stage(c, Tensor::dK, tile);
  stage(c, Tensor::dV, tile);
  return c;
}

OnChipCounts fa2_backward_kernel(const KernelPlan& plan, const Fa2BackwardLayout& l) {
  OnChipCounts c = per_kernel(plan, fa2_backward_pair(l), fa2_backward_cta(l));
  c.layout = fmt::format("{} warps; S and dP on {}x{} warps, dK and dV on {}x{}, dQ on {}x{}; every GEMM operand "
                         "from shared memory; P and dS stored there; dK, dV staged",
                         l.warps, l.sdp_rows, l.warps / l.sdp_rows, l.dkv_rows, l.warps / l.dkv_rows, l.dq_rows,
                         l.warps / l.dq_rows);
  return c;
}

OnChipCounts hbmlab_backward_pair(const HbmlabBackwardLayout& l) {
  const std::int64_t W = l.warps(), e = l.elem_bytes, dq_rows = std::max<std::int64_t>(1, l.Br / 32);
  const bool kv = l.kv_in_registers();
  OnChipCounts c = warp_gemm({.a = Tensor::K, .b = Tensor::Q, .M = l.Bc, .N = l.Br, .K = l.d, .Wm = W, .a_in_registers = kv}, e);
  c += warp_gemm({.a = Tensor::V, .b = Tensor::dO, .M = l.Bc, .N = l.Br, .K = l.d, .Wm = W, .a_in_registers = kv}, e);
  c += warp_gemm({.a = Tensor::P, .b = Tensor::dO, .M = l.Bc, .N = l.d, .K = l.Br, .Wm = W, .a_in_registers = true}, e);
  c += warp_gemm({.a = Tensor::dS, .b = Tensor::Q, .M = l.Bc, .N = l.d, .K = l.Br, .Wm = W, .a_in_registers = true}, e);
  c += warp_gemm({.a = Tensor::dS, .b = Tensor::K, .M = l.Br, .N = l.d, .K = l.Bc, .Wm = dq_rows, .Wn = W / dq_rows}, e);
  c[Tensor::dS].write += l.Bc * l.Br * e;  // dS_ijᵀ, a 32-bit store per accumulator pair
  c.st_shared += ceil_div(l.Bc * l.Br * e, 32 * 4);
  c[Tensor::Q].fill += l.Br * l.d * e;
  c[Tensor::dO].fill += l.Br * l.d * e;
  c[Tensor::lse].fill += 4 * l.Br;  // L_i and D_i, fp32
  c[Tensor::D].fill += 4 * l.Br;
  // Each warp reads L_i and D_i for the two queries a thread holds in each n8 tile: 2·Br/8 loads
  // (their bytes, a few per 16 KiB of ldmatrix traffic, are left out).
  c.ld_shared += W * 2 * ceil_div(l.Br, 8);
  c.ex2 = ceil_div(l.Br * l.Bc, 32);
  return c;
}

OnChipCounts hbmlab_backward_cta(const HbmlabBackwardLayout& l) {
  OnChipCounts c;
  c.modelled = true;
  const std::int64_t tile = l.Bc * l.d * l.elem_bytes;
  c[Tensor::K].fill = c[Tensor::V].fill = tile;
  if (l.kv_in_registers()) {  // each warp's A fragments of K_j and V_j, loaded once
    c[Tensor::K].read = c[Tensor::V].read = tile;
    c.ldmatrix = 2 * ceil_div(tile, OnChipCounts::kLdmatrixBytes);
  }
  return c;
}

OnChipCounts hbmlab_backward_kernel(const KernelPlan& plan, const HbmlabBackwardLayout& l) {
  OnChipCounts c = per_kernel(plan, hbmlab_backward_pair(l), hbmlab_backward_cta(l));
  c.layout = fmt::format("{} warps x 16 keys; S^T, dP^T keys as rows (K_j, V_j fragments {}); every warp reads all of "
                         "Q_i and dO_i twice a step; dS^T through shared memory for dQ_i on {}x{} warps",
                         l.warps(), l.kv_in_registers() ? "in registers" : "re-read each step",
                         std::max<std::int64_t>(1, l.Br / 32), l.warps() / std::max<std::int64_t>(1, l.Br / 32));
  return c;
}

OnChipCounts fa2_convert_dq_kernel(const KernelPlan& plan, std::int64_t Br, std::int64_t d, std::int64_t elem_bytes) {
  OnChipCounts c;
  c.modelled = true;
  stage(c, Tensor::dQ, Br * d * elem_bytes);
  c = c.times(plan.ctas());
  c.layout = "dQ_i staged through shared memory (fp32 accumulator → dtype → 16-byte rows)";
  return c;
}

OnChipCounts wgmma_forward_pair(const WgmmaForwardLayout& l) {
  OnChipCounts c;
  c.modelled = true;
  const std::int64_t G = l.warpgroups, e = l.elem_bytes;
  c[Tensor::Q].mma_read = G * 64 * l.d * e;
  c[Tensor::K].mma_read = G * l.Bc * l.d * e;
  c[Tensor::V].mma_read = G * l.Bc * l.d * e;
  c.wgmma = G * (ceil_div(l.d, 16) + ceil_div(l.Bc, 16));
  c.wgmma_flops = G * 2 * (64 * l.Bc * l.d + 64 * l.d * l.Bc);
  c.ex2 = G * (ceil_div(64 * l.Bc, 32) + 2 * 64 / 16);
  return c;
}

OnChipCounts wgmma_forward_kernel(const KernelPlan& plan, const WgmmaForwardLayout& l) {
  OnChipCounts pair = wgmma_forward_pair(l);
  pair[Tensor::K].fill += l.Bc * l.d * l.elem_bytes;  // K_j and V_j into the ring (TMA)
  pair[Tensor::V].fill += l.Bc * l.d * l.elem_bytes;
  OnChipCounts cta;
  cta.modelled = true;
  const std::int64_t Br = 64 * l.warpgroups;
  cta[Tensor::Q].fill = Br * l.d * l.elem_bytes;
  cta[Tensor::O].write = Br * l.d * l.elem_bytes;
  OnChipCounts c = per_kernel(plan, pair, cta);
  c.layout = fmt::format("{} consumer warpgroups x 64 query rows; wgmma reads Q_i, K_j and V_j from shared memory "
                         "(no ldmatrix); S and P stay in registers; K/V arrive by TMA; O leaves through shared memory",
                         l.warpgroups);
  return c;
}

OnChipCounts wgmma_backward_pair(const WgmmaBackwardLayout& l) {
  OnChipCounts c;
  c.modelled = true;
  const std::int64_t G = l.warpgroups, e = l.elem_bytes, Br = l.Br, Bc = l.Bc, d = l.d;
  // S_ijᵀ, dP_ijᵀ: each warpgroup its keys of K_j, V_j and all of Q_i, dO_i.
  c[Tensor::K].mma_read = Bc * d * e;
  c[Tensor::V].mma_read = Bc * d * e;
  c[Tensor::Q].mma_read = G * Br * d * e;
  c[Tensor::dO].mma_read = G * Br * d * e;
  // dV_j += P_ijᵀ dO_i, dK_j += dS_ijᵀ Q_i: P and dS from registers, dO_i and Q_i again.
  c[Tensor::dO].mma_read += G * Br * d * e;
  c[Tensor::Q].mma_read += G * Br * d * e;
  // dS_ijᵀ stored (a 32-bit store per accumulator pair), then dQ_i = dS_ij K_j: every warpgroup reads
  // all of dS_ijᵀ and its d/G columns of K_j.
  c[Tensor::dS].write = Bc * Br * e;
  c.st_shared = ceil_div(Bc * Br * e, 32 * 4);
  c[Tensor::dS].mma_read = G * Bc * Br * e;
  c[Tensor::K].mma_read += Bc * d * e;
  // Q_i, dO_i into the ring (TMA); L_i, D_i stored by the consumers (one st.shared each from the
  // first 2·Br threads), every warp reading the Br/8·2 values its threads hold of each.
  c[Tensor::Q].fill = Br * d * e;
  c[Tensor::dO].fill = Br * d * e;
  for (Tensor t : {Tensor::lse, Tensor::D}) {
    c[t].write = kStatBytes * Br;
    c[t].read = 4 * G * kStatBytes * Br;
  }
  c.st_shared += 2 * ceil_div(Br, 32);
  c.ld_shared = 4 * G * 2 * 2 * ceil_div(Br, 8);
  c.wgmma = G * (2 * ceil_div(d, 16) + 2 * ceil_div(Br, 16) + ceil_div(Bc, 16));
  c.wgmma_flops = 10 * Br * Bc * d;  // five products of 2·Br·Bc·d
  c.ex2 = ceil_div(Br * Bc, 32);
  return c;
}

OnChipCounts wgmma_backward_kernel(const KernelPlan& plan, const WgmmaBackwardLayout& l) {
  OnChipCounts cta;
  cta.modelled = true;
  cta[Tensor::K].fill = cta[Tensor::V].fill = l.Bc * l.d * l.elem_bytes;  // once per CTA (TMA)
  OnChipCounts c = per_kernel(plan, wgmma_backward_pair(l), cta);
  c.layout = fmt::format("{} consumer warpgroups x {} keys; wgmma reads K_j, V_j, Q_i, dO_i and dS^T from shared memory "
                         "(no ldmatrix); P, dS in registers for dV, dK; dS^T through shared memory for dQ_i ({} columns "
                         "per warpgroup); Q_i, dO_i arrive by TMA",
                         l.warpgroups, l.Bc / l.warpgroups, l.d / l.warpgroups);
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
  OnChipCounts c = per_kernel(plan, fa2_forward_pair(l), fa2_forward_cta(l));
  c.layout = fmt::format("{} warps x {} query rows; every warp reads all of K_j and V_j (ldmatrix), Q_i again at "
                         "every j; S and P stay in registers{}",
                         l.warps, l.Br / l.warps, l.staged_output_bytes > 0 ? "; O staged through shared memory" : "");
  return c;
}

}  // namespace hbmlab
