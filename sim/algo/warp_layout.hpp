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

// One kernel's on-chip counts (all CTAs), or one step's or one CTA's while they are built.
struct OnChipCounts {
  bool modelled = false;    // false: this kernel's warp layout is not described (counts stay 0)
  std::string layout;       // the warp layout in words ("4 warps × 32 query rows; ...")
  std::array<SmemBytes, kTensorCount> by_tensor{};
  std::int64_t mma = 0;       // warp-level mma.sync m16n8k16
  std::int64_t ldmatrix = 0;  // ldmatrix.x4 (512 bytes each)
  std::int64_t ld_shared = 0, st_shared = 0;  // other warp-level shared-memory loads and stores
  std::int64_t ex2 = 0;       // warp-level ex2.approx (the exponent unit)

  SmemBytes& operator[](Tensor t) { return by_tensor[static_cast<int>(t)]; }
  const SmemBytes& operator[](Tensor t) const { return by_tensor[static_cast<int>(t)]; }
  SmemBytes total() const;
  std::int64_t mma_flops() const { return mma * kMmaFlops; }
  OnChipCounts& operator+=(const OnChipCounts& o);
  OnChipCounts times(std::int64_t n) const;

  static constexpr std::int64_t kMmaFlops = 2 * 16 * 8 * 16;  // one m16n8k16
  static constexpr std::int64_t kLdmatrixBytes = 512;         // one ldmatrix.x4
};

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

// The (i, j) pairs a plan's CTAs compute: its phases that do matmul work, over all instances.
std::int64_t computed_pairs(const KernelPlan& plan);

// A forward kernel of the FA2 layout: pairs × fa2_forward_pair + CTAs × fa2_forward_cta.
OnChipCounts fa2_forward_kernel(const KernelPlan& plan, const Fa2ForwardLayout& l);

}  // namespace hbmlab
