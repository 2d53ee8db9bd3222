// flash2 backward: FlashAttention-2's backward pass (FlashAttention-2 paper, Algorithm 2) in the three
// launches the flash2 backward room plans (sim/algo/flash2_backward), reading the L the forward kept.
// Run: hbmlab measure --algo flash2 --pass backward --seq-len 4096 --head-dim 128 [--causal both]
//
// Versions (the shape table and the family are at the bottom):
//   v1 (a) dot_do_o_kernel: one CTA per (row block i, batch·head): D_i = rowsum(dO_i ∘ O_i) in fp32
//      (line 4), and the block's rows of the fp32 dQ accumulator cleared (line 3).
//      (b) flash2_backward_kernel: one CTA per (K_j, V_j block, batch·head), one warp per 16 keys.
//      K_j, V_j are loaded once; Q_i, dO_i, L_i, D_i stream through a two-stage cp.async ring for
//      every row block i that sees a key of the block (causal: from the diagonal on). Each warp
//      computes its 16 rows of S_ijᵀ = K_j Q_iᵀ and dP_ijᵀ = V_j dO_iᵀ, keys as rows, so that P_ijᵀ
//      and dS_ijᵀ are already, in registers, the A operands of dV_j += P_ijᵀ dO_i and dK_j += dS_ijᵀ Q_i;
//      dK_j and dV_j stay in registers for the whole loop and are written once. dS_ijᵀ goes through
//      shared memory once, for dQ_i += dS_ij K_j, which the warps share out by rows and columns and
//      add into the fp32 accumulator in HBM with vector atomics (red.global.add.v2.f32, in the L2).
//      (c) convert_dq_kernel: dQ = τ·dQ_accum in the dtype, one CTA per row block.
//      Tensor cores throughout (mma.sync m16n8k16, fp32 accumulators), operands through ldmatrix
//      from XOR-swizzled shared memory as in flash2.cu; P and dS are rounded to the dtype before the
//      products that take them, as the forward rounds P̃.
//   v2: dQ_i += dS_ij K_j runs one step late, after the next row block's dV_j and dK_j, from a second
//      dS_ijᵀ buffer, so a step needs one barrier instead of two and a warp's dQ work overlaps the
//      others' S and dP; the next row block's copies are issued after that barrier. On the H100,
//      fp16, Br × Bc = 64 × 128: d = 64 1.10× faster than v1 (N = 4K and 16K), d = 128 1.01×; ncu
//      puts the d = 128 kernel at 81 % of the L1/shared-memory throughput and 40 % of the tensor
//      pipe: every warp reads all of Q_i and dO_i from shared memory four times a step.
//   v3: each warp's share of dQ_i is two m16 row groups wide (kDqWM), so every K_j fragment it reads
//      feeds two MMAs: at d = 128 a sixth fewer shared-memory reads in that product, 1.02–1.03× faster
//      than v2 (N = 4K, 16K); d = 64 within ±1 %. 0.87–1.09× the speed of PyTorch's FlashAttention-2
//      backward on the recorded sweep, 0.89–0.96× at N ≥ 4K (assets/measurements/h100-backward-speed.md).
#include <cmath>
#include <stdexcept>

#include "gpu/backward_rows.cuh"
#include "gpu/kernels.hpp"
#include "gpu/ptx.cuh"
#include "gpu/tiles.cuh"

namespace hbmlab {
// The rooms these kernels run, bound by their objects (sim/algo/registry.cpp lists the same accessors).
const Algorithm& flash2_backward_room();  // sim/algo/flash2_backward
}  // namespace hbmlab

