// flash3 backward: FlashAttention-3's backward pass on Hopper (sm_90a), the FlashAttention-3 paper's
// Algorithm 3 in the three launches of flash2's backward (sim/algo/flash2_backward plans them; the
// flash3 backward room reads and writes the same HBM bytes for the same blocks).
// Run: hbmlab measure --algo flash3 --pass backward --seq-len 4096 --head-dim 128 [--causal both]
//
//   (a) dot_do_o_kernel (gpu/backward_rows.cuh): D_i = rowsum(dO_i ∘ O_i), the fp32 dQ accumulator cleared.
//   (b) flash3_backward_kernel: one CTA per (K_j, V_j block of Bc = 128 keys, batch·head), three
//       warpgroups. The producer warpgroup gives its registers away (setmaxnreg.dec to 24) and one of
//       its threads issues every copy: K_j and V_j once, then Q_i and dO_i (Br = 64 rows) for each row
//       block that sees a key of the block (causal: from the diagonal on) into a two-stage ring of
//       128-byte-swizzled tiles through the tensor copy engine (TMA), completing on mbarriers. The
//       two consumer warpgroups (setmaxnreg.inc to 240) own 64 keys each and, per row block:
//         S_ijᵀ = K_j Q_iᵀ and dP_ijᵀ = V_j dO_iᵀ  wgmma m64n64k16, both operands from shared memory;
//         P_ijᵀ = exp(S_ijᵀ − L_i), dS_ijᵀ = P_ijᵀ ∘ (dP_ijᵀ − D_i)  in the accumulators (keys as rows);
//         dV_j += P_ijᵀ dO_i, dK_j += dS_ijᵀ Q_i  wgmma m64nDk16, P and dS from registers (the
//             accumulator layout, rounded to the dtype), dO_i and Q_i transposed by the instruction;
//         dS_ijᵀ to shared memory, then dQ_i += dS_ij K_j  wgmma m64n(D/2)k16 with both operands
//             transposed from shared memory, each warpgroup half of d's columns over all Bc keys,
//             added into the fp32 accumulator in HBM with vector atomics (red.global.add.v2.f32).
//       dK_j, dV_j stay in registers for the whole loop and are written once.
//   (c) convert_dq_kernel (gpu/backward_rows.cuh): dQ = τ·dQ_accum in the dtype.
// Shapes: Br × Bc = 64 × 128 at d = 64 and 128; fp16 and bf16; causal or not; ragged N (the copy
// engine fills rows past N with zeros; queries and keys past N are masked). Self-attention, H = HKV.
// Needs sm_90a: built only for that target (gpu/CMakeLists.txt) and listed only where the GPU is a
// Hopper (flash3_available(), gpu/flash3.cu).
#include <cuda.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gpu/backward_rows.cuh"
#include "gpu/hopper.cuh"
#include "gpu/kernels.hpp"
#include "gpu/ptx.cuh"
#include "gpu/tensor_maps.hpp"

namespace hbmlab {
// The room these kernels run, bound by its object (sim/algo/registry.cpp lists the same accessor).
const Algorithm& flash3_backward_room();  // sim/algo/flash3
}  // namespace hbmlab

namespace hbmlab::gpu {

const KernelFamily& flash2_backward_kernels();  // gpu/flash2_backward.cu: the same numerics, the same tolerance

namespace {

// [SECTION] wgmma m64n32k16 and m64n64k16 with both operands from shared memory
//
// wgmma_ss_nN<T, 0, 0>: A and B K-major (K_j and Q_i as stored); <T, 1, 1>: both MN-major, transposed
// by the instruction (dS_ijᵀ and K_j as stored, for dQ_i = dS_ij K_j). accumulate = 0 overwrites D.
// n32 is only dQ_i's at d = 64, so it has the <T, 1, 1> forms alone.
template <typename T, int kTA, int kTB> __device__ __forceinline__ void wgmma_ss_n32(float (&d)[16], std::uint64_t a, std::uint64_t b, int accumulate);
template <> __device__ __forceinline__ void wgmma_ss_n32<__half, 1, 1>(float (&d)[16], std::uint64_t a, std::uint64_t b, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
               : "l"(a), "l"(b), "r"(accumulate));
}
template <> __device__ __forceinline__ void wgmma_ss_n32<__nv_bfloat16, 1, 1>(float (&d)[16], std::uint64_t a, std::uint64_t b, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
               : "l"(a), "l"(b), "r"(accumulate));
}
template <typename T, int kTA, int kTB> __device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], std::uint64_t a, std::uint64_t b, int accumulate);
template <> __device__ __forceinline__ void wgmma_ss_n64<__half, 0, 0>(float (&d)[32], std::uint64_t a, std::uint64_t b, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(a), "l"(b), "r"(accumulate));
}
template <> __device__ __forceinline__ void wgmma_ss_n64<__half, 1, 1>(float (&d)[32], std::uint64_t a, std::uint64_t b, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(a), "l"(b), "r"(accumulate));
}
template <> __device__ __forceinline__ void wgmma_ss_n64<__nv_bfloat16, 0, 0>(float (&d)[32], std::uint64_t a, std::uint64_t b, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(a), "l"(b), "r"(accumulate));
}
template <> __device__ __forceinline__ void wgmma_ss_n64<__nv_bfloat16, 1, 1>(float (&d)[32], std::uint64_t a, std::uint64_t b, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(a), "l"(b), "r"(accumulate));
}

