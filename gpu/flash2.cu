// flash2: FlashAttention-2 forward (Q outer loop), the fast kernel.
// Run: hbmlab measure --algo flash2 --seq-len 4096 --head-dim 128 [--causal both] [--blocks 128x64]
//
// Versions, in increasing sophistication (the shape table and the family are at the bottom):
//   v1 flash2_kernel: one CTA per (Q_i, batch·head); Br/16 warps, each owning 16 rows of Q_i.
//      Q_i goes to registers once (ldmatrix); K_j, V_j stream through a two-stage cp.async ring
//      in XOR-swizzled shared memory; S_ij = Q_i K_jᵀ and O_i += P̃_ij V_j on tensor cores
//      (mma.sync m16n8k16, fp32 accumulators); the online softmax runs in base 2 (exp2) on the
//      accumulators; O_i, m_i, ℓ_i never leave registers until the end, where O_i and
//      L_i = m_i + log ℓ_i are written once. Causal pairs past the diagonal are skipped.
//   v2 (Br = 128): four warps of two m16 row groups each (kRowGroupsPerWarp), so every K_j, V_j
//      fragment read from shared memory feeds two MMAs; Q_i's fragments are re-read from shared
//      memory per k16 step to leave registers to S and O; ldmatrix and cp.async addresses are one
//      register plus immediates (FragmentOffsets, load_tile) so the 255-register kernels do not
//      spill (d = 128 at 128 × 64: 60–76 bytes still do). 1.1–1.2× faster than v1 at the same
//      tiles on the H100 (gpu/README.md).
//   K/V order: each CTA visits K_j, V_j from the first block up (default) or from its last block
//      down (`hbmlab measure --kv-order descending`, PyTorch's FlashAttention-2 order). O is the
//      same; the L2 reuse is not: at causal, d = 128, N = 64K the H100 reads 19× the DRAM bytes
//      descending (assets/measurements/h100-kv-order.json; assets/measurements/README.md).
#include <cmath>
#include <stdexcept>
#include <string>

#include "gpu/ptx.cuh"
#include "gpu/tiles.cuh"
#include "gpu/kernels.hpp"

namespace hbmlab {
// The rooms these kernels run, bound by their objects (sim/algo/registry.cpp lists the same accessors).
const Algorithm& flash2_room();  // sim/algo/flash2
}  // namespace hbmlab