namespace hbmlab::gpu {
namespace {

// [SECTION] (b) the main kernel: one CTA per K_j, V_j

template <int kBc>
constexpr int kBackwardThreads = kBc / 16 * 32;  // one warp per 16 keys

// Shared memory of one CTA, in bytes from the start: K_j, V_j once; two stages of Q_i, dO_i, of dS_ijᵀ,
// and of L_i and D_i (fp32).
template <int kD, int kBr, int kBc>
struct BackwardSmem {
  static constexpr int K = 0;                       // (Bc, d)
  static constexpr int V = K + kBc * kD * 2;        // (Bc, d)
  static constexpr int Q = V + kBc * kD * 2;        // 2 × (Br, d)
  static constexpr int dO = Q + 2 * kBr * kD * 2;   // 2 × (Br, d)
  static constexpr int dS = dO + 2 * kBr * kD * 2;  // 2 × (Bc, Br): dS_ijᵀ, keys as rows
  static constexpr int LD = dS + 2 * kBc * kBr * 2; // 2 × (L_i (Br), D_i (Br))
  static constexpr int bytes = LD + 2 * 2 * kBr * 4;
};

template <typename T, int kD, int kBr, int kBc, bool kCausal>
__global__ void __launch_bounds__(kBackwardThreads<kBc>)
flash2_backward_kernel(const T* __restrict__ hbm_Q, const T* __restrict__ hbm_K, const T* __restrict__ hbm_V,
                       const T* __restrict__ hbm_dO, const float* __restrict__ hbm_L,
                       const float* __restrict__ hbm_D, float* __restrict__ hbm_dQ_accum, T* __restrict__ hbm_dK,
                       T* __restrict__ hbm_dV, int N, float scale, float scale_log2) {
  constexpr int kWarps = kBc / 16, kThreads = kWarps * 32;
  constexpr int kKSteps = kD / 16;    // k16 steps across d (S_ijᵀ, dP_ijᵀ)
  constexpr int kQTiles = kBr / 8;    // n8 tiles across the Br queries (S_ijᵀ, dP_ijᵀ accumulators)
  constexpr int kDTiles = kD / 8;     // n8 tiles across d (dK_j, dV_j accumulators)
  // dQ_i (Br × d) shared out: each warp takes two m16 row groups (so that every K_j fragment it reads
  // feeds two MMAs) of kDqTiles n8 column tiles; kBr/32 row slots, the d columns split over the rest.
  constexpr int kDqWM = 2;
  constexpr int kDqRowGroups = kBr / (16 * kDqWM);
  constexpr int kDqColParts = kWarps / kDqRowGroups;
  constexpr int kDqTiles = kDTiles / kDqColParts;  // n8 tiles of dQ_i per warp
  // At d = 64, Br = 64 the warp's A fragments of K_j and V_j (32 registers) stay in registers for the
  // whole loop; at d = 128 they would push the 128 registers of dK_j, dV_j past 255, and at Br = 128
  // the 128 of S_ijᵀ, dP_ijᵀ, so they are re-read from shared memory.
  constexpr bool kKVInRegisters = kD * kBr <= 64 * 64;
  static_assert(kD % 16 == 0 && kD / 8 >= 8, "d: a multiple of 16, at least 64 (the swizzle needs 8 chunks a row)");
  static_assert(kBr % 64 == 0, "Br: dS_ijᵀ rows hold Br queries, at least 8 chunks of 16 bytes for the swizzle");
  static_assert(kDqRowGroups >= 1 && kWarps % kDqRowGroups == 0 && kDqTiles % 2 == 0,
                "dQ_i's tiles must share out evenly over the warps");
  static_assert(kThreads >= 2 * kBr, "one thread per L_i or D_i value");
  using Smem = BackwardSmem<kD, kBr, kBc>;
  constexpr float kLog2e = 1.4426950408889634f;

  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t sram_K = smem_u32(smem) + Smem::K;
  const std::uint32_t sram_V = smem_u32(smem) + Smem::V;
  const std::uint32_t sram_Q = smem_u32(smem) + Smem::Q;
  const std::uint32_t sram_dO = smem_u32(smem) + Smem::dO;
  const std::uint32_t sram_dS = smem_u32(smem) + Smem::dS;
  const std::uint32_t sram_LD = smem_u32(smem) + Smem::LD;
  const float* sram_LD_f = reinterpret_cast<const float*>(smem + Smem::LD);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int j = blockIdx.x;
  const std::int64_t bh = blockIdx.y;
  const T* Q = hbm_Q + bh * N * kD;
  const T* dO = hbm_dO + bh * N * kD;
  const float* L = hbm_L + bh * N;
  const float* D = hbm_D + bh * N;
  float* dQ_accum = hbm_dQ_accum + bh * N * kD;
  const int key0 = j * kBc;  // K_j's first key
  const int Tr = (N + kBr - 1) / kBr;
  // Causal: row blocks whose last query lies before K_j's first key see none of it (line 8's skip).
  const int i_begin = kCausal ? key0 / kBr : 0;

  // line 9 for row block i: Q_i, dO_i, and L_i, D_i (rows ≥ N read as zeros).
  auto load_rows = [&](int stage, int i) {
    load_tile<T, kD, kBr, kThreads>(sram_Q + stage * kBr * kD * 2, Q, i * kBr, N, tid);
    load_tile<T, kD, kBr, kThreads>(sram_dO + stage * kBr * kD * 2, dO, i * kBr, N, tid);
    if (tid < 2 * kBr) {
      const int row = i * kBr + tid % kBr;
      const float* src = tid < kBr ? L : D;
      cp_async_4(sram_LD + (stage * 2 * kBr + tid) * 4, row < N ? src + row : src, row < N ? 4 : 0);
    }
  };
  // line 6: load K_j, V_j (line 7: dK_j, dV_j ← 0 in registers, below); and the first row block.
  load_tile<T, kD, kBc, kThreads>(sram_K, hbm_K + bh * N * kD, key0, N, tid);
  load_tile<T, kD, kBc, kThreads>(sram_V, hbm_V + bh * N * kD, key0, N, tid);
  load_rows(0, i_begin);
  cp_async_commit();

  float reg_dK[kDTiles][4], reg_dV[kDTiles][4];  // this warp's 16 keys of dK_j, dV_j  // (16, d) each
#pragma unroll
  for (int t = 0; t < kDTiles; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) reg_dK[t][e] = reg_dV[t][e] = 0.f;
  std::uint32_t reg_K[kKVInRegisters ? kKSteps : 1][4], reg_V[kKVInRegisters ? kKSteps : 1][4];

  // Per-thread ldmatrix offsets (FragmentOffsets, gpu/tiles.cuh):
  //   kv_at: A fragments of the warp's 16 keys of K_j, V_j (m = keys, k = d);
  //   qt_at: B fragments of Q_iᵀ, dO_iᵀ (k = d, n = queries), straight from their rows;
  //   tr_at: B fragments of Q_i, dO_i (k = queries, n = d) and of K_j (k = keys, n = d), transposed.
  const FragmentOffsets kv_at = FragmentOffsets::make<kD>(warp * 16 + (lane % 8) + 8 * ((lane / 8) % 2), lane / 16);
  const FragmentOffsets qt_at = FragmentOffsets::make<kD>((lane % 8) + 8 * (lane / 16), (lane / 8) % 2);
  const FragmentOffsets tr_at = FragmentOffsets::make<kD>((lane % 8) + 8 * ((lane / 8) % 2), lane / 16);
  // dQ_i: this warp's row group and column part; the A fragments of dS_ij come transposed out of
  // dS_ijᵀ (rows = keys, Br queries a row), the B fragments of K_j transposed from its columns.
  const int dq_group = warp % kDqRowGroups, dq_part = warp / kDqRowGroups;
  std::uint32_t ds_at[kDqWM];  // the query chunks of the warp's m16 groups dq_group·kDqWM + g
#pragma unroll
  for (int g = 0; g < kDqWM; ++g)
    ds_at[g] = swz<kBr>((lane % 8) + 8 * (lane / 16), 2 * (dq_group * kDqWM + g) + (lane / 8) % 2) * 16;
  std::uint32_t kq_at[kDqTiles / 2];
#pragma unroll
  for (int p = 0; p < kDqTiles / 2; ++p)
    kq_at[p] = swz<kD>((lane % 8) + 8 * ((lane / 8) % 2), 2 * (dq_part * kDqTiles / 2 + p) + lane / 16) * 16;
  // dS_ijᵀ stores: rows warp·16 + lane/4 (+ 8), two queries at (lane % 4)·2 of each n8 tile.
  const std::uint32_t ds_row = (warp * 16 + lane / 4) * kBr * 2 + (lane % 4) * 4;

  // line 15: dQ_i += dS_ij K_j for row block i, from dS_ijᵀ in `sdS`, added into the fp32 accumulator in
  // HBM  // (32, d / kDqColParts) per warp
  auto add_dQ = [&](int i, std::uint32_t sdS) {
    float reg_dQ[kDqWM][kDqTiles][4];
#pragma unroll
    for (int g = 0; g < kDqWM; ++g)
#pragma unroll
      for (int t = 0; t < kDqTiles; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) reg_dQ[g][t][e] = 0.f;
#pragma unroll
    for (int kt = 0; kt < kBc / 16; ++kt) {
      std::uint32_t a[kDqWM][4];
#pragma unroll
      for (int g = 0; g < kDqWM; ++g)
        ldmatrix_x4_trans(a[g], sdS + ds_at[g] + kt * 16 * kBr * 2);  // keys kt·16 …, the group's 16 queries
#pragma unroll
      for (int p = 0; p < kDqTiles / 2; ++p) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, sram_K + kq_at[p] + kt * 16 * kD * 2);
#pragma unroll
        for (int g = 0; g < kDqWM; ++g) {
          mma_16816<T>(reg_dQ[g][2 * p], a[g], b[0], b[1]);
          mma_16816<T>(reg_dQ[g][2 * p + 1], a[g], b[2], b[3]);
        }
      }
    }
#pragma unroll
    for (int g = 0; g < kDqWM; ++g)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = i * kBr + (dq_group * kDqWM + g) * 16 + lane / 4 + 8 * h;
        if (row < N) {
          float* at = dQ_accum + static_cast<std::int64_t>(row) * kD + dq_part * kDqTiles * 8 + (lane % 4) * 2;
#pragma unroll
          for (int t = 0; t < kDqTiles; ++t)
            atomicAdd(reinterpret_cast<float2*>(at + t * 8), make_float2(reg_dQ[g][t][2 * h], reg_dQ[g][t][2 * h + 1]));
        }
      }
  };

  for (int i = i_begin; i < Tr; ++i) {  // line 8
    const int n = i - i_begin, stage = n & 1;
    // One barrier a step: after it, this row block's tiles are in (each thread waited for its own
    // copies), and every warp has finished the previous step, so the stage it read and the dS_ijᵀ
    // buffer of two steps back may be overwritten. The next row block's copies then have a whole
    // step to land.
    cp_async_wait<0>();
    __syncthreads();
    if (i + 1 < Tr) load_rows(stage ^ 1, i + 1);
    cp_async_commit();
    if constexpr (kKVInRegisters) {
      if (n == 0) {
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
          ldmatrix_x4(reg_K[kk], sram_K + kv_at.get<kD>(kk, 0));
          ldmatrix_x4(reg_V[kk], sram_V + kv_at.get<kD>(kk, 0));
        }
      }
    }
    const std::uint32_t sQ = sram_Q + stage * kBr * kD * 2;
    const std::uint32_t sdO = sram_dO + stage * kBr * kD * 2;
    const float* sL = sram_LD_f + stage * 2 * kBr;
    const float* sD = sL + kBr;

    // line 10: S_ijᵀ = K_j Q_iᵀ; line 13: dP_ijᵀ = V_j dO_iᵀ  // (16, Br) per warp
    float reg_S[kQTiles][4], reg_dP[kQTiles][4];