// [SECTION] The main kernel: one CTA per K_j, V_j

constexpr int kBr = 64, kBc = 128, kStages = 2;  // query rows per step, keys per CTA, Q_i/dO_i ring depth
constexpr int kThreads = 3 * 128;                 // the producer warpgroup and two consumer warpgroups
constexpr int kConsumerWarps = 8;                 // arrivals that empty a ring stage (lane 0 of each)
// Registers per thread after setmaxnreg: 128·24 + 256·240 ≤ 65,536.
constexpr int kProducerRegisters = 24, kConsumerRegisters = 240;

// Shared memory of one CTA: K_j, V_j (each d/64 chunks of Bc rows × 128 bytes), the ring of Q_i and
// dO_i (kStages each, d/64 chunks of Br rows × 128 bytes), two dS_ijᵀ buffers (Bc keys × Br queries:
// one 128-byte row per key), two buffers of L_i and D_i (fp32), then the mbarriers. Every tile is in the 128-byte swizzle.
template <int kD>
struct Flash3BackwardSmem {
  static constexpr int kChunks = kD / 64;
  static constexpr int kKVBytes = kBc * kD * 2;  // K_j or V_j
  static constexpr int kRowBytes = kBr * kD * 2; // Q_i or dO_i
  static constexpr int kDSBytes = kBc * kBr * 2; // dS_ijᵀ
  static constexpr int kK = 0;
  static constexpr int kV = kK + kKVBytes;
  static constexpr int kQ = kV + kKVBytes;
  static constexpr int kdO = kQ + kStages * kRowBytes;
  static constexpr int kdS = kdO + kStages * kRowBytes;
  static constexpr int kLD = kdS + 2 * kDSBytes;       // two (L_i, D_i): 2·Br floats each
  static constexpr int kBarriers = kLD + 2 * 2 * kBr * 4;  // kv_full, full[stages], empty[stages]
  static constexpr int kBytes = kBarriers + 8 * (1 + 2 * kStages) + 1024;  // + room to align the base to 1024
};

