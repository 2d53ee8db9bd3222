// Shared-memory traffic and warp instructions from a kernel's warp layout (warp_layout.hpp).
#include "sim/algo/warp_layout.hpp"

#include <algorithm>
#include <cassert>
#include <map>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "sim/engine/plan.hpp"
#include "sim/workload/problem.hpp"

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
  wgmma += o.wgmma, wgmma_flops += o.wgmma_flops, mbarrier += o.mbarrier, shfl += o.shfl;
  gemm_starts += o.gemm_starts, gemm_drains += o.gemm_drains, mma_ksteps += o.mma_ksteps, barriers += o.barriers;
  red += o.red;
  fma_chain += o.fma_chain, fma_chain_loads += o.fma_chain_loads, shuffle_steps += o.shuffle_steps;
  serial_loads += o.serial_loads, serial_fp32 += o.serial_fp32, serial_exps += o.serial_exps;
  serial_divides += o.serial_divides;
  return *this;
}

OnChipCounts OnChipCounts::times(std::int64_t n) const {
  OnChipCounts out = *this;
  for (SmemBytes& b : out.by_tensor) b.fill *= n, b.read *= n, b.mma_read *= n, b.write *= n;
  out.mma *= n, out.ldmatrix *= n, out.ld_shared *= n, out.st_shared *= n, out.ex2 *= n;
  out.wgmma *= n, out.wgmma_flops *= n, out.mbarrier *= n, out.shfl *= n;
  out.gemm_starts *= n, out.gemm_drains *= n, out.mma_ksteps *= n, out.barriers *= n;
  out.red *= n;
  out.fma_chain *= n, out.fma_chain_loads *= n, out.shuffle_steps *= n;
  out.serial_loads *= n, out.serial_fp32 *= n, out.serial_exps *= n, out.serial_divides *= n;
  return out;
}

namespace {

// The wavefronts of lanes [first, first + lanes): the most distinct 4-byte words one bank is asked for.
std::int64_t group_wavefronts(const LaneAddresses& at, int first, int lanes, std::int64_t access_bytes) {
  std::array<std::vector<std::int64_t>, 32> words_of_bank;
  for (int lane = first; lane < first + lanes; ++lane) {
    if (at[lane] < 0) continue;
    for (std::int64_t w = at[lane] / 4; w < (at[lane] + access_bytes + 3) / 4; ++w) {
      std::vector<std::int64_t>& words = words_of_bank[w % 32];
      if (std::find(words.begin(), words.end(), w) == words.end()) words.push_back(w);
    }
  }
  std::int64_t most = 0;
  for (const std::vector<std::int64_t>& words : words_of_bank) most = std::max<std::int64_t>(most, std::ssize(words));
  return most;
}

}  // namespace

std::int64_t smem_wavefronts(const LaneAddresses& byte_address, std::int64_t access_bytes) {
  assert((access_bytes == 1 || access_bytes == 2 || access_bytes == 4 || access_bytes == 8 || access_bytes == 16) &&
         "a shared-memory access moves 1, 2, 4, 8 or 16 bytes a lane");
  if (access_bytes <= 4) return group_wavefronts(byte_address, 0, 32, access_bytes);
  std::int64_t sum = 0;
  for (int half = 0; half < 32; half += 16) {
    const std::int64_t together = group_wavefronts(byte_address, half, 16, access_bytes);
    // A 128-bit access: a half-warp that conflicts is served as its two quarter-warps, one after the other.
    sum += access_bytes == 16 && together > 1 ? group_wavefronts(byte_address, half, 8, 16) +
                                                    group_wavefronts(byte_address, half + 8, 8, 16)
                                              : together;
  }
  return sum;
}