#pragma unroll
    for (int t = 0; t < kQTiles; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) reg_S[t][e] = reg_dP[t][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      std::uint32_t aK[4], aV[4];
      if constexpr (kKVInRegisters) {
#pragma unroll
        for (int e = 0; e < 4; ++e) aK[e] = reg_K[kk][e], aV[e] = reg_V[kk][e];
      } else {
        ldmatrix_x4(aK, sram_K + kv_at.get<kD>(kk, 0));
        ldmatrix_x4(aV, sram_V + kv_at.get<kD>(kk, 0));
      }
#pragma unroll
      for (int t = 0; t < kQTiles; t += 2) {
        std::uint32_t b[4];
        ldmatrix_x4(b, sQ + qt_at.get<kD>(kk, t * 8));  // queries t·8 … t·8 + 15
        mma_16816<T>(reg_S[t], aK, b[0], b[1]);
        mma_16816<T>(reg_S[t + 1], aK, b[2], b[3]);
        ldmatrix_x4(b, sdO + qt_at.get<kD>(kk, t * 8));
        mma_16816<T>(reg_dP[t], aV, b[0], b[1]);
        mma_16816<T>(reg_dP[t + 1], aV, b[2], b[3]);
      }
    }

    // line 11: P_ij = exp(S_ij − L_i); line 14: dS_ij = P_ij ∘ (dP_ij − D_i). Transposed here: this
    // thread holds keys k_row and k_row + 8, and two queries of each n8 tile. Both are rounded to the
    // dtype once, as the A operands of the products below (two n8 tiles make one k16 step).
    const int q0 = i * kBr;
    const int k_row = key0 + warp * 16 + lane / 4;
    const bool need_mask = q0 + kBr > N || key0 + kBc > N || (kCausal && q0 < key0 + kBc - 1);
    std::uint32_t reg_P16[kQTiles][2], reg_dS16[kQTiles][2];