template <typename T, int kD, bool kCausal>
__global__ void __launch_bounds__(kThreads, 1)
flash3_backward_kernel(const __grid_constant__ CUtensorMap map_Q, const __grid_constant__ CUtensorMap map_K,
                       const __grid_constant__ CUtensorMap map_V, const __grid_constant__ CUtensorMap map_dO,
                       const float* __restrict__ hbm_L, const float* __restrict__ hbm_D,
                       float* __restrict__ hbm_dQ_accum, T* __restrict__ hbm_dK, T* __restrict__ hbm_dV, int N,
                       float scale, float scale_log2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(kD == 64 || kD == 128, "d = 64 or 128");
  using Smem = Flash3BackwardSmem<kD>;
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr int kDqCols = kD / 2;  // dQ_i's columns per consumer warpgroup

  extern __shared__ unsigned char smem_raw[];
  const std::uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;  // the 128-byte swizzle repeats every 1024 bytes
  const std::uint32_t sram_K = base + Smem::kK, sram_V = base + Smem::kV;
  const std::uint32_t sram_Q = base + Smem::kQ, sram_dO = base + Smem::kdO, sram_dS = base + Smem::kdS;
  float* sram_LD = reinterpret_cast<float*>(smem_raw + (base - smem_u32(smem_raw)) + Smem::kLD);
  const std::uint32_t kv_full = base + Smem::kBarriers;
  auto full = [&](int s) { return kv_full + 8 * (1 + s); };
  auto empty = [&](int s) { return kv_full + 8 * (1 + kStages + s); };

  const int tid = threadIdx.x;
  const int j = blockIdx.x, bh = blockIdx.y;
  const int key0 = j * kBc;  // K_j's first key
  const int Tr = (N + kBr - 1) / kBr;
  // Causal: row blocks whose last query lies before K_j's first key see none of it (line 8's skip).
  const int i_begin = kCausal ? key0 / kBr : 0;
  const int steps = Tr - i_begin;

  if (tid == 0) {
    prefetch_tensor_map(&map_Q);
    prefetch_tensor_map(&map_K);
    prefetch_tensor_map(&map_V);
    prefetch_tensor_map(&map_dO);
    mbar_init(kv_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), kConsumerWarps);
    }
    fence_barrier_init();
  }
  __syncthreads();

  // [producer] line 6: K_j, V_j once; line 9: Q_i, dO_i of the n-th row block into stage n mod
  // stages once both consumer warpgroups have emptied it (its previous use). Each box is 64 columns.
  if (tid < 128) {
    setmaxnreg_dec<kProducerRegisters>();
    if (tid == 0) {
      mbar_arrive_expect_tx(kv_full, 2 * Smem::kKVBytes);
#pragma unroll
      for (int c = 0; c < Smem::kChunks; ++c) {
        tma_load_3d(sram_K + c * kBc * 128, &map_K, kv_full, c * 64, key0, bh);
        tma_load_3d(sram_V + c * kBc * 128, &map_V, kv_full, c * 64, key0, bh);
      }
      for (int n = 0; n < steps; ++n) {
        const int s = n % kStages, row0 = (i_begin + n) * kBr;
        mbar_wait(empty(s), ((n / kStages) & 1) ^ 1);
        mbar_arrive_expect_tx(full(s), 2 * Smem::kRowBytes);
#pragma unroll
        for (int c = 0; c < Smem::kChunks; ++c) {
          tma_load_3d(sram_Q + s * Smem::kRowBytes + c * kBr * 128, &map_Q, full(s), c * 64, row0, bh);
          tma_load_3d(sram_dO + s * Smem::kRowBytes + c * kBr * 128, &map_dO, full(s), c * 64, row0, bh);
        }
      }
    }
    return;
  }
  setmaxnreg_inc<kConsumerRegisters>();

  // [consumers] warpgroup wg owns keys wg·64 … wg·64 + 63 of K_j; warp w of it keys 16w … 16w + 15,
  // this thread keys lane/4 and lane/4 + 8 of those (the rows of the wgmma accumulators), and in
  // S_ijᵀ queries t·8 + (lane % 4)·2 + {0, 1} for t = 0 … 7.
  const int ctid = tid - 128, wg = ctid / 128, warp = (ctid % 128) / 32, lane = ctid % 32;
  const int key_row = key0 + wg * 64 + warp * 16 + lane / 4;
  const std::uint32_t wg_K = sram_K + wg * 64 * 128, wg_V = sram_V + wg * 64 * 128;
  float* dQ_accum = hbm_dQ_accum + static_cast<std::int64_t>(bh) * N * kD;
  // L_i and D_i of the n-th row block, one value per consumer thread of the first 2·Br (rows past N:
  // L = +inf, so P = 0), read from HBM a step ahead and stored before the step's named barrier into
  // buffer n mod 2, which the next step reads.
  const float* L = hbm_L + static_cast<std::int64_t>(bh) * N;
  const float* D = hbm_D + static_cast<std::int64_t>(bh) * N;
  auto read_LD = [&](int n) {
    const int q = (i_begin + n) * kBr + ctid % kBr;
    if (ctid >= 2 * kBr || q >= N) return ctid < kBr ? INFINITY : 0.f;
    return ctid < kBr ? L[q] : D[q];
  };
  auto store_LD = [&](int n, float v) {
    if (ctid < 2 * kBr) sram_LD[(n % 2) * 2 * kBr + ctid] = v;
  };
  store_LD(0, read_LD(0));
  named_sync(1, 256);

  float reg_dK[kD / 2], reg_dV[kD / 2];  // m64nD accumulators, the whole loop