namespace hbmlab::gpu {
namespace {

// kWM: m16 row groups per warp. With two, every K_j or V_j fragment a warp reads from shared memory
// feeds two MMAs instead of one, which halves the shared-memory traffic per FLOP; Q_i then stays in
// shared memory (its fragments are re-read per k16 step) to leave registers for S and O.
template <int kBr>
constexpr int kRowGroupsPerWarp = kBr >= 128 ? 2 : 1;
template <int kBr>
constexpr int kFlash2Threads = kBr / (16 * kRowGroupsPerWarp<kBr>) * 32;

// kMasked: a block mask (block-sparse FlashAttention, Algorithm 5): row block i visits only the K/V
// blocks kv_blocks[kv_offsets[i] .. kv_offsets[i + 1]) (ascending; the causal skips already left out),
// so a dropped pair costs no load and no MMA.
template <typename T, int kD, int kBr, int kBc, bool kCausal, bool kMasked>
__global__ void __launch_bounds__(kFlash2Threads<kBr>)
flash2_kernel(const T* __restrict__ hbm_Q, const T* __restrict__ hbm_K, const T* __restrict__ hbm_V,
              T* __restrict__ hbm_O, float* __restrict__ hbm_L, int N, float scale_log2, bool kv_descending,
              unsigned long long* __restrict__ hbm_trace, const int* __restrict__ kv_offsets,
              const int* __restrict__ kv_blocks) {
  constexpr int kWM = kRowGroupsPerWarp<kBr>;
  constexpr int kThreads = kFlash2Threads<kBr>;
  constexpr bool kQInRegisters = kWM == 1;
  constexpr int kDTiles = kD / 8;    // n8 tiles across d (O accumulators)
  constexpr int kKSteps = kD / 16;   // k16 steps across d (S = Q Kᵀ)
  constexpr int kSTiles = kBc / 8;   // n8 tiles across Bc (S accumulators)
  static_assert(kBr % (16 * kWM) == 0 && kBc % 16 == 0 && kD % 16 == 0, "Br, Bc, d must be multiples of 16");
  static_assert(kD / 8 >= 8, "the XOR swizzle needs at least 8 chunks of 16 bytes per row (d >= 64)");

  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t sram_Q = smem_u32(smem);                       // (Br, d)
  const std::uint32_t sram_K = sram_Q + kBr * kD * 2;                // 2 × (Bc, d)
  const std::uint32_t sram_V = sram_K + 2 * kBc * kD * 2;            // 2 × (Bc, d)

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // The CTA schedule, when asked for (gpu/bench/cta_schedule.cpp): start ns, end ns and SM of each
  // CTA, written as they happen so that nothing stays live in registers across the kernel.
  if (hbm_trace != nullptr && tid == 0) {
    unsigned long long start = 0;
    unsigned sm = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    unsigned long long* at = hbm_trace + 3 * (std::int64_t{blockIdx.y} * gridDim.x + blockIdx.x);
    at[0] = start;
    at[2] = sm;
  }
  const int i = blockIdx.x;                         // row block Q_i
  const std::int64_t bh = blockIdx.y;               // (batch, head)
  const T* Q = hbm_Q + bh * N * kD;
  const T* K = hbm_K + bh * N * kD;
  const T* V = hbm_V + bh * N * kD;
  const int row_begin = i * kBr;
  const int Tc = (N + kBc - 1) / kBc;
  // Causal: K_j is skipped when its first key lies after the block's last query. Masked: the row's list.
  const int list0 = kMasked ? kv_offsets[i] : 0;
  const int j_end = kMasked ? kv_offsets[i + 1] - list0 : kCausal ? min(Tc, (min(row_begin + kBr, N) - 1) / kBc + 1) : Tc;
  // The n-th K/V block visited: K_n, or K_{j_end−1−n} from the last block down (the order PyTorch's
  // FlashAttention-2 uses). The online softmax gives the same O either way; the L2 does not.
  auto block_at = [&](int n) {
    const int at = kv_descending ? j_end - 1 - n : n;
    if constexpr (kMasked) return kv_blocks[list0 + at];
    else return at;
  };

  // line 4: load Q_i; and the first K_j, V_j (a row the mask empties has none: its O is 0).
  load_tile<T, kD, kBr, kThreads>(sram_Q, Q, row_begin, N, tid);
  if (j_end > 0) {
    load_tile<T, kD, kBc, kThreads>(sram_K, K, block_at(0) * kBc, N, tid);
    load_tile<T, kD, kBc, kThreads>(sram_V, V, block_at(0) * kBc, N, tid);
  }
  cp_async_commit();

  std::uint32_t reg_Q[kQInRegisters ? kKSteps : 1][4];  // A fragments of this warp's 16 rows of Q_i  // (16, d)
  float reg_O[kWM][kDTiles][4];           // O_i accumulators, per row group               // (16, d) each
  float reg_m[kWM][2], reg_l[kWM][2];     // rows lane/4 and lane/4 + 8 of each group; m in log2 units
#pragma unroll
  for (int g = 0; g < kWM; ++g) {
    reg_m[g][0] = reg_m[g][1] = -INFINITY;
    reg_l[g][0] = reg_l[g][1] = 0.f;  // partial row sums (this thread's columns)
#pragma unroll
    for (int t = 0; t < kDTiles; ++t) reg_O[g][t][0] = reg_O[g][t][1] = reg_O[g][t][2] = reg_O[g][t][3] = 0.f;
  }

  const int warp_row0 = warp * 16 * kWM;  // the warp's first row in Q_i; group g starts 16·g below
  const int q_row0 = row_begin + warp_row0 + lane / 4;  // this thread's first query row (group 0)
  // Per-thread ldmatrix offsets (see FragmentOffsets): Q_i's A fragments, K_j's and V_j's B fragments.
  const FragmentOffsets q_at = FragmentOffsets::template make<kD>(warp_row0 + (lane % 8) + 8 * ((lane / 8) % 2), lane / 16);
  const FragmentOffsets k_at = FragmentOffsets::template make<kD>((lane % 8) + 8 * (lane / 16), (lane / 8) % 2);
  const FragmentOffsets v_at = FragmentOffsets::template make<kD>((lane % 8) + 8 * ((lane / 8) % 2), lane / 16);
  // With one row group the kernel has registers to spare, and addresses the compiler keeps per k step
  // save the adds (d = 128, 64 × 64: 1.15× faster than through FragmentOffsets).
  auto k_offset = [&](int kk, int key0) -> std::uint32_t {
    if constexpr (kWM == 1) return swz<kD>(key0 + (lane % 8) + 8 * (lane / 16), 2 * kk + (lane / 8) % 2) * 16;
    else return k_at.template get<kD>(kk, key0);
  };
  auto v_offset = [&](int pair, int key0) -> std::uint32_t {
    if constexpr (kWM == 1) return swz<kD>(key0 + (lane % 8) + 8 * ((lane / 8) % 2), 2 * pair + lane / 16) * 16;
    else return v_at.template get<kD>(pair, key0);
  };
  auto q_fragment = [&](std::uint32_t (&a)[4], int g, int kk) {
    ldmatrix_x4(a, sram_Q + q_at.template get<kD>(kk, 16 * g));
  };

  for (int n = 0; n < j_end; ++n) {
    const int j = block_at(n), stage = n & 1;
    if (n + 1 < j_end) {  // prefetch the next K_j, V_j into the other stage
      load_tile<T, kD, kBc, kThreads>(sram_K + (stage ^ 1) * kBc * kD * 2, K, block_at(n + 1) * kBc, N, tid);
      load_tile<T, kD, kBc, kThreads>(sram_V + (stage ^ 1) * kBc * kD * 2, V, block_at(n + 1) * kBc, N, tid);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    if constexpr (kQInRegisters) {
      if (n == 0) {
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) q_fragment(reg_Q[kk], 0, kk);
      }
    }
    const std::uint32_t sK = sram_K + stage * kBc * kD * 2;
    const std::uint32_t sV = sram_V + stage * kBc * kD * 2;

    // line 8: S_ij = Q_i K_jᵀ  // (16, Bc) per row group
    float reg_S[kWM][kSTiles][4];
#pragma unroll
    for (int g = 0; g < kWM; ++g)
#pragma unroll
      for (int t = 0; t < kSTiles; ++t) reg_S[g][t][0] = reg_S[g][t][1] = reg_S[g][t][2] = reg_S[g][t][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      std::uint32_t a[kWM][4];
#pragma unroll
      for (int g = 0; g < kWM; ++g) {
        if constexpr (kQInRegisters) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[g][e] = reg_Q[kk][e];
        } else {
          q_fragment(a[g], g, kk);
        }
      }
#pragma unroll
      for (int t = 0; t < kSTiles; t += 2) {
        std::uint32_t b[4];
        ldmatrix_x4(b, sK + k_offset(kk, t * 8));  // keys t·8 … t·8 + 15
#pragma unroll
        for (int g = 0; g < kWM; ++g) {
          mma_16816<T>(reg_S[g][t], a[g], b[0], b[1]);
          mma_16816<T>(reg_S[g][t + 1], a[g], b[2], b[3]);
        }
      }
    }

    // Mask keys past N (ragged last block) and, on diagonal blocks, keys after the query.
    const int col0 = j * kBc;
    const bool need_mask = (col0 + kBc > N) || (kCausal && col0 + kBc - 1 > row_begin);
    if (need_mask) {
#pragma unroll
      for (int g = 0; g < kWM; ++g)
#pragma unroll
        for (int t = 0; t < kSTiles; ++t) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = col0 + t * 8 + (lane % 4) * 2 + (e & 1);
            const int row = q_row0 + 16 * g + (e / 2) * 8;
            if (col >= N || (kCausal && col > row)) reg_S[g][t][e] = -INFINITY;
          }
        }
    }