#pragma unroll
    for (int t = 0; t < kQTiles; ++t) {
      const int qc = t * 8 + (lane % 4) * 2;  // the thread's first query column in the block
      const float2 Lq = *reinterpret_cast<const float2*>(sL + qc);
      const float2 Dq = *reinterpret_cast<const float2*>(sD + qc);
      float p[4], ds[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float Lv = (e & 1) ? Lq.y : Lq.x, Dv = (e & 1) ? Dq.y : Dq.x;
        p[e] = fast_exp2(reg_S[t][e] * scale_log2 - Lv * kLog2e);
        if (need_mask) {  // keys or queries past N (ragged blocks), and keys after the query
          const int q = q0 + qc + (e & 1), key = k_row + 8 * (e / 2);
          if (q >= N || key >= N || (kCausal && key > q)) p[e] = 0.f;
        }
        ds[e] = p[e] * (reg_dP[t][e] - Dv);
      }
      reg_P16[t][0] = pack2<T>(p[0], p[1]);
      reg_P16[t][1] = pack2<T>(p[2], p[3]);
      reg_dS16[t][0] = pack2<T>(ds[0], ds[1]);
      reg_dS16[t][1] = pack2<T>(ds[2], ds[3]);
    }
    // dS_ijᵀ to shared memory for line 15, which the warps run after the next step's barrier (two
    // buffers, one per step in flight).
    const std::uint32_t sdS_row = sram_dS + stage * kBc * kBr * 2 + ds_row;