#pragma unroll
  for (int k = 0; k < kD / 2; ++k) reg_dK[k] = reg_dV[k] = 0.f;

  mbar_wait(kv_full, 0);
  for (int n = 0; n < steps; ++n) {  // line 8
    const int i = i_begin + n, s = n % kStages, q0 = i * kBr;
    const std::uint32_t sQ = sram_Q + s * Smem::kRowBytes, sdO = sram_dO + s * Smem::kRowBytes;
    const float* sL = sram_LD + (n % 2) * 2 * kBr;
    const float* sD = sL + kBr;
    const float next_LD = n + 1 < steps ? read_LD(n + 1) : 0.f;
    mbar_wait(full(s), (n / kStages) & 1);

    // line 10: S_ijᵀ = K_j Q_iᵀ; line 13: dP_ijᵀ = V_j dO_iᵀ (d/16 k16 steps; the swizzle lets a
    // step be a 32-byte offset within a 64-column chunk).
    float reg_S[32], reg_dP[32];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const int c = kk / 4, k32 = (kk % 4) * 32;
      wgmma_ss_n64<T, 0, 0>(reg_S, smem_desc(wg_K + c * kBc * 128 + k32), smem_desc(sQ + c * kBr * 128 + k32), kk > 0);
    }
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const int c = kk / 4, k32 = (kk % 4) * 32;
      wgmma_ss_n64<T, 0, 0>(reg_dP, smem_desc(wg_V + c * kBc * 128 + k32), smem_desc(sdO + c * kBr * 128 + k32), kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(reg_S);
    fence_operands(reg_dP);

    // line 11: P_ij = exp(S_ij − L_i); line 14: dS_ij = P_ij ∘ (dP_ij − D_i), transposed: accumulator
    // k holds key key_row + 8·((k/2) % 2) and query column (k/4)·8 + (lane % 4)·2 + k % 2.
    const bool need_mask = q0 + kBr > N || key0 + kBc > N || (kCausal && q0 < key0 + kBc - 1);
#pragma unroll
    for (int k = 0; k < 32; ++k) {
      const int qc = (k / 4) * 8 + (lane % 4) * 2 + k % 2;  // the query within Q_i
      float p = fast_exp2(reg_S[k] * scale_log2 - sL[qc] * kLog2e);
      if (need_mask) {  // queries or keys past N (ragged blocks), and keys after the query
        const int q = q0 + qc, key = key_row + 8 * ((k / 2) % 2);
        if (q >= N || key >= N || (kCausal && key > q)) p = 0.f;
      }
      reg_S[k] = p;
      reg_dP[k] = p * (reg_dP[k] - sD[qc]);
    }
    // P and dS in the dtype: the accumulators of n8 tiles 2kt and 2kt + 1 are the A fragment of k16
    // step kt (the queries kt·16 … kt·16 + 15).
    std::uint32_t reg_P[4][4], reg_dS[4][4];
#pragma unroll
    for (int kt = 0; kt < 4; ++kt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        reg_P[kt][e] = pack2<T>(reg_S[8 * kt + 2 * e], reg_S[8 * kt + 2 * e + 1]);
        reg_dS[kt][e] = pack2<T>(reg_dP[8 * kt + 2 * e], reg_dP[8 * kt + 2 * e + 1]);
      }
    // dS_ijᵀ to shared memory for line 15 (buffer n mod 2: the other warpgroup may still be reading
    // the previous step's), swizzled as a TMA tile of 128-byte rows would be.
    const std::uint32_t sdS = sram_dS + (n % 2) * Smem::kDSBytes;
#pragma unroll
    for (int t = 0; t < 8; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wg * 64 + warp * 16 + lane / 4 + 8 * h;  // key within K_j
        const std::uint32_t at = sdS + r * 128 + ((t * 16 + (lane % 4) * 4) ^ ((r % 8) * 16));
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at), "r"(reg_dS[t / 2][(t % 2) * 2 + h]) : "memory");
      }
    fence_proxy_async();  // the stores, visible to the tensor cores
    if (n + 1 < steps) store_LD(n + 1, next_LD);  // buffer (n + 1) mod 2, last read in the previous step

    // line 12: dV_j += P_ijᵀ dO_i; line 16: dK_j += dS_ijᵀ Q_i (k runs over the Br queries; the two
    // 64-column chunks of dO_i, Q_i lie Br·128 bytes apart).
    fence_operands(reg_dV);
    fence_operands(reg_dK);
    wgmma_fence();
