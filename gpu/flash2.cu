// flash2: FlashAttention-2 forward (Q outer loop), the fast kernel.
// Run: hbmlab measure --algo flash2 --seq-len 4096 --head-dim 128 [--causal both] [--blocks 128x64]
//
// Versions, in increasing sophistication (the dispatcher is launch_flash2 at the bottom):
//   v1 flash2_kernel: one CTA per (Q_i, batch·head); Br/16 warps, each owning 16 rows of Q_i.
//      Q_i goes to registers once (ldmatrix); K_j, V_j stream through a two-stage cp.async ring
//      in XOR-swizzled shared memory; S_ij = Q_i K_jᵀ and O_i += P̃_ij V_j on tensor cores
//      (mma.sync m16n8k16, fp32 accumulators); the online softmax runs in base 2 (exp2) on the
//      accumulators; O_i, m_i, ℓ_i never leave registers until the end, where O_i and
//      L_i = m_i + log ℓ_i are written once. Causal pairs past the diagonal are skipped.
#include <cmath>
#include <stdexcept>
#include <string>

#include "gpu/ptx.cuh"
#include "gpu/kernels.hpp"

namespace hbmlab::gpu {
namespace {

// [SECTION] shared-memory layout: rows of d elements in 16-byte chunks, chunk index XOR (row mod 8),
// so that the 8 rows one ldmatrix phase reads land in 8 different bank groups.
template <int kD>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * (kD / 8) + (chunk ^ (row & 7));  // in 16-byte units
}

// Loads rows [row0, row0 + kRows) of a [N][kD] tensor into shared memory; rows ≥ N read as zeros.
template <typename T, int kD, int kRows, int kThreads>
__device__ __forceinline__ void load_tile(std::uint32_t sram_base, const T* hbm, int row0, int N, int tid) {
  constexpr int kChunksPerRow = kD / 8;
  constexpr int kChunks = kRows * kChunksPerRow;
  static_assert(kChunks % kThreads == 0, "tile chunks must divide evenly among the threads");
#pragma unroll
  for (int k = 0; k < kChunks / kThreads; ++k) {
    const int idx = tid + k * kThreads;
    const int r = idx / kChunksPerRow, c = idx % kChunksPerRow;
    const int grow = row0 + r;
    const bool in = grow < N;
    const T* src = hbm + static_cast<std::int64_t>(in ? grow : 0) * kD + c * 8;
    cp_async_16(sram_base + swz<kD>(r, c) * 16, src, in ? 16 : 0);
  }
}

template <typename T, int kD, int kBr, int kBc, bool kCausal>
__global__ void __launch_bounds__(kBr / 16 * 32)
flash2_kernel(const T* __restrict__ hbm_Q, const T* __restrict__ hbm_K, const T* __restrict__ hbm_V,
              T* __restrict__ hbm_O, float* __restrict__ hbm_L, int N, float scale_log2) {
  constexpr int kWarps = kBr / 16;
  constexpr int kThreads = kWarps * 32;
  constexpr int kDTiles = kD / 8;    // n8 tiles across d (O accumulators)
  constexpr int kKSteps = kD / 16;   // k16 steps across d (S = Q Kᵀ)
  constexpr int kSTiles = kBc / 8;   // n8 tiles across Bc (S accumulators)
  static_assert(kBr % 16 == 0 && kBc % 16 == 0 && kD % 16 == 0, "Br, Bc, d must be multiples of 16");
  static_assert(kD / 8 >= 8, "the XOR swizzle needs at least 8 chunks of 16 bytes per row (d >= 64)");

  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t sram_Q = smem_u32(smem);                       // (Br, d)
  const std::uint32_t sram_K = sram_Q + kBr * kD * 2;                // 2 × (Bc, d)
  const std::uint32_t sram_V = sram_K + 2 * kBc * kD * 2;            // 2 × (Bc, d)

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int i = blockIdx.x;                         // row block Q_i
  const std::int64_t bh = blockIdx.y;               // (batch, head)
  const T* Q = hbm_Q + bh * N * kD;
  const T* K = hbm_K + bh * N * kD;
  const T* V = hbm_V + bh * N * kD;
  const int row_begin = i * kBr;
  const int Tc = (N + kBc - 1) / kBc;
  // Causal: K_j is skipped when its first key lies after the block's last query.
  const int j_end = kCausal ? min(Tc, (min(row_begin + kBr, N) - 1) / kBc + 1) : Tc;

  // line 4: load Q_i; and the first K_j, V_j.
  load_tile<T, kD, kBr, kThreads>(sram_Q, Q, row_begin, N, tid);
  load_tile<T, kD, kBc, kThreads>(sram_K, K, 0, N, tid);
  load_tile<T, kD, kBc, kThreads>(sram_V, V, 0, N, tid);
  cp_async_commit();

  std::uint32_t reg_Q[kKSteps][4];     // A fragments of this warp's 16 rows of Q_i  // (16, d)
  float reg_O[kDTiles][4];             // O_i accumulators                           // (16, d)
  float reg_m[2] = {-INFINITY, -INFINITY};  // rows lane/4 and lane/4 + 8, in log2 units
  float reg_l[2] = {0.f, 0.f};              // partial row sums (this thread's columns)
#pragma unroll
  for (int t = 0; t < kDTiles; ++t) reg_O[t][0] = reg_O[t][1] = reg_O[t][2] = reg_O[t][3] = 0.f;

  const int warp_row0 = warp * 16;
  const int q_row0 = row_begin + warp_row0 + lane / 4;  // this thread's first query row

  for (int j = 0; j < j_end; ++j) {
    const int stage = j & 1;
    if (j + 1 < j_end) {  // prefetch K_{j+1}, V_{j+1} into the other stage
      load_tile<T, kD, kBc, kThreads>(sram_K + (stage ^ 1) * kBc * kD * 2, K, (j + 1) * kBc, N, tid);
      load_tile<T, kD, kBc, kThreads>(sram_V + (stage ^ 1) * kBc * kD * 2, V, (j + 1) * kBc, N, tid);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        const int r = warp_row0 + (lane % 8) + 8 * ((lane / 8) % 2);
        const int c = 2 * kk + lane / 16;
        ldmatrix_x4(reg_Q[kk], sram_Q + swz<kD>(r, c) * 16);
      }
    }
    const std::uint32_t sK = sram_K + stage * kBc * kD * 2;
    const std::uint32_t sV = sram_V + stage * kBc * kD * 2;

    // line 8: S_ij = Q_i K_jᵀ  // (16, Bc) per warp
    float reg_S[kSTiles][4];
#pragma unroll
    for (int t = 0; t < kSTiles; ++t) reg_S[t][0] = reg_S[t][1] = reg_S[t][2] = reg_S[t][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
      for (int t = 0; t < kSTiles; t += 2) {
        std::uint32_t b[4];
        const int key = t * 8 + (lane % 8) + 8 * (lane / 16);
        const int c = 2 * kk + (lane / 8) % 2;
        ldmatrix_x4(b, sK + swz<kD>(key, c) * 16);
        mma_16816<T>(reg_S[t], reg_Q[kk], b[0], b[1]);
        mma_16816<T>(reg_S[t + 1], reg_Q[kk], b[2], b[3]);
      }
    }

    // Mask keys past N (ragged last block) and, on diagonal blocks, keys after the query.
    const int col0 = j * kBc;
    const bool need_mask = (col0 + kBc > N) || (kCausal && col0 + kBc - 1 > row_begin);
    if (need_mask) {
#pragma unroll
      for (int t = 0; t < kSTiles; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = col0 + t * 8 + (lane % 4) * 2 + (e & 1);
          const int row = q_row0 + (e / 2) * 8;
          if (col >= N || (kCausal && col > row)) reg_S[t][e] = -INFINITY;
        }
      }
    }