#pragma unroll
    for (int t = 0; t < kQTiles; ++t) {
      const std::uint32_t chunk = (t ^ (lane / 4)) * 16;  // swz<kBr>: rows lane/4 and lane/4 + 8 share row mod 8
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sdS_row + chunk), "r"(reg_dS16[t][0]));
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sdS_row + 8 * kBr * 2 + chunk), "r"(reg_dS16[t][1]));
    }

    // line 12: dV_j += P_ijᵀ dO_i; line 16: dK_j += dS_ijᵀ Q_i  (k runs over the Br queries)
#pragma unroll
    for (int kt = 0; kt < kBr / 16; ++kt) {
      const std::uint32_t aP[4] = {reg_P16[2 * kt][0], reg_P16[2 * kt][1], reg_P16[2 * kt + 1][0], reg_P16[2 * kt + 1][1]};
      const std::uint32_t aS[4] = {reg_dS16[2 * kt][0], reg_dS16[2 * kt][1], reg_dS16[2 * kt + 1][0],
                                   reg_dS16[2 * kt + 1][1]};
#pragma unroll
      for (int dt = 0; dt < kDTiles; dt += 2) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, sdO + tr_at.get<kD>(dt / 2, kt * 16));  // queries kt·16 …, d columns dt·8 …
        mma_16816<T>(reg_dV[dt], aP, b[0], b[1]);
        mma_16816<T>(reg_dV[dt + 1], aP, b[2], b[3]);
        ldmatrix_x4_trans(b, sQ + tr_at.get<kD>(dt / 2, kt * 16));
        mma_16816<T>(reg_dK[dt], aS, b[0], b[1]);
        mma_16816<T>(reg_dK[dt + 1], aS, b[2], b[3]);
      }
    }
    // line 15 for the previous row block, whose dS_ijᵀ every warp stored before this step's barrier.
    if (n > 0) add_dQ(i - 1, sram_dS + ((n - 1) & 1) * kBc * kBr * 2);
  }
  __syncthreads();  // the last row block's dS_ijᵀ
  add_dQ(Tr - 1, sram_dS + ((Tr - 1 - i_begin) & 1) * kBc * kBr * 2);

  // line 18: write dK_j = τ·dK_j (τ, the softmax scale, was left out of dS) and dV_j, once.
  T* dK = hbm_dK + bh * N * kD;
  T* dV = hbm_dV + bh * N * kD;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = key0 + warp * 16 + lane / 4 + 8 * h;
    if (key >= N) continue;