#pragma unroll
    for (int kt = 0; kt < kBr / 16; ++kt) {
      const std::uint64_t b = smem_desc(sdO + kt * 16 * 128, kBr * 128);
      if constexpr (kD == 128) wgmma_rs_n128<T>(reg_dV, reg_P[kt], b, 1);
      else wgmma_rs_n64<T>(reg_dV, reg_P[kt], b, 1);
    }
#pragma unroll
    for (int kt = 0; kt < kBr / 16; ++kt) {
      const std::uint64_t b = smem_desc(sQ + kt * 16 * 128, kBr * 128);
      if constexpr (kD == 128) wgmma_rs_n128<T>(reg_dK, reg_dS[kt], b, 1);
      else wgmma_rs_n64<T>(reg_dK, reg_dS[kt], b, 1);
    }
    wgmma_commit();

    // line 15: dQ_i += dS_ij K_j, once both warpgroups' dS_ijᵀ is in: warpgroup wg takes columns
    // wg·d/2 … of all Br queries over the Bc keys (k16 step kt: keys kt·16 …, 2048 bytes on).
    named_sync(1, 256);
    float reg_dQ[kDqCols / 2];
    wgmma_fence();
#pragma unroll
    for (int kt = 0; kt < kBc / 16; ++kt) {
      const std::uint32_t k_cols = kD == 128 ? wg * kBc * 128 : wg * kDqCols * 2;  // chunk wg, or half a 128-byte row
      const std::uint64_t a = smem_desc(sdS + kt * 16 * 128), b = smem_desc(sram_K + k_cols + kt * 16 * 128);
      if constexpr (kD == 128) wgmma_ss_n64<T, 1, 1>(reg_dQ, a, b, kt > 0);
      else wgmma_ss_n32<T, 1, 1>(reg_dQ, a, b, kt > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(reg_dQ);
    fence_operands(reg_dV);
    fence_operands(reg_dK);
#pragma unroll
    for (int kt = 0; kt < 4; ++kt) {
      fence_operands(reg_P[kt]);
      fence_operands(reg_dS[kt]);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(empty(s));  // Q_i, dO_i read: the stage may take the next row block's

    // dQ_i's rows q0 + warp·16 + lane/4 (+ 8), two columns of each n8 tile, into the fp32 accumulator.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = q0 + warp * 16 + lane / 4 + 8 * h;
      if (row >= N) continue;
      float* at = dQ_accum + static_cast<std::int64_t>(row) * kD + wg * kDqCols + (lane % 4) * 2;
#pragma unroll
      for (int t = 0; t < kDqCols / 8; ++t)
        atomicAdd(reinterpret_cast<float2*>(at + t * 8), make_float2(reg_dQ[4 * t + 2 * h], reg_dQ[4 * t + 2 * h + 1]));
    }
  }

  // line 18: write dK_j = τ·dK_j (τ, the softmax scale, was left out of dS) and dV_j, once.
  T* dK = hbm_dK + static_cast<std::int64_t>(bh) * N * kD;
  T* dV = hbm_dV + static_cast<std::int64_t>(bh) * N * kD;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = key_row + 8 * h;
    if (key >= N) continue;
#pragma unroll
    for (int t = 0; t < kD / 8; ++t) {
      const std::int64_t at = static_cast<std::int64_t>(key) * kD + t * 8 + (lane % 4) * 2;
      *reinterpret_cast<typename Pair<T>::type*>(dK + at) = Pair<T>::make(reg_dK[4 * t + 2 * h] * scale, reg_dK[4 * t + 2 * h + 1] * scale);
      *reinterpret_cast<typename Pair<T>::type*>(dV + at) = Pair<T>::make(reg_dV[4 * t + 2 * h], reg_dV[4 * t + 2 * h + 1]);
    }
  }
#endif
}

// [SECTION] Launch: the three kernels in order on one stream