    // line 9: m_new = max(m_old, rowmax(S_ij)); P̃_ij = exp2(S·scale·log2e − m_new)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = reg_m[h];
#pragma unroll
      for (int t = 0; t < kSTiles; ++t) mx = fmaxf(mx, fmaxf(reg_S[t][2 * h], reg_S[t][2 * h + 1]) * scale_log2);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float base = (mx == -INFINITY) ? 0.f : mx;  // a row with no key yet stays all-zero
      const float rescale = fast_exp2(reg_m[h] - base);  // e^(m_old − m_new), 0 on the first block
      reg_m[h] = mx;
      float sum = 0.f;
#pragma unroll
      for (int t = 0; t < kSTiles; ++t) {
        const float p0 = fast_exp2(reg_S[t][2 * h] * scale_log2 - base);
        const float p1 = fast_exp2(reg_S[t][2 * h + 1] * scale_log2 - base);
        reg_S[t][2 * h] = p0;
        reg_S[t][2 * h + 1] = p1;
        sum += p0 + p1;
      }
      // line 10: ℓ_new = e^(m_old − m_new)·ℓ_old + rowsum(P̃);  O_i ← e^(m_old − m_new)·O_i
      reg_l[h] = reg_l[h] * rescale + sum;
#pragma unroll
      for (int t = 0; t < kDTiles; ++t) {
        reg_O[t][2 * h] *= rescale;
        reg_O[t][2 * h + 1] *= rescale;
      }
    }

    // line 10: O_i += P̃_ij V_j; the S accumulators of two n8 tiles are the A fragment of one k16 step.