#pragma unroll
    for (int t = 0; t < kDTiles; ++t) {
      const std::int64_t at = static_cast<std::int64_t>(key) * kD + t * 8 + (lane % 4) * 2;
      *reinterpret_cast<typename Pair<T>::type*>(dK + at) = Pair<T>::make(reg_dK[t][2 * h] * scale, reg_dK[t][2 * h + 1] * scale);
      *reinterpret_cast<typename Pair<T>::type*>(dV + at) = Pair<T>::make(reg_dV[t][2 * h], reg_dV[t][2 * h + 1]);
    }
  }
}

// [SECTION] Launch: the three kernels in order on one stream

template <typename T, int kD, int kBr, int kBc, bool kCausal>
void launch_shape(const AttentionProblem& p, const DeviceTensors& t, cudaStream_t stream, LaunchInfo* info) {
  constexpr int kThreads = kBackwardThreads<kBc>;
  constexpr int kSmem = BackwardSmem<kD, kBr, kBc>::bytes;
  auto kernel = flash2_backward_kernel<T, kD, kBr, kBc, kCausal>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const int N = static_cast<int>(p.seq_len);
  const auto instances = static_cast<unsigned>(p.instances());
  const dim3 row_blocks((N + kBr - 1) / kBr, instances), kv_blocks((N + kBc - 1) / kBc, instances);
  if (info != nullptr) {  // the main kernel: the D and conversion kernels are short streams beside it
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    info->threads_per_cta = kThreads;
    info->registers_per_thread = attr.numRegs;
    info->smem_bytes_per_cta = static_cast<int>(kSmem + attr.sharedSizeBytes);
    info->ctas = static_cast<long long>(kv_blocks.x) * kv_blocks.y;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info->ctas_per_sm, kernel, kThreads, kSmem));
    return;
  }
  if (t.dQ_accum == nullptr)
    throw std::invalid_argument("flash2 backward: the fp32 dQ accumulator is missing (AttentionBuffers allocates it)");
  const double scale = 1.0 / std::sqrt(static_cast<double>(kD));
  dot_do_o_kernel<T, kD, kBr><<<row_blocks, kRowThreads, 0, stream>>>(t.at<const T>(Tensor::O), t.at<const T>(Tensor::dO),
                                                                     t.at<float>(Tensor::D), t.dQ_accum, N);
  CUDA_CHECK_LAUNCH();
  kernel<<<kv_blocks, kThreads, kSmem, stream>>>(
      t.at<const T>(Tensor::Q), t.at<const T>(Tensor::K), t.at<const T>(Tensor::V), t.at<const T>(Tensor::dO),
      t.at<const float>(Tensor::lse), t.at<const float>(Tensor::D), t.dQ_accum, t.at<T>(Tensor::dK), t.at<T>(Tensor::dV),
      N, static_cast<float>(scale), static_cast<float>(scale * 1.4426950408889634));
  CUDA_CHECK_LAUNCH();
  convert_dq_kernel<T, kD, kBr><<<row_blocks, kRowThreads, 0, stream>>>(t.dQ_accum, t.at<T>(Tensor::dQ), N,
                                                                       static_cast<float>(scale));
  CUDA_CHECK_LAUNCH();
}

