// The third level of the count: bytes between shared memory and registers, and the warp-level
// instructions that move and use them, derived exactly from a kernel's warp layout — which
// fragments each warp loads from shared memory per step (ldmatrix), which it stores there
// (st.shared of a staged output), which stay in registers. A room's launch plan owns these counts
// for each of its kernels (KernelPlan::on_chip), as it owns its grid.
//
// The rule for a GEMM on tensor cores: C (M×N) += A (M×K)·B (K×N) split over a Wm × Wn grid of
// warps, each computing an (M/Wm) × (N/Wn) block of C with mma.sync m16n8k16. Every warp loads the
// A rows and B columns of its own block for the whole K, so A is read from shared memory Wn times
// and B Wm times: Wn·M·K + Wm·N·K elements, unless an operand is already in registers (P in the
// forward's P̃·V: the accumulator of S, never stored). ldmatrix.x4 moves 512 bytes (four 8×8
// matrices of 16-bit elements); the MMAs number ⌈M/16⌉·⌈N/8⌉·⌈K/16⌉.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "sim/algo/step.hpp"

namespace hbmlab {

struct KernelPlan;
struct AttentionProblem;
struct Blocks;

// Shared-memory bytes of one tensor, by direction.
struct SmemBytes {
  std::int64_t fill = 0;      // written into shared memory by the copy path (cp.async, TMA)
  std::int64_t read = 0;      // read into registers by load instructions (ldmatrix, ld.shared)
  std::int64_t mma_read = 0;  // read by the tensor cores themselves (wgmma operands)
  std::int64_t write = 0;     // stored from registers (st.shared, stmatrix)
  SmemBytes& operator+=(const SmemBytes& o) {
    fill += o.fill, read += o.read, mma_read += o.mma_read, write += o.write;
    return *this;
  }
};

// What one shared-memory wavefront moves, as ncu counts it (smem_wavefronts, below).
inline constexpr std::int64_t kWavefrontBytes = 128;

// One kernel's on-chip counts (all CTAs), or one step's or one CTA's while they are built.
struct OnChipCounts {
  bool modelled = false;    // false: this kernel's warp layout is not described (counts stay 0)
  std::string layout;       // the warp layout in words ("4 warps × 32 query rows; ...")
  std::array<SmemBytes, kTensorCount> by_tensor{};
  std::int64_t mma = 0;       // warp-level mma.sync m16n8k16
  std::int64_t ldmatrix = 0;  // ldmatrix.x4 (512 bytes each)
  std::int64_t ld_shared = 0, st_shared = 0;  // other warp-level shared-memory loads and stores
  std::int64_t ex2 = 0;       // warp-level ex2.approx (the exponent unit)
  std::int64_t wgmma = 0;     // warpgroup-level wgmma (each is 4 warp instructions to ncu)
  std::int64_t wgmma_flops = 0;
  // Warp-level mbarrier operations (try_wait, arrive, arrive.expect_tx on the TMA ring's barriers):
  // one shared-memory wavefront each, which ncu counts among those that are neither loads nor stores
  // (with wgmma's operand reads). Not charged to the shared-memory pipe's time.
  std::int64_t mbarrier = 0;
  std::int64_t mbarrier_bytes() const { return mbarrier * kWavefrontBytes; }
  // Warp-level shuffles (shfl.sync): one wavefront each of the pipe that serves shared memory, which
  // ncu counts among shared memory's that are neither loads nor stores (gpu/bench/lsu_pipe.cu: 1.000
  // a shfl.sync.bfly). Charged to the shared-memory pipe's time; counted where a layout counts them
  // (standard's softmax_kernel; the flash kernels' few quad reductions a block pair are not).
  std::int64_t shfl = 0;
  std::int64_t shfl_bytes() const { return shfl * kWavefrontBytes; }
  // The latency path of an mma.sync kernel, counted once per CTA and block pair (its warps run it
  // side by side): the GEMMs a warp runs one after another, each starting on fragments it loads
  // (ldmatrix); those whose products the next instructions wait on (the softmax on S, an atomic add
  // of dQ; not an accumulator kept across steps, as O or dK); the k-steps of the GEMMs, each a
  // dependent MMA on every accumulator; the CTA-wide barriers (__syncthreads) between them.
  std::int64_t gemm_starts = 0, gemm_drains = 0, mma_ksteps = 0, barriers = 0;
  // Warp-level red.global.add instructions (the backward's dQ_i adds into the fp32 accumulator): the
  // SM's memory path takes each at the preset's rate for the kernel's requests, and a warp waits
  // for its own once the queue is full (docs/design.md#the-backwards-dq-reductions).
  std::int64_t red = 0;
  // The latency path of a kernel that computes on the FP32 pipe from shared memory (hbmlab's
  // flash1), counted the same way for its slowest warp: the FMAs it runs one after another on one
  // accumulator (its dot products) and the ld.shared those FMAs wait on; then its softmax, where
  // nothing else issues: the steps of its row reductions (a shuffle and a max or add each), its
  // ld.shared, FP32 operations, expf and divisions, each waiting on the one before.
  std::int64_t fma_chain = 0, fma_chain_loads = 0;
  std::int64_t shuffle_steps = 0, serial_loads = 0, serial_fp32 = 0, serial_exps = 0, serial_divides = 0;