#pragma unroll
    for (int kt = 0; kt < kBc / 16; ++kt) {
      std::uint32_t a[4];
      a[0] = pack2<T>(reg_S[2 * kt][0], reg_S[2 * kt][1]);
      a[1] = pack2<T>(reg_S[2 * kt][2], reg_S[2 * kt][3]);
      a[2] = pack2<T>(reg_S[2 * kt + 1][0], reg_S[2 * kt + 1][1]);
      a[3] = pack2<T>(reg_S[2 * kt + 1][2], reg_S[2 * kt + 1][3]);
#pragma unroll
      for (int dt = 0; dt < kDTiles; dt += 2) {
        std::uint32_t b[4];
        const int key = kt * 16 + (lane % 8) + 8 * ((lane / 8) % 2);
        const int c = dt + lane / 16;
        ldmatrix_x4_trans(b, sV + swz<kD>(key, c) * 16);
        mma_16816<T>(reg_O[dt], a, b[0], b[1]);
        mma_16816<T>(reg_O[dt + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // this stage's K_j, V_j are overwritten by the prefetch two steps on
  }
  cp_async_wait<0>();

  // line 12–13: O_i = diag(ℓ)^-1 O_i, L_i = m_i + log ℓ_i; written once.
  T* O = hbm_O + bh * N * kD;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = reg_l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int row = q_row0 + h * 8;
    const float inv = l > 0.f ? 1.f / l : 0.f;
    if (row < N) {
#pragma unroll
      for (int t = 0; t < kDTiles; ++t) {
        const int col = t * 8 + (lane % 4) * 2;
        *reinterpret_cast<typename Pair<T>::type*>(O + static_cast<std::int64_t>(row) * kD + col) =
            Pair<T>::make(reg_O[t][2 * h] * inv, reg_O[t][2 * h + 1] * inv);
      }
      if (lane % 4 == 0 && hbm_L != nullptr) {
        hbm_L[bh * N + row] = (reg_m[h] + log2f(l)) * 0.69314718055994531f;
      }
    }
  }
}

template <typename T, int kD, int kBr, int kBc, bool kCausal>
void launch_shape(const AttentionProblem& p, const DeviceTensors& t, cudaStream_t stream, LaunchInfo* info) {
  constexpr int kThreads = kBr / 16 * 32;
  constexpr int kSmem = (kBr + 4 * kBc) * kD * 2;
  auto kernel = flash2_kernel<T, kD, kBr, kBc, kCausal>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const int N = static_cast<int>(p.seq_len);
  const dim3 grid((N + kBr - 1) / kBr, static_cast<unsigned>(p.instances()));
  if (info != nullptr) {
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    info->threads_per_cta = kThreads;
    info->registers_per_thread = attr.numRegs;
    info->smem_bytes_per_cta = static_cast<int>(kSmem + attr.sharedSizeBytes);
    info->ctas = static_cast<long long>(grid.x) * grid.y;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info->ctas_per_sm, kernel, kThreads, kSmem));
    return;
  }
  const float scale_log2 = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kD)) * 1.4426950408889634);
  kernel<<<grid, kThreads, kSmem, stream>>>(static_cast<const T*>(t.Q), static_cast<const T*>(t.K),
                                            static_cast<const T*>(t.V), static_cast<T*>(t.O), t.L, N, scale_log2);
  CUDA_CHECK_LAUNCH();
}

template <typename T, int kD, int kBr, int kBc>
void launch_causal(const AttentionProblem& p, const DeviceTensors& t, cudaStream_t s, LaunchInfo* info) {
  if (p.causal) launch_shape<T, kD, kBr, kBc, true>(p, t, s, info);
  else launch_shape<T, kD, kBr, kBc, false>(p, t, s, info);
}

template <typename T>
bool launch_dtype(const AttentionProblem& p, Blocks b, const DeviceTensors& t, cudaStream_t s, LaunchInfo* info) {
  const auto d = p.head_dim;
#define HBMLAB_FLASH2_SHAPE(D, BR, BC) \
  if (d == D && b.Br == BR && b.Bc == BC) { launch_causal<T, D, BR, BC>(p, t, s, info); return true; }
  HBMLAB_FLASH2_SHAPE(64, 128, 64)
  HBMLAB_FLASH2_SHAPE(128, 128, 64)
  HBMLAB_FLASH2_SHAPE(64, 64, 64)
  HBMLAB_FLASH2_SHAPE(128, 64, 64)
  HBMLAB_FLASH2_SHAPE(64, 128, 128)
  HBMLAB_FLASH2_SHAPE(128, 128, 32)
#undef HBMLAB_FLASH2_SHAPE
  return false;
}

}  // namespace

// The compiled (d, Br, Bc) shapes, fp16 and bf16 each; the first per d is the default (64 × 64 was
// the fastest or within 2 % of it on the H100 in assets/measurements/h100-speed-hbmlab.json).
extern const int kFlash2Shapes[][3] = {{64, 64, 64}, {128, 64, 64}, {64, 128, 64}, {128, 128, 64}, {64, 128, 128}, {128, 128, 32}};
extern const int kFlash2ShapeCount = sizeof(kFlash2Shapes) / sizeof(kFlash2Shapes[0]);

bool launch_flash2(const AttentionProblem& p, Blocks b, const DeviceTensors& t, cudaStream_t s, LaunchInfo* info) {
  if (p.dtype == Dtype::fp16) return launch_dtype<__half>(p, b, t, s, info);
  if (p.dtype == Dtype::bf16) return launch_dtype<__nv_bfloat16>(p, b, t, s, info);
  return false;
}

}  // namespace hbmlab::gpu