template <typename T, int kD, bool kCausal>
void launch_shape(const AttentionProblem& p, const DeviceTensors& t, cudaStream_t stream, LaunchInfo* info) {
  using Smem = Flash3BackwardSmem<kD>;
  auto kernel = flash3_backward_kernel<T, kD, kCausal>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Smem::kBytes));
  const int N = static_cast<int>(p.seq_len);
  const auto instances = static_cast<unsigned>(p.instances());
  const dim3 row_blocks((N + kBr - 1) / kBr, instances), kv_blocks((N + kBc - 1) / kBc, instances);
  if (info != nullptr) {  // the main kernel: the D and conversion kernels are short streams beside it
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    info->threads_per_cta = kThreads;
    info->registers_per_thread = attr.numRegs;
    info->smem_bytes_per_cta = static_cast<int>(Smem::kBytes + attr.sharedSizeBytes);
    info->ctas = static_cast<long long>(kv_blocks.x) * kv_blocks.y;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info->ctas_per_sm, kernel, kThreads, Smem::kBytes));
    return;
  }
  if (p.Nq() != p.seq_len || p.Hkv() != p.heads)
    throw std::invalid_argument("flash3 backward: self-attention with H = HKV only");
  if (t.dQ_accum == nullptr)
    throw std::invalid_argument("flash3 backward: the fp32 dQ accumulator is missing (AttentionBuffers allocates it)");
  const double scale = 1.0 / std::sqrt(static_cast<double>(kD));
  const CUtensorMap map_Q = tensor_map<T>(t.at(Tensor::Q), kD, N, p.instances(), kBr);
  const CUtensorMap map_dO = tensor_map<T>(t.at(Tensor::dO), kD, N, p.instances(), kBr);
  const CUtensorMap map_K = tensor_map<T>(t.at(Tensor::K), kD, N, p.instances(), kBc);
  const CUtensorMap map_V = tensor_map<T>(t.at(Tensor::V), kD, N, p.instances(), kBc);
  dot_do_o_kernel<T, kD, kBr><<<row_blocks, kRowThreads, 0, stream>>>(t.at<const T>(Tensor::O), t.at<const T>(Tensor::dO),
                                                                     t.at<float>(Tensor::D), t.dQ_accum, N);
  CUDA_CHECK_LAUNCH();
  kernel<<<kv_blocks, kThreads, Smem::kBytes, stream>>>(map_Q, map_K, map_V, map_dO, t.at<const float>(Tensor::lse),
                                                        t.at<const float>(Tensor::D), t.dQ_accum, t.at<T>(Tensor::dK),
                                                        t.at<T>(Tensor::dV), N, static_cast<float>(scale),
                                                        static_cast<float>(scale * 1.4426950408889634));
  CUDA_CHECK_LAUNCH();
  convert_dq_kernel<T, kD, kBr><<<row_blocks, kRowThreads, 0, stream>>>(t.dQ_accum, t.at<T>(Tensor::dQ), N,
                                                                       static_cast<float>(scale));
  CUDA_CHECK_LAUNCH();
}

template <typename T, int kD>
void launch_causal(const AttentionProblem& p, bool, const DeviceTensors& t, cudaStream_t s, LaunchInfo* info) {
  if (p.causal) launch_shape<T, kD, true>(p, t, s, info);
  else launch_shape<T, kD, false>(p, t, s, info);
}

struct Row {
  template <int D, int BR, int BC>
  static constexpr CompiledShape row() {
    static_assert(BR == kBr && BC == kBc, "flash3's backward is written for 64 query rows a step, 128 keys a CTA");
    return {D, BR, BC, &launch_causal<__half, D>, &launch_causal<__nv_bfloat16, D>};
  }
};

constexpr auto kShapes = shape_table<kernel_tiles::flash3_backward, Row>();

// flash2 backward's tensors, accumulator and numerics (P and dS rounded to the dtype before the
// products that take them, fp32 accumulators, dQ summed in fp32 in HBM), hence its tolerance.
class Flash3BackwardKernels final : public KernelFamily {
public:
  Algo algo() const override { return flash3_backward_room(); }
  std::span<const CompiledShape> shapes() const override { return kShapes; }
  std::vector<ScratchTensor> scratch(const AttentionProblem& p) const override { return base().scratch(p); }
  std::int64_t dq_accumulator_bytes(const AttentionProblem& p) const override { return base().dq_accumulator_bytes(p); }
  Tolerance tolerance(Dtype dtype) const override { return base().tolerance(dtype); }
  std::string intended_difference(InputKind kind) const override { return base().intended_difference(kind); }
  const char* profiler_names() const override { return "dot_do_o_kernel|flash3_backward_kernel|convert_dq_kernel"; }
  const char* launch_note() const override {
    return "the main kernel (one CTA per K_j, V_j: 1 producer + 2 consumer warpgroups) of the three";
  }
  std::int64_t default_max_n() const override { return 32768; }

private:
  static const KernelFamily& base() { return flash2_backward_kernels(); }
};

}  // namespace

const KernelFamily& flash3_backward_kernels() {
  static const Flash3BackwardKernels family;
  return family;
}

}  // namespace hbmlab::gpu