  SmemBytes& operator[](Tensor t) { return by_tensor[static_cast<int>(t)]; }
  const SmemBytes& operator[](Tensor t) const { return by_tensor[static_cast<int>(t)]; }
  SmemBytes total() const;
  std::int64_t mma_flops() const { return mma * kMmaFlops; }
  OnChipCounts& operator+=(const OnChipCounts& o);
  OnChipCounts times(std::int64_t n) const;

  static constexpr std::int64_t kMmaFlops = 2 * 16 * 8 * 16;  // one m16n8k16
  static constexpr std::int64_t kLdmatrixBytes = 512;         // one ldmatrix.x4
};

// Shared-memory wavefronts of one warp-level access, from its lanes' byte addresses (< 0: the lane
// is inactive). Shared memory is 32 banks of 4 bytes; one wavefront (128 bytes, what ncu counts)
// serves each bank once: one 4-byte word per bank, however many lanes ask for that word (a
// broadcast). A 32-bit access serves the whole warp together; a 64- or 128-bit access serves each
// half-warp (lanes 0–15, 16–31) on its own, and a 128-bit access whose half-warp conflicts serves
// that half-warp's two quarter-warps on their own. So an access takes, for each group of lanes, the
// most distinct words any one bank is asked for, summed over the groups: 1 for 32 consecutive floats
// or one float for all lanes, 8 for 32 floats 32 bytes apart, 2 for 32 consecutive 8-byte pairs and
// also for one 8-byte pair or one 16-byte chunk that all lanes read, 4 for 32 consecutive 16-byte
// chunks. The rule is what ncu's SourceCounters give, instruction by instruction, for hbmlab's
// kernels on the H100 (gpu/bench/smem_source_ncu.sh; docs/on-chip.md#shared-memory-wavefronts).
using LaneAddresses = std::array<std::int64_t, 32>;
std::int64_t smem_wavefronts(const LaneAddresses& byte_address, std::int64_t access_bytes);
// ldmatrix.x4: lanes 8m … 8m + 7 give the 16-byte rows of matrix m, each matrix served on its own.
std::int64_t ldmatrix_wavefronts(const LaneAddresses& row_address);

// C (M×N) += A (M×K)·B (K×N) on a Wm × Wn grid of warps (see the file comment).
struct WarpGemm {
  Tensor a = Tensor::Q, b = Tensor::K;
  std::int64_t M = 0, N = 0, K = 0;
  std::int64_t Wm = 1, Wn = 1;
  bool a_in_registers = false, b_in_registers = false;
};
OnChipCounts warp_gemm(const WarpGemm& g, std::int64_t elem_bytes);

// FlashAttention-2's forward warp layout (mma.sync), shared by hbmlab's gpu/flash2.cu, PyTorch's
// flash_fwd_kernel and its split-KV kernel: W warps stacked along the Br query rows (Br/W rows
// each), each warp reading the whole K_j and V_j; Q_i re-read from shared memory at every j.
struct Fa2ForwardLayout {
  std::int64_t Br = 0, Bc = 0, d = 0, warps = 4;
  std::int64_t elem_bytes = 2;
  std::int64_t staged_output_bytes = 0;  // element bytes of O staged through shared memory (0: none)
};
OnChipCounts fa2_forward_pair(const Fa2ForwardLayout& l);  // one (i, j) block pair of one CTA
OnChipCounts fa2_forward_cta(const Fa2ForwardLayout& l);   // once per CTA: Q_i's fill, O's staging

// FlashAttention-2's backward warp layout (PyTorch's flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel,
// Flash_bwd_kernel_traits): one CTA per K_j, V_j (Bc keys), 8 warps, looping over the Br-row blocks
// Q_i, dO_i. S_ij = Q_i K_jᵀ and dP_ij = dO_i V_jᵀ on a `sdp_rows` × (8 / sdp_rows) warp grid;
// P_ij and dS_ij are stored to shared memory; dV_j += P_ijᵀ dO_i and dK_j += dS_ijᵀ Q_i on a
// `dkv_rows` × (8 / dkv_rows) grid over Bc × d; dQ_i = dS_ij K_j on a `dq_rows` × (8 / dq_rows)
// grid over Br × d, added to the fp32 accumulator in global memory from registers. Every operand
// of these five GEMMs comes from shared memory. dK_j and dV_j are staged through shared memory.
struct Fa2BackwardLayout {
  std::int64_t Br = 0, Bc = 0, d = 0, warps = 8;
  std::int64_t sdp_rows = 2, dkv_rows = 4, dq_rows = 2;
  std::int64_t elem_bytes = 2;
  // The H100's choice (flash_bwd_launch_template.h, 227 KiB of shared memory per block): d ≤ 64:
  // 128×128 with 4, 4, 4; d ≤ 128: 64×128 with 2, 4, 2; in general Br/32 warp rows for S, dP and dQ.
  static Fa2BackwardLayout for_blocks(std::int64_t Br, std::int64_t Bc, std::int64_t d, std::int64_t warps);
};
OnChipCounts fa2_backward_pair(const Fa2BackwardLayout& l);
OnChipCounts fa2_backward_cta(const Fa2BackwardLayout& l);
OnChipCounts fa2_backward_kernel(const KernelPlan& plan, const Fa2BackwardLayout& l);

// hbmlab's gpu/flash2_backward.cu: one CTA per K_j, V_j, one warp per 16 keys (Bc/16 warps).
// S_ijᵀ = K_j Q_iᵀ and dP_ijᵀ = V_j dO_iᵀ keys as rows, each warp reading its own 16 keys of K_j and
// V_j (kept in registers when d·Br ≤ 64·64) and all of Q_i and dO_i; P_ijᵀ and dS_ijᵀ stay in
// registers as the A operands of dV_j += P_ijᵀ dO_i and dK_j += dS_ijᵀ Q_i (all of dO_i and Q_i again,
// transposed); dS_ijᵀ goes to shared memory for dQ_i = dS_ij K_j on (Br/32) × (warps·32/Br) warps
// (two m16 row groups each); dK_j, dV_j are written from registers.
struct HbmlabBackwardLayout {
  std::int64_t Br = 0, Bc = 0, d = 0;
  std::int64_t elem_bytes = 2;
  std::int64_t warps() const { return Bc / 16; }
  bool kv_in_registers() const { return d * Br <= 64 * 64; }
};
OnChipCounts hbmlab_backward_pair(const HbmlabBackwardLayout& l);
OnChipCounts hbmlab_backward_cta(const HbmlabBackwardLayout& l);
OnChipCounts hbmlab_backward_kernel(const KernelPlan& plan, const HbmlabBackwardLayout& l);

// FA2's dQ conversion: each CTA stages its Br × d block of dQ (the dtype) through shared memory.
OnChipCounts fa2_convert_dq_kernel(const KernelPlan& plan, std::int64_t Br, std::int64_t d, std::int64_t elem_bytes);

// FlashAttention-3's forward on wgmma (Hopper), as cuDNN's and FA3's kernels run it: `warpgroups`
// consumer warpgroups of 64 query rows each (Br = 64·warpgroups); per (i, j) each issues
// S = Q_i K_jᵀ as d/16 wgmma m64n{Bc}k16 with both operands from shared memory, and O += P V_j as
// Bc/16 wgmma m64n{d}k16 with P in registers: the tensor cores read Q_i's 64 rows, all of K_j and
// all of V_j per warpgroup (`smem_mma_read`). S and P stay in registers; nothing goes through ldmatrix.
struct WgmmaForwardLayout {
  std::int64_t Bc = 0, d = 0, warpgroups = 2;
  std::int64_t elem_bytes = 2;
};
OnChipCounts wgmma_forward_pair(const WgmmaForwardLayout& l);
// A kernel of that layout (hbmlab's gpu/flash3.cu): its pairs, plus per CTA Q_i's fill by the copy
// engine and O_i stored from registers into shared memory for the bulk tensor store.
OnChipCounts wgmma_forward_kernel(const KernelPlan& plan, const WgmmaForwardLayout& l);

// FlashAttention-3's backward on wgmma (hbmlab's gpu/flash3_backward.cu): one CTA per K_j, V_j
// (Bc keys), `warpgroups` consumer warpgroups of Bc/warpgroups keys each, looping over Br-row blocks
// Q_i, dO_i that the copy engine brings into a ring. Per (i, j) each warpgroup issues S_ijᵀ = K_j Q_iᵀ
// and dP_ijᵀ = V_j dO_iᵀ (d/16 wgmma m64n{Br}k16 each, both operands from shared memory: its own
// keys of K_j, V_j and all of Q_i, dO_i), dV_j += P_ijᵀ dO_i and dK_j += dS_ijᵀ Q_i (Br/16 m64n{d}k16
// each, P and dS from registers, all of dO_i and Q_i again), stores dS_ijᵀ to shared memory, and
// dQ_i = dS_ij K_j on its d/warpgroups columns (Bc/16 m64n{d/warpgroups}k16, all of dS_ijᵀ and
// those columns of K_j), added to the fp32 accumulator in HBM from registers. L_i and D_i are staged
// through shared memory by st.shared and read back by every warp. dK_j and dV_j are written from
// registers; nothing goes through ldmatrix.
struct WgmmaBackwardLayout {
  std::int64_t Br = 0, Bc = 0, d = 0, warpgroups = 2;
  std::int64_t elem_bytes = 2;
};
OnChipCounts wgmma_backward_pair(const WgmmaBackwardLayout& l);
// A kernel of that layout: its pairs (with Q_i and dO_i filled by TMA), plus per CTA K_j and V_j's fill.
OnChipCounts wgmma_backward_kernel(const KernelPlan& plan, const WgmmaBackwardLayout& l);

// A kernel that touches no shared memory: every thread streams its 16-byte chunks through
// registers (hbmlab's and PyTorch's D = rowsum(dO ∘ O) kernels, hbmlab's dQ conversion, and the
// split-KV combine, one warp per query row with shuffle reductions). Zero bytes, described.
OnChipCounts registers_only_kernel(std::string layout);

// hbmlab's gpu/flash1.cu: one CTA of 256 threads (8 warps) per (batch, head), plain fp32 FMAs, no
// tensor cores. Every shared-memory access is a 32-bit or 128-bit access per lane: K_j, V_j (per
// outer step) and Q_i, O_i, ℓ_i, m_i (per pair) stored element-wise as fp32; S_ij = τ Q_i K_jᵀ with a
// thread per score, reading its Q_i row four elements at a time (a broadcast: a warp shares the
// row) and its K_j row one at a time; the softmax a warp per row; O_i a thread per element, reading
// P̃_ij four at a time and V_j's column one at a time. Bytes are the accesses' wavefronts × 128
// (smem_wavefronts): a broadcast 16-byte read is 256 bytes, a 32-bit access of a few lanes 128.
// Barriers: one at the start, one per K/V block, four per computed pair. Its latency path per pair
// (OnChipCounts::fma_chain …): the slowest thread's dot products of S_ij and of P̃_ij V_j, one
// accumulator each, and the slowest warp's softmax rows (docs/design.md#the-sms-pipes).
struct Flash1Layout {
  std::int64_t N = 0, Br = 0, Bc = 0, d = 0;
  bool causal = false;
  static constexpr std::int64_t kThreads = 256;
};
OnChipCounts flash1_kernel(const KernelPlan& plan, const Flash1Layout& l);

// The FlashAttention paper's forward kernel (Algorithm 1: one CTA per (batch, head), K_j, V_j
// outer, O_i, ℓ_i, m_i in HBM), as the FlashAttention-2 paper describes its warps (§3.3,
// "split-K"): W warps (4) share Q_i and split K_j, V_j. K_j's 16-key tiles (the last zero-padded)
// go to the warps in contiguous runs of ⌈tiles/W⌉; per (i, j) every warp with keys ldmatrix-loads
// all of Q_i (its rows padded to 16) and computes S on its own keys (mma.sync m16n8k16), then P̃ V
// on its own rows of V_j with P̃ in registers. The warps' partials meet in shared memory: their row
// maxima (a lane of four per row stores, every warp reads all W for its rows), their row sums
// likewise, and their fp32 P̃ V (8 bytes a lane, rows d + 8 floats apart: no bank conflict). A
// thread per row then reads the W maxima and sums, takes m_i, ℓ_i from HBM, and stores the two
// factors of line 12 (ℓ_i·e^(m_i−m_new)/ℓ_new and e^(m̃−m_new)/ℓ_new); a thread per element of O_i
// sums the W partials with its row's factors and O_i from HBM. Q_i (each pair) and K_j, V_j (each
// block) are filled by the copy path. Four barriers a pair: after the fills, the maxima, the rest
// of the exchange, the factors. Counted pair by pair from the plan's grid (ragged and causal blocks
// exactly).
struct Flash1WarpLayout {
  std::int64_t d = 0, warps = 4;
  std::int64_t elem_bytes = 2;
};
// One (i, j) pair of `rows` × `cols` real rows and keys; `fill_kv` adds K_j, V_j's fill (a block's first pair).
OnChipCounts flash1_warp_pair(const Flash1WarpLayout& l, std::int64_t rows, std::int64_t cols, bool fill_kv);
OnChipCounts flash1_warp_kernel(const KernelPlan& plan, const AttentionProblem& p, const Blocks& b,
                                const Flash1WarpLayout& l);

// hbmlab's gpu/standard.cu, its three kernels (N a multiple of 8: the 16-byte paths), 4 warps each:
//  - qk_kernel, one Br × Bc tile of S per CTA on 2 × 2 warps (WMMA m16n16k16; ptxas lowers a
//    fragment load from shared memory to one ldmatrix.x4 and the MMA to two m16n8k16): Q_i and K_j
//    stored 16 bytes a lane, S_ij's fp32 accumulator stored (8 bytes a lane) and read back (8 bytes,
//    four loads per 8 elements) to leave as 16-byte rows of the dtype;
//  - softmax_kernel, one CTA per row of S: the row in fp32 (one 32-bit store per element), then
//    e^(x − max) read, stored and exponentiated element by element, then read back 8 bytes at a time;
//  - pv_kernel, one Br × d tile of O per CTA, P_ij and V_j arriving by cp.async, the warps on
//    (Br / max(16, Br/4)) × the rest of 4; O's fp32 accumulator staged like S's.
// Their latency path (OnChipCounts::gemm_starts …): qk_kernel one GEMM of d/16 k-steps a tile, drained
// into S_ij, and 3 barriers; softmax_kernel 4 barriers a row (two block reductions); pv_kernel a GEMM
// of Bc/16 k-steps and 2 barriers per P_ij, V_j, and per tile of O one drain and 2 barriers.
struct StandardLayout {
  std::int64_t N = 0, Br = 0, Bc = 0, d = 0;
  std::int64_t elem_bytes = 2;
  std::int64_t softmax_threads() const;  // gpu/standard.cu's softmax_threads(N)
};
OnChipCounts standard_qk_kernel(const KernelPlan& plan, const StandardLayout& l);
OnChipCounts standard_softmax_kernel(const KernelPlan& plan, const StandardLayout& l);
OnChipCounts standard_pv_kernel(const KernelPlan& plan, const StandardLayout& l);

// hbmlab's gpu/flash_decoding.cu decode_split_kernel: 4 warps, each taking a quarter of every K_j,
// V_j's Bc keys for all Br packed query rows (Br/16 m16 groups). S = Q_i K_jᵀ: every warp reads all of
// Q_i and its quarter of K_j (ldmatrix.x4); O += P̃ V_j: P̃ in registers, each warp its quarter of V_j
// (ldmatrix.x4.trans). At the end the four warps' (m, ℓ, O) merge through shared memory in fp32.
// `unified`: flashdecoding++'s split, with no running max (no rescale) and the row max kept for the
// range check.
struct DecodeSplitLayout {
  std::int64_t Br = 16, Bc = 64, d = 128;
  bool unified = false;
  std::int64_t elem_bytes = 2;
  static constexpr std::int64_t kWarps = 4;
};
OnChipCounts decode_split_pair(const DecodeSplitLayout& l);
OnChipCounts decode_split_cta(const DecodeSplitLayout& l, std::int64_t rows);  // rows: the real rows of Q_i
// real_rows: the real (unpadded) query rows summed over the plan's CTAs.
OnChipCounts decode_split_kernel(const KernelPlan& plan, const DecodeSplitLayout& l, std::int64_t real_rows);

// hbmlab's decode_combine_kernel: a warp per packed row, no shared memory; a synchronised row takes
// e^(LSE_s − max) of every split twice (for the sum, a lane per split; for the weights, the warp per
// split), a unified row (flashdecoding++ in range) none. No barrier: its warps never meet. `synchronised_rows`: over all instances.
OnChipCounts decode_combine_kernel(std::int64_t splits, std::int64_t synchronised_rows, std::int64_t unified_rows);

// The (i, j) pairs a plan's CTAs compute: its phases that do matmul work, over all instances.
std::int64_t computed_pairs(const KernelPlan& plan);

// A forward kernel of the FA2 layout: pairs × fa2_forward_pair + CTAs × fa2_forward_cta.
OnChipCounts fa2_forward_kernel(const KernelPlan& plan, const Fa2ForwardLayout& l);

}  // namespace hbmlab