    // line 9: m_new = max(m_old, rowmax(S_ij)); P̃_ij = exp2(S·scale·log2e − m_new)
#pragma unroll
    for (int g = 0; g < kWM; ++g) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = reg_m[g][h];
#pragma unroll
        for (int t = 0; t < kSTiles; ++t) mx = fmaxf(mx, fmaxf(reg_S[g][t][2 * h], reg_S[g][t][2 * h + 1]) * scale_log2);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float base = (mx == -INFINITY) ? 0.f : mx;  // a row with no key yet stays all-zero
        const float rescale = fast_exp2(reg_m[g][h] - base);  // e^(m_old − m_new), 0 on the first block
        reg_m[g][h] = mx;
        float sum = 0.f;
#pragma unroll
        for (int t = 0; t < kSTiles; ++t) {
          const float p0 = fast_exp2(reg_S[g][t][2 * h] * scale_log2 - base);
          const float p1 = fast_exp2(reg_S[g][t][2 * h + 1] * scale_log2 - base);
          reg_S[g][t][2 * h] = p0;
          reg_S[g][t][2 * h + 1] = p1;
          sum += p0 + p1;
        }
        // line 10: ℓ_new = e^(m_old − m_new)·ℓ_old + rowsum(P̃);  O_i ← e^(m_old − m_new)·O_i
        reg_l[g][h] = reg_l[g][h] * rescale + sum;
#pragma unroll
        for (int t = 0; t < kDTiles; ++t) {
          reg_O[g][t][2 * h] *= rescale;
          reg_O[g][t][2 * h + 1] *= rescale;
        }
      }
    }

    // line 10: O_i += P̃_ij V_j; the S accumulators of two n8 tiles are the A fragment of one k16 step.
    pv_mma<T>(reg_O, reg_S, sV, 0, v_offset);
    __syncthreads();  // this stage's K_j, V_j are overwritten by the prefetch two steps on
  }
  cp_async_wait<0>();

  // line 12–13: O_i = diag(ℓ)^-1 O_i, L_i = m_i + log ℓ_i; written once.
  T* O = hbm_O + bh * N * kD;