template <typename T, int kD, int kBr, int kBc>
void launch_causal(const AttentionProblem& p, bool, const DeviceTensors& t, cudaStream_t s, LaunchInfo* info) {
  if (p.causal) launch_shape<T, kD, kBr, kBc, true>(p, t, s, info);
  else launch_shape<T, kD, kBr, kBc, false>(p, t, s, info);
}

struct Row {
  template <int D, int BR, int BC>
  static constexpr CompiledShape row() {
    return {D, BR, BC, &launch_causal<__half, D, BR, BC>, &launch_causal<__nv_bfloat16, D, BR, BC>};
  }
};

// Br × Bc: Br query rows per inner step, Bc keys per CTA (Bc/16 warps). The first per d is the default.
constexpr auto kShapes = shape_table<kernel_tiles::flash2_backward, Row>();

class Flash2BackwardKernels final : public KernelFamily {
public:
  Algo algo() const override { return flash2_backward_room(); }
  std::span<const CompiledShape> shapes() const override { return kShapes; }
  // The forward's L; D; and dO, dQ, dK, dV. O comes with every family.
  std::vector<ScratchTensor> scratch(const AttentionProblem& p) const override {
    const std::int64_t rows = p.instances() * p.seq_len, elems = rows * p.head_dim * p.elem_bytes();
    return {{Tensor::lse, rows * kStatBytes}, {Tensor::D, rows * kStatBytes}, {Tensor::dO, elems},
            {Tensor::dQ, elems},              {Tensor::dK, elems},            {Tensor::dV, elems}};
  }
  std::int64_t dq_accumulator_bytes(const AttentionProblem& p) const override {
    return p.instances() * p.seq_len * p.head_dim * kStatBytes;
  }
  // Each gradient is a sum, over up to N keys or queries, of products one of whose factors (P_ij or
  // dS_ij) is rounded to the dtype (u) before the tensor-core product, accumulated in fp32; D comes
  // from the dtype's O. Worst case, the error is u·Σ|terms| for the rounding of P or dS and as much
  // again through D: Σ|terms| stays near the column sums of P, which reach ln N + 1 ≈ 8 for the
  // first keys under a causal mask at N = 1000. So 16u absolute, plus 16u relative for the final
  // rounding of dQ, dK, dV to the dtype.
  Tolerance tolerance(Dtype dtype) const override {
    const double u = dtype == Dtype::fp16 ? 4.9e-4 : 3.9e-3;
    return {16 * u, 16 * u};
  }
  // Scores of ±1e4 make P one-hot: dS = P ∘ (dP − D) is then a difference of nearly equal numbers,
  // D = rowsum(dO ∘ O) coming from the dtype's O (u·|dO·V| off), and dK = τ·dSᵀQ multiplies that by
  // |Q| ≈ 1e4 (tens, absolute, on the H100). The reference takes the exact O; so does no kernel.
  std::string intended_difference(InputKind kind) const override {
    return kind == InputKind::large_logits ? "large_logits: D from the dtype's O, times |Q| ~ 1e4 in dK and dQ" : "";
  }
  const char* profiler_names() const override { return "dot_do_o_kernel|flash2_backward_kernel|convert_dq_kernel"; }
  const char* launch_note() const override { return "the main kernel (one CTA per K_j, V_j) of the three"; }
  std::int64_t default_max_n() const override { return 32768; }
};

}  // namespace

const KernelFamily& flash2_backward_kernels() {
  static const Flash2BackwardKernels family;
  return family;
}

}  // namespace hbmlab::gpu