std::int64_t ldmatrix_wavefronts(const LaneAddresses& row_address) {
  std::int64_t sum = 0;
  for (int m = 0; m < 4; ++m) sum += group_wavefronts(row_address, 8 * m, 8, 16);
  return sum;
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

// The 32 lanes' byte addresses of one access, lane by lane (< 0: inactive).
template <class F>
LaneAddresses lanes(F address_of) {
  LaneAddresses at{};
  for (int lane = 0; lane < 32; ++lane) at[lane] = address_of(lane);
  return at;
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
  c += cta.times(plan.tiles());
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
  // S_ij, then O_i += P̃_ij V_j; a barrier before each (K_j's, then V_j's copies landed: hbmlab's
  // gpu/flash2.cu and FlashAttention-2's flash_fwd_kernel alike). The softmax waits on S; O's
  // accumulator is next read a step on.
  c.gemm_starts = 2;
  c.gemm_drains = 1;
  c.mma_ksteps = ceil_div(l.d, 16) + ceil_div(l.Bc, 16);
  c.barriers = 2;
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
  // P_ij and dS_ij: registers → shared memory, a 32-bit store per accumulator pair: a warp's 8 rows ×
  // 4 words of an m16n8 tile, the rows' 16-byte chunks swizzled (Swizzle<3, 3, 3>) into 8 bank
  // groups, 1 wavefront a store. ncu counts 1–31 % more store wavefronts on the recorded shapes
  // (h100-sdpa-onchip.json), as store bank conflicts: more at large N and causal, for the same
  // layout, so they come from timing (the stores meeting the next row block's cp.async fills), not
  // from these addresses.
  c[Tensor::P].write += l.Br * l.Bc * e;
  c[Tensor::dS].write += l.Br * l.Bc * e;
  c.st_shared += 2 * ceil_div(l.Br * l.Bc * e, 32 * 4);
  c[Tensor::Q].fill += l.Br * l.d * e;
  c[Tensor::dO].fill += l.Br * l.d * e;
  c.ex2 = ceil_div(l.Br * l.Bc, 32);  // P_ij = exp2(S_ij·scale − L_i), no rescaling
  // Five GEMMs in turn (S, dP, dV, dQ, dK), each loading its fragments from shared memory; barriers
  // when Q_i, dO_i have landed, when P_ij and dS_ij are stored, and before dO_i's buffer is reused.
  // P waits on S, dS on dP, the atomic adds on dQ; dV and dK accumulate over the steps.
  c.gemm_starts = 5;
  c.gemm_drains = 3;
  c.mma_ksteps = 2 * ceil_div(l.d, 16) + 2 * ceil_div(l.Br, 16) + ceil_div(l.Bc, 16);
  c.barriers = 3;
  // dQ_i into the fp32 accumulator: an atomicAdd(float) per element, a warp's lanes on 32
  // consecutive floats of a row (red.global.add.f32, one 128-byte line a request).
  c.red = ceil_div(l.Br * l.d, 32);
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
  // dS_ijᵀ: per n8 tile of queries two 32-bit stores a warp (keys lane/4 and lane/4 + 8), lane at row
  // lane/4, 16-byte chunk t XOR (lane/4) of the Br·2-byte row, word lane % 4: 32 banks, 1 wavefront.
  const std::int64_t ds_stores = W * 2 * ceil_div(l.Br, 8);
  const std::int64_t ds_wavefronts =
      smem_wavefronts(lanes([&](int lane) { return (lane / 4) * l.Br * e + (lane / 4 % 8) * 16 + (lane % 4) * 4; }), 4);
  c[Tensor::dS].write += ds_stores * ds_wavefronts * kWavefrontBytes;
  c.st_shared += ds_stores;
  c[Tensor::Q].fill += l.Br * l.d * e;
  c[Tensor::dO].fill += l.Br * l.d * e;
  c[Tensor::lse].fill += 4 * l.Br;  // L_i and D_i, fp32
  c[Tensor::D].fill += 4 * l.Br;
  // Each warp reads L_i and D_i for the two queries a thread holds in each n8 tile, one float2 each
  // at query (lane % 4)·2: four distinct 8-byte pairs, each for 8 lanes, but a 64-bit load serves
  // each half-warp on its own: 2 wavefronts a load (ncu: 2.000 per LDS.64), 256 bytes.
  const std::int64_t stat_loads = W * ceil_div(l.Br, 8);
  const std::int64_t stat_wavefronts = smem_wavefronts(lanes([](int lane) { return (lane % 4) * 2 * 4; }), 8);
  for (Tensor t : {Tensor::lse, Tensor::D}) c[t].read += stat_loads * stat_wavefronts * kWavefrontBytes;
  c.ld_shared += 2 * stat_loads;
  c.ex2 = ceil_div(l.Br * l.Bc, 32);
  // S_ijᵀ with dP_ijᵀ, dV_j with dK_j, then dQ_i (gpu/flash2_backward.cu), one barrier a step. P and
  // dS wait on S and dP, the atomic adds on dQ; dV and dK accumulate over the steps.
  c.gemm_starts = 3;
  c.gemm_drains = 2;
  c.mma_ksteps = ceil_div(l.d, 16) + ceil_div(l.Br, 16) + ceil_div(l.Bc, 16);
  c.barriers = 1;
  // dQ_i into the fp32 accumulator: each thread's MMA fragment as float2, a warp instruction on 8
  // rows × 8 floats (red.global.add.v2.f32, 8 one-sector requests).
  c.red = ceil_div(l.Br * l.d, 64);
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
  c = c.times(plan.tiles());
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
  // The ring's mbarriers (gpu/flash3.cu): per pair each consumer warp waits for K_j and V_j and
  // releases both (4), the producer waits for both stages to be free and arms them (4); per Q_i the
  // consumer warps wait for it and release it (2 each), the producer waits and arms (2). A wait that
  // polls more than once costs more: ncu counts 0.1–5 % more than this on the recorded shapes.
  pair.mbarrier = 4 * 4 * l.warpgroups + 4;
  cta.mbarrier = 2 * 4 * l.warpgroups + 2;
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
  // dQ_i into the fp32 accumulator: each thread's wgmma fragment as float2, a warp instruction on 8
  // rows × 8 floats (gpu/flash3_backward.cu: red.global.add.v2.f32, 8 one-sector requests).
  c.red = ceil_div(Br * d, 64);
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

OnChipCounts registers_only_kernel(std::string layout) {
  OnChipCounts c;
  c.modelled = true;
  c.layout = std::move(layout);
  return c;
}

namespace {

// Warp-level instructions of `for (k = tid; k < n; k += threads)`: every 32 consecutive k are one
// warp's lanes, so a warp instruction per 32 elements, the last partly active.
std::int64_t warp_steps(std::int64_t n) { return ceil_div(n, 32); }

// `count` warp-level loads (stores) from (to) shared memory of `wavefronts` each (smem_wavefronts):
// wavefronts × 128 bytes each, what the pipe moves, whatever the lanes receive (give).
void smem_load(OnChipCounts& c, Tensor t, std::int64_t count, std::int64_t wavefronts) {
  c[t].read += count * wavefronts * kWavefrontBytes;
  c.ld_shared += count;
}
void smem_store(OnChipCounts& c, Tensor t, std::int64_t count, std::int64_t wavefronts) {
  c[t].write += count * wavefronts * kWavefrontBytes;
  c.st_shared += count;
}

// gpu/standard.cu's 16-byte row copies and fp32 staging: the accesses of a CTA loop
// `for (k = tid; k < n; k += threads)`, warp step s being k = 32·s + lane; `address(k)` gives a
// lane's byte address, or < 0 where it skips. Each warp step's access with its own wavefronts; a
// step no lane takes issues nothing.
enum class Access { load, store };
template <class F>
void staged(OnChipCounts& c, Tensor t, Access access, std::int64_t n, std::int64_t access_bytes, F address) {
  for (std::int64_t k0 = 0; k0 < n; k0 += 32) {
    const LaneAddresses at = lanes([&](int lane) { return k0 + lane < n ? address(k0 + lane) : -1; });
    const std::int64_t wavefronts = smem_wavefronts(at, access_bytes);
    if (wavefronts == 0) continue;
    if (access == Access::load) smem_load(c, t, 1, wavefronts);
    else smem_store(c, t, 1, wavefronts);
  }
}

// WMMA's fp32 accumulator tile (rows × cols, rows cols + 4 floats apart) stored to shared memory by
// store_matrix_sync — per 16 × 16 fragment four 8-byte stores, the lane's two elements at row lane/4
// (+ 8), column (lane % 4)·2 (+ 8) — and read back eight elements at a time by thread k as two
// 16-byte loads at row k / (cols/8), column (k % (cols/8))·8, `valid_rows` × `valid_cols` of it
// (the rest skipped, eight columns at a time). Both conflict: rows 68 floats apart put 4 rows'
// columns on shared banks (4 wavefronts a store where 2 would do, 8 a load where 4 would; ncu: 4.000
// and 8.000).
void wmma_stage(OnChipCounts& c, Tensor t, std::int64_t rows, std::int64_t cols, std::int64_t valid_rows,
                std::int64_t valid_cols) {
  const std::int64_t ld = cols + 4, per_row = cols / 8;
  const std::int64_t store_wavefronts =
      smem_wavefronts(lanes([&](int lane) { return ((lane / 4) * ld + (lane % 4) * 2) * 4; }), 8);
  smem_store(c, t, rows * cols / 64, store_wavefronts);
  for (std::int64_t half : {0, 16})
    staged(c, t, Access::load, rows * per_row, 16, [&](std::int64_t k) -> std::int64_t {
      const std::int64_t r = k / per_row, col = (k % per_row) * 8;
      return r < valid_rows && col < valid_cols ? (r * ld + col) * 4 + half : -1;
    });
}

}  // namespace

OnChipCounts flash1_kernel(const KernelPlan& plan, const Flash1Layout& l) {
  OnChipCounts c;
  c.modelled = true;
  const BlockGrid g(l.N, {l.Br, l.Bc}, l.causal);
  const std::int64_t d = l.d;
  // Wavefronts of the kernel's accesses (smem_wavefronts), from gpu/flash1.cu's addresses: a warp's 32
  // consecutive floats (rows of K_j, V_j, Q_i, O_i, S_ij; ℓ_i, m_i), one float for the whole warp or
  // for lane 0 alone, 1 each; K_j's keys read a row apart, the rows padded to d + 1 floats, 1; a
  // 16-byte chunk of Q_i's or P̃_ij's row that every lane of the warp reads (the row is the warp's),
  // 2: each half-warp is served on its own.
  const std::int64_t row = smem_wavefronts(lanes([](int lane) { return 4 * lane; }), 4);
  const std::int64_t one = smem_wavefronts(lanes([](int lane) { return lane == 0 ? 0 : -1; }), 4);
  const std::int64_t same = smem_wavefronts(lanes([](int) { return 0; }), 4);
  const std::int64_t keys = smem_wavefronts(lanes([&](int lane) { return 4 * lane * (d + 1); }), 4);
  const std::int64_t chunk = smem_wavefronts(lanes([](int) { return 0; }), 16);
  // Barriers (__syncthreads): one after O, ℓ, m are initialised, one after each K/V block's inner
  // loop, and four per computed pair (before Q_i's load, after it, after S_ij, after the softmax).
  c.barriers = 1 + g.Tc;
  for (std::int64_t j = 0; j < g.Tc; ++j) {
    const std::int64_t c0 = g.col_begin(j), cols = g.cols(j);
    // line 6: K_j, V_j into shared memory in fp32, an element per lane.
    smem_store(c, Tensor::K, warp_steps(cols * d), row);
    smem_store(c, Tensor::V, warp_steps(cols * d), row);
    for (std::int64_t i = 0; i < g.Tr; ++i) {
      if (g.skipped(i, j)) continue;
      const std::int64_t r0 = g.row_begin(i), rows = g.rows(i);
      c.barriers += 4;
      // The latency path of the pair's slowest warp (OnChipCounts::fma_chain …), from the kernel's
      // SASS (nvcc 13, sm_90). Line 9: a thread's scores k = tid, tid + 256, … one after another, each
      // d FMAs into one accumulator; the compiler issues each 16-byte chunk of Q_i's row just before
      // the four FMAs that take it, so each of them waits out a load (d/4 a score).
      std::int64_t scores = 0;
      for (std::int64_t t = 0; t < Flash1Layout::kThreads; ++t) {
        std::int64_t mine = 0;
        for (std::int64_t k = t; k < rows * l.Bc; k += Flash1Layout::kThreads) {
          const std::int64_t r = k / l.Bc, col = k % l.Bc;
          mine += col < cols && !(l.causal && c0 + col > r0 + r);
        }
        scores = std::max(scores, mine);
      }
      c.fma_chain += scores * d;
      c.fma_chain_loads += scores * (d / 4);
      // Line 12: a thread's elements of O_i one after another, each `cols` FMAs into one accumulator,
      // waiting likewise on each 16-byte chunk of P̃_ij's row.
      const std::int64_t elements = ceil_div(rows * d, Flash1Layout::kThreads);
      c.fma_chain += elements * cols;
      c.fma_chain_loads += elements * ceil_div(cols, 4);
      // Lines 10–11: a warp's rows one after another (8 warps). Per row, a lane's Bc/32 scores each
      // loaded and taken into the running max (a load and an FMNMX each), five shuffle steps; each
      // loaded again and exponentiated (a load and an expf each: the `mt == −∞` test puts each in a
      // branch of its own, so nothing overlaps), the last add of their sum, five shuffle steps; lane 0
      // then loads m_i (ℓ_i's load hides under the exp), takes max(m_i, m̃), e^(m_i − m_new), its
      // product with ℓ_i, e^(m̃ − m_new), ℓ_new and the two quotients, each exp and quotient again in a
      // branch of its own.
      const std::int64_t warp_rows = ceil_div(rows, Flash1Layout::kThreads / 32), per_lane = l.Bc / 32;
      c.shuffle_steps += warp_rows * 10;
      c.serial_loads += warp_rows * (2 * per_lane + 1);
      c.serial_fp32 += warp_rows * (per_lane + 4);
      c.serial_exps += warp_rows * (per_lane + 2);
      c.serial_divides += warp_rows * 2;
      // line 8: Q_i, O_i, ℓ_i, m_i.
      smem_store(c, Tensor::Q, warp_steps(rows * d), row);
      smem_store(c, Tensor::O, warp_steps(rows * d), row);
      smem_store(c, Tensor::l, warp_steps(rows), row);
      smem_store(c, Tensor::m, warp_steps(rows), row);
      // line 9: a thread per score; a warp is 32 keys of one query row (Bc a multiple of 32). Lanes
      // past K_j's last key, or after the query (causal), load nothing; a warp with none loads nothing.
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t seen = l.causal ? std::clamp<std::int64_t>(r0 + r - c0 + 1, 0, cols) : cols;
        for (std::int64_t q = 0; q < l.Bc; q += 32) {
          smem_store(c, Tensor::S, 1, row);
          if (seen <= q) continue;
          smem_load(c, Tensor::Q, d / 4, chunk);  // 16 bytes a lane, the row broadcast
          smem_load(c, Tensor::K, d, keys);
        }
      }
      // lines 10–11: a warp per row; lane 0 updates m_i, ℓ_i and the two rescaling factors.
      smem_load(c, Tensor::S, rows * 2 * (l.Bc / 32), row);
      smem_store(c, Tensor::P, rows * (l.Bc / 32), row);
      c.ex2 += rows * (l.Bc / 32 + 2);
      smem_load(c, Tensor::m, rows, one);
      smem_load(c, Tensor::l, rows, one);
      smem_store(c, Tensor::m, rows, one);
      smem_store(c, Tensor::l, 3 * rows, one);  // ℓ_new and the two factors
      // line 12: a thread per element of O_i: P̃_ij four at a time (broadcast), V_j one at a time, then
      // the two factors (broadcast) and O_i.
      const std::int64_t steps = warp_steps(rows * d);
      smem_load(c, Tensor::P, steps * (cols / 4), chunk);
      smem_load(c, Tensor::P, steps * (cols % 4), same);
      smem_load(c, Tensor::V, steps * cols, row);
      smem_load(c, Tensor::l, 2 * steps, same);
      smem_load(c, Tensor::O, steps, row);
      // line 13: ℓ_i, m_i out.
      smem_load(c, Tensor::l, warp_steps(rows), row);
      smem_load(c, Tensor::m, warp_steps(rows), row);
    }
  }
  c = c.times(plan.instances);
  c.layout = "8 warps, fp32 FMAs (no tensor cores); a thread per score of S_ij and per element of O_i, each reading "
             "its operands from shared memory (Q_i, P_ij 16 bytes at a time, K_j, V_j 4); a warp per row for the softmax";
  return c;
}

OnChipCounts flash1_warp_pair(const Flash1WarpLayout& l, std::int64_t rows, std::int64_t cols, bool fill_kv) {
  OnChipCounts c;
  c.modelled = true;
  const std::int64_t W = l.warps, d = l.d, e = l.elem_bytes;
  const std::int64_t padded = 16 * ceil_div(rows, 16), tiles = ceil_div(cols, 16), run = ceil_div(tiles, W);
  c[Tensor::Q].fill += padded * d * e;
  if (fill_kv) {
    c[Tensor::K].fill += 16 * tiles * d * e;
    c[Tensor::V].fill += 16 * tiles * d * e;
  }
  // Each warp with keys: S on all of Q_i and its keys of K_j, then P̃ V on its rows of V_j (P̃ is S's
  // accumulator, in registers); exp2 of its scores.
  for (std::int64_t w = 0; w < W; ++w) {
    const std::int64_t keys = 16 * std::clamp<std::int64_t>(tiles - w * run, 0, run);
    if (keys == 0) continue;
    c += warp_gemm({.a = Tensor::Q, .b = Tensor::K, .M = padded, .N = keys, .K = d}, e);
    c += warp_gemm({.a = Tensor::P, .b = Tensor::V, .M = padded, .N = d, .K = keys, .a_in_registers = true}, e);
    c.ex2 += padded * keys / 32;
  }
  // The exchanges, every warp taking part (a warp without keys gives −∞, 0 and zeros). A lane holds
  // rows lane/4 and lane/4 + 8 of each 16-row group: lanes 0, 4, …, 28 store the group's 8 partial
  // maxima (sums) of a row half, 8 consecutive floats; every lane reads its rows' W partials, a
  // quad's lanes the same float (1 wavefront each).
  const std::int64_t stat_store = smem_wavefronts(lanes([](int lane) { return lane % 4 == 0 ? lane : -1; }), 4);
  const std::int64_t stat_load = smem_wavefronts(lanes([](int lane) { return (lane / 4) * 4; }), 4);
  const std::int64_t halves = 2 * (padded / 16);
  for (Tensor t : {Tensor::m, Tensor::l}) {
    smem_store(c, t, W * halves, stat_store);
    smem_load(c, t, W * W * halves, stat_load);
  }
  // The partial P̃ V: a float2 per lane per n8 tile and row half, rows d + 8 floats apart (a half-warp's
  // four rows on distinct banks: 2 wavefronts a store).
  const std::int64_t ld = d + 8;
  const std::int64_t o_store = smem_wavefronts(lanes([&](int lane) { return ((lane / 4) * ld + (lane % 4) * 2) * 4; }), 8);
  smem_store(c, Tensor::O, W * halves * (d / 8), o_store);
  // A thread per row: its W maxima and W sums, then the two factors stored; e^(m_i − m_new), e^(m̃ − m_new).
  for (std::int64_t w = 0; w < W; ++w)
    for (Tensor t : {Tensor::m, Tensor::l}) staged(c, t, Access::load, rows, 4, [](std::int64_t k) { return 4 * k; });
  for (int f = 0; f < 2; ++f) staged(c, Tensor::l, Access::store, rows, 4, [](std::int64_t k) { return 4 * k; });
  c.ex2 += 2 * warp_steps(rows);
  // A thread per element of O_i: the W partials (consecutive floats of a row), its row's two factors.
  for (std::int64_t w = 0; w < W; ++w)
    staged(c, Tensor::O, Access::load, rows * d, 4, [&](std::int64_t k) { return 4 * ((k / d) * ld + k % d); });
  for (int f = 0; f < 2; ++f) staged(c, Tensor::l, Access::load, rows * d, 4, [&](std::int64_t k) { return 4 * (k / d); });
  // The slowest warp's path: S drained into the softmax, P̃ V drained into shared memory; barriers after
  // Q_i's (and K_j, V_j's) fill, the maxima, the partial sums and P̃ V, the factors.
  c.gemm_starts = 2;
  c.gemm_drains = 2;
  c.mma_ksteps = ceil_div(d, 16) + run;
  c.barriers = 4;
  return c;
}

OnChipCounts flash1_warp_kernel(const KernelPlan& plan, const AttentionProblem& p, const Blocks& b,
                                const Flash1WarpLayout& l) {
  // Pairs of the same shape count the same: tally the shapes, then count each once.
  const BlockGrid g(p, b);
  std::map<std::tuple<std::int64_t, std::int64_t, bool>, std::int64_t> shapes;
  for (std::int64_t j = 0; j < g.Tc; ++j) {
    bool first = true;
    for (std::int64_t i = 0; i < g.Tr; ++i) {
      if (g.skipped(i, j)) continue;
      ++shapes[{g.rows(i), g.cols(j), first}];
      first = false;
    }
  }
  OnChipCounts c;
  c.modelled = true;
  for (const auto& [shape, count] : shapes) {
    const auto& [rows, cols, fill_kv] = shape;
    c += flash1_warp_pair(l, rows, cols, fill_kv).times(count);
  }
  c = c.times(plan.instances);
  c.layout = fmt::format("{} warps split K_j, V_j (split-K, ldmatrix); every warp reads all of Q_i; the warps' row "
                         "maxima, sums and P V partials meet in shared memory; O_i, l_i, m_i from HBM",
                         l.warps);
  return c;
}

std::int64_t StandardLayout::softmax_threads() const {
  return std::min<std::int64_t>(256, std::max<std::int64_t>(64, (N / 8 + 31) / 32 * 32));
}

OnChipCounts standard_qk_kernel(const KernelPlan& plan, const StandardLayout& l) {
  OnChipCounts c;
  c.modelled = true;
  const BlockGrid g(l.N, {l.Br, l.Bc}, false);
  const std::int64_t d = l.d, e = l.elem_bytes;
  const OnChipCounts gemm =
      warp_gemm({.a = Tensor::Q, .b = Tensor::K, .M = l.Br, .N = l.Bc, .K = d, .Wm = 2, .Wn = 2}, e);
  // A tile: Q_i and K_j stored 16 bytes a lane (rows past N as zeros; rows d + 8 elements apart), the
  // GEMM, S_ij staged. Only the last row and column of tiles are ragged; the others are all alike.
  auto row_copy = [&](std::int64_t k) { return ((k / (d / 8)) * (d + 8) + (k % (d / 8)) * 8) * e; };
  auto tile = [&](std::int64_t rows, std::int64_t cols) {
    OnChipCounts t = gemm;
    // One GEMM over d/16 k-steps whose product is stored right after (a drain); barriers after the
    // operands' stores, after the MMAs, after S_ij's staging.
    t.gemm_starts = 1;
    t.gemm_drains = 1;
    t.mma_ksteps = ceil_div(d, 16);
    t.barriers = 3;
    staged(t, Tensor::Q, Access::store, l.Br * d / 8, 16, row_copy);
    staged(t, Tensor::K, Access::store, l.Bc * d / 8, 16, row_copy);
    wmma_stage(t, Tensor::S, l.Br, l.Bc, rows, cols);
    return t;
  };
  const std::int64_t full_r = l.N / l.Br, full_c = l.N / l.Bc;
  c += tile(l.Br, l.Bc).times(full_r * full_c);
  if (full_c < g.Tc) c += tile(l.Br, g.cols(g.Tc - 1)).times(full_r);
  if (full_r < g.Tr) c += tile(g.rows(g.Tr - 1), l.Bc).times(full_c);
  if (full_r < g.Tr && full_c < g.Tc) c += tile(g.rows(g.Tr - 1), g.cols(g.Tc - 1));
  c = c.times(plan.instances);
  c.layout = "4 warps on 2x2, WMMA (ldmatrix.x4 fragments): each warp reads half of Q_i and half of K_j per tile; "
             "Q_i, K_j stored through registers; S_ij staged in fp32";
  return c;
}

OnChipCounts standard_softmax_kernel(const KernelPlan& plan, const StandardLayout& l) {
  OnChipCounts c;
  c.modelled = true;
  const std::int64_t N = l.N, warps = l.softmax_threads() / 32;
  const std::int64_t row = smem_wavefronts(lanes([](int lane) { return 4 * lane; }), 4);
  // The row in fp32, an element per store: thread v's eight elements at 8·v + e, so a warp's lanes are
  // 32 bytes apart, 4 to a bank (8 wavefronts a store; ncu: 4.111 a store with those below).
  for (std::int64_t e = 0; e < 8; ++e) staged(c, Tensor::S, Access::store, N / 8, 4, [&](std::int64_t v) { return 4 * (8 * v + e); });
  smem_store(c, Tensor::S, 2 * warps, row);  // two block reductions: lane 0 of each warp
  smem_load(c, Tensor::S, 2 * warps, row);   // then each warp reads the warps' partials, a lane each
  smem_load(c, Tensor::S, warp_steps(N), row);  // e^(x − max), a float a lane
  smem_store(c, Tensor::P, warp_steps(N), row);
  c.ex2 = warp_steps(N);
  c.barriers = 4;  // two block reductions (block_reduce), two __syncthreads each
  // Each reduction a warp's five butterfly steps, then five over the warps' partials, one after
  // another; then the sum's reciprocal.
  c.shuffle_steps = 20;
  c.shfl = 20 * warps;
  c.serial_divides = 1;
  // Eight at a time as two 16-byte loads, to 16-byte stores: lanes 32 bytes apart (8 wavefronts a load).
  for (std::int64_t half : {0, 16}) staged(c, Tensor::P, Access::load, N / 8, 16, [&](std::int64_t v) { return 32 * v + half; });
  c = c.times(plan.instances * N);
  c.layout = fmt::format("one CTA of {} threads per row of S: the row in fp32 in shared memory, exponentiated there",
                         l.softmax_threads());
  return c;
}

OnChipCounts standard_pv_kernel(const KernelPlan& plan, const StandardLayout& l) {
  OnChipCounts c;
  c.modelled = true;
  const BlockGrid g(l.N, {l.Br, l.Bc}, false);
  const std::int64_t d = l.d, e = l.elem_bytes;
  // Four warps over Br rows, 16 rows or more each; a block shorter than 16 rows is one warp row, padded.
  const std::int64_t warp_rows = std::max<std::int64_t>(16, l.Br / 4);
  const std::int64_t Wm = std::clamp<std::int64_t>(l.Br / warp_rows, 1, 4), Wn = 4 / Wm;
  OnChipCounts step =
      warp_gemm({.a = Tensor::P, .b = Tensor::V, .M = l.Br, .N = d, .K = l.Bc, .Wm = Wm, .Wn = Wn}, e);
  step[Tensor::P].fill += l.Br * l.Bc * e;  // cp.async, zero-filled past N
  step[Tensor::V].fill += l.Bc * d * e;
  // Per P_ij, V_j: one GEMM of Bc/16 k-steps into the accumulator O_i keeps (no drain), between two
  // barriers; per CTA the last products drain into O_i's staging, between two more barriers.
  step.gemm_starts = 1;
  step.mma_ksteps = ceil_div(l.Bc, 16);
  step.barriers = 2;
  for (std::int64_t i = 0; i < g.Tr; ++i) {
    c += step.times(g.Tc);
    c.gemm_drains += 1;
    c.barriers += 2;
    wmma_stage(c, Tensor::O, l.Br, d, g.rows(i), d);
  }
  c = c.times(plan.instances);
  c.layout = fmt::format("4 warps on {}x{}, WMMA (ldmatrix.x4 fragments); P_ij, V_j by cp.async, two stages; O_i staged "
                         "in fp32",
                         Wm, Wn);
  return c;
}

OnChipCounts decode_split_pair(const DecodeSplitLayout& l) {
  const std::int64_t W = DecodeSplitLayout::kWarps, e = l.elem_bytes, groups = ceil_div(l.Br, 16);
  // S = Q_i K_jᵀ: every warp reads all of Q_i and its Bc/4 keys of K_j.
  OnChipCounts c = warp_gemm({.a = Tensor::Q, .b = Tensor::K, .M = 16 * groups, .N = l.Bc, .K = l.d, .Wm = 1, .Wn = W}, e);
  // O += P̃ V_j, the warps splitting the keys: V_j read once, P̃ in registers.
  const std::int64_t v_bytes = l.Bc * l.d * e;
  c[Tensor::V].read += v_bytes;
  c.ldmatrix += ceil_div(v_bytes, OnChipCounts::kLdmatrixBytes);
  c.mma += groups * (l.d / 8) * ceil_div(l.Bc, 16);
  c[Tensor::K].fill += l.Bc * l.d * e;
  c[Tensor::V].fill += l.Bc * l.d * e;
  // Each warp: exp2 of its scores, and (synchronised) of m_old − m_new for the two rows a lane holds.
  c.ex2 = 16 * groups * l.Bc / 32 + (l.unified ? 0 : W * 2 * groups);
  // S, then O += P̃ V_j over the warp's Bc/4 keys; a barrier when K_j, V_j have landed and one before
  // the stage is refilled (gpu/flash_decoding.cu). The softmax waits on S; O accumulates.
  c.gemm_starts = 2;
  c.gemm_drains = 1;
  c.mma_ksteps = ceil_div(l.d, 16) + ceil_div(l.Bc / W, 16);
  c.barriers = 2;
  return c;
}

namespace {

// The split CTA's merge, the part that does not depend on its rows: Q_i's fill; each warp stores its
// fp32 O (8 bytes a lane) and m, ℓ, row max (lanes 0, 4, …, 28 of each row pair).
OnChipCounts decode_merge_stores(const DecodeSplitLayout& l) {
  OnChipCounts c;
  c.modelled = true;
  const std::int64_t W = DecodeSplitLayout::kWarps, groups = ceil_div(l.Br, 16);
  c[Tensor::Q].fill = 16 * groups * l.d * l.elem_bytes;
  // O: a float2 per lane at row lane/4, column (lane % 4)·2 of an n8 tile, the rows d floats apart:
  // each half-warp asks 4 rows × 8 floats of the same 8 banks, 4 wavefronts (8 a store; ncu: 8.000).
  const std::int64_t o_wavefronts = smem_wavefronts(lanes([&](int lane) { return ((lane / 4) * l.d + (lane % 4) * 2) * 4; }), 8);
  // m, ℓ, row max: lanes 0, 4, …, 28 store 8 consecutive floats, 1 wavefront.
  const std::int64_t stat_wavefronts = smem_wavefronts(lanes([](int lane) { return lane % 4 == 0 ? lane : -1; }), 4);
  smem_store(c, Tensor::O, W * groups * 2 * (l.d / 8), o_wavefronts);
  smem_store(c, Tensor::m, W * groups * 2 * 2, stat_wavefronts);
  smem_store(c, Tensor::l, W * groups * 2, stat_wavefronts);
  return c;
}

// Then a thread per element of the real rows reads the four warps' O and ℓ (and m, synchronised, for
// the weights e^(m_w − m)), ℓ and m broadcast across a row's lanes. Linear in `rows` (d a multiple of 32).
OnChipCounts decode_merge_reads(const DecodeSplitLayout& l, std::int64_t rows) {
  OnChipCounts c;
  c.modelled = true;
  const std::int64_t W = DecodeSplitLayout::kWarps, steps = warp_steps(rows * l.d);
  // A warp's 32 elements are 32 consecutive floats of one row of O (1 wavefront); ℓ and m one float
  // for the whole warp (1); the row max one lane's float (1).
  const std::int64_t row = smem_wavefronts(lanes([](int lane) { return 4 * lane; }), 4);
  const std::int64_t same = smem_wavefronts(lanes([](int) { return 0; }), 4);
  smem_load(c, Tensor::O, W * steps, row);
  smem_load(c, Tensor::l, W * steps, same);
  if (l.unified) {
    smem_load(c, Tensor::m, W * rows, same);  // the row max, at the row's first element
  } else {
    smem_load(c, Tensor::m, W * steps, same);
    c.ex2 += W * steps;
  }
  return c;
}

}  // namespace

OnChipCounts decode_split_cta(const DecodeSplitLayout& l, std::int64_t rows) {
  OnChipCounts c = decode_merge_stores(l);
  c += decode_merge_reads(l, rows);
  return c;
}

OnChipCounts decode_split_kernel(const KernelPlan& plan, const DecodeSplitLayout& l, std::int64_t real_rows) {
  OnChipCounts c = decode_split_pair(l).times(computed_pairs(plan));
  c += decode_merge_stores(l).times(plan.tiles());
  c += decode_merge_reads(l, real_rows);
  c.layout = fmt::format("4 warps x {} keys of each K_j for all {} rows (ldmatrix); every warp reads all of Q_i; the "
                         "warps' O, m, l merge through shared memory{}",
                         l.Bc / 4, l.Br, l.unified ? "; unified max: no rescaling" : "");
  return c;
}

OnChipCounts decode_combine_kernel(std::int64_t splits, std::int64_t synchronised_rows, std::int64_t unified_rows) {
  OnChipCounts c = registers_only_kernel("a warp per query row, shuffles only: no shared memory");
  (void)unified_rows;  // Σ_s O_part_s / Σ_s ℓ_s: no exponent
  c.ex2 = synchronised_rows * (ceil_div(splits, 32) + splits);
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