#pragma unroll
  for (int g = 0; g < kWM; ++g) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = reg_l[g][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int row = q_row0 + 16 * g + h * 8;
      const float inv = l > 0.f ? 1.f / l : 0.f;
      if (row < N) {
#pragma unroll
        for (int t = 0; t < kDTiles; ++t) {
          const int col = t * 8 + (lane % 4) * 2;
          *reinterpret_cast<typename Pair<T>::type*>(O + static_cast<std::int64_t>(row) * kD + col) =
              Pair<T>::make(reg_O[g][t][2 * h] * inv, reg_O[g][t][2 * h + 1] * inv);
        }
        if (lane % 4 == 0 && hbm_L != nullptr) {
          hbm_L[bh * N + row] = (reg_m[g][h] + log2f(l)) * 0.69314718055994531f;
        }
      }
    }
  }
  if (hbm_trace != nullptr && tid == 0) {
    unsigned long long end = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(end));
    hbm_trace[3 * (bh * gridDim.x + i) + 1] = end;
  }
}

template <typename T, int kD, int kBr, int kBc, bool kCausal, bool kMasked>
void launch_shape(const AttentionProblem& p, bool kv_descending, const DeviceTensors& t, cudaStream_t stream,
                  LaunchInfo* info) {
  constexpr int kThreads = kFlash2Threads<kBr>;
  constexpr int kSmem = (kBr + 4 * kBc) * kD * 2;
  auto kernel = flash2_kernel<T, kD, kBr, kBc, kCausal, kMasked>;
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
    info->kv_descending = kv_descending;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info->ctas_per_sm, kernel, kThreads, kSmem));
    return;
  }
  const float scale_log2 = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kD)) * 1.4426950408889634);
  kernel<<<grid, kThreads, kSmem, stream>>>(t.at<const T>(Tensor::Q), t.at<const T>(Tensor::K),
                                            t.at<const T>(Tensor::V), t.at<T>(Tensor::O), t.at<float>(Tensor::lse), N,
                                            scale_log2, kv_descending, t.trace, t.kv_offsets, t.kv_blocks);
  CUDA_CHECK_LAUNCH();
}

template <typename T, int kD, int kBr, int kBc>
void launch_causal(const AttentionProblem& p, bool desc, const DeviceTensors& t, cudaStream_t s, LaunchInfo* info) {
  if (p.block_mask && t.kv_offsets == nullptr && info == nullptr)
    throw std::invalid_argument("flash2: a block mask needs its K/V block lists (AttentionBuffers builds them)");
  const bool masked = p.block_mask != nullptr;
  if (p.causal) {
    if (masked) launch_shape<T, kD, kBr, kBc, true, true>(p, desc, t, s, info);
    else launch_shape<T, kD, kBr, kBc, true, false>(p, desc, t, s, info);
  } else {
    if (masked) launch_shape<T, kD, kBr, kBc, false, true>(p, desc, t, s, info);
    else launch_shape<T, kD, kBr, kBc, false, false>(p, desc, t, s, info);
  }
}

// A row of the shape table: the kernel in fp16 and bf16, causal or not chosen at launch.
struct Row {
  template <int D, int BR, int BC>
  static constexpr CompiledShape row() {
    return {D, BR, BC, &launch_causal<__half, D, BR, BC>, &launch_causal<__nv_bfloat16, D, BR, BC>};
  }
};

// The first per d is the default (why those: sim/algo/kernel_tiles.hpp).
constexpr auto kShapes = shape_table<kernel_tiles::flash2, Row>();

class Flash2Kernels final : public KernelFamily {
public:
  Algo algo() const override { return flash2_room(); }
  std::span<const CompiledShape> shapes() const override { return kShapes; }
  std::vector<ScratchTensor> scratch(const AttentionProblem& p) const override {
    return {{Tensor::lse, p.instances() * p.seq_len * kStatBytes}};
  }
  const char* profiler_names() const override { return "flash2_kernel"; }
  bool takes_block_mask() const override { return true; }
  std::int64_t default_max_n() const override { return 65536; }
};

}  // namespace

const KernelFamily& flash2_kernels() {
  static const Flash2Kernels family;
  return family;
}

}  // namespace hbmlab::gpu
