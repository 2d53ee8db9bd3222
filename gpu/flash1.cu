// flash1: the FlashAttention paper's Algorithm 1 as printed — K/V outer loop, Q/O/ℓ/m inner loop,
// O_i, ℓ_i, m_i read from and written back to HBM on every outer step. Slow on purpose: its traffic
// is the paper's, so the model's counts can be checked against the GPU's own counters.
// Run: hbmlab measure --algo flash1 --seq-len 2048 --head-dim 64 [--blocks 32x32]
//
// Versions:
//   v1 flash1_kernel: one CTA per (batch, head) walks the whole Tc × Tr loop nest; K_j, V_j stay
//      in shared memory (fp32) for the inner loop; S_ij, P̃_ij are computed with plain fp32 FMAs.
//      O lives in HBM in the problem dtype, ℓ and m in fp32, exactly as the paper's lines 2, 8, 13.
#include <cmath>

#include "gpu/ptx.cuh"
#include "gpu/kernels.hpp"

namespace hbmlab {
// The rooms these kernels run, bound by their objects (sim/algo/registry.cpp lists the same accessors).
const Algorithm& flash1_room();  // sim/algo/flash1
}  // namespace hbmlab

namespace hbmlab::gpu {
namespace {

constexpr int kFlash1Threads = 256;

template <typename T, int kD, int kBr, int kBc>
__global__ void __launch_bounds__(kFlash1Threads)
flash1_kernel(const T* __restrict__ hbm_Q, const T* __restrict__ hbm_K, const T* __restrict__ hbm_V,
              T* __restrict__ hbm_O, float* __restrict__ hbm_l, float* __restrict__ hbm_m, int N, float scale,
              bool causal) {
  static_assert(kD % 4 == 0 && kBr > 0 && kBc > 0, "d must be a multiple of 4");
  extern __shared__ __align__(16) float sram[];
  constexpr int kKStride = kD + 1;          // padded so that a warp's 32 keys hit 32 banks
  float* sram_Kj = sram;                    // (Bc, d + 1)
  float* sram_Vj = sram_Kj + kBc * kKStride;  // (Bc, d)
  float* sram_Qi = sram_Vj + kBc * kD;      // (Br, d)
  float* sram_Oi = sram_Qi + kBr * kD;      // (Br, d)
  float* sram_S = sram_Oi + kBr * kD;       // (Br, Bc): S_ij, then P̃_ij
  float* sram_li = sram_S + kBr * kBc;      // (Br)
  float* sram_mi = sram_li + kBr;           // (Br)
  float* sram_scale_old = sram_mi + kBr;    // (Br): ℓ_i e^(m_i − m_new) / ℓ_new
  float* sram_scale_new = sram_scale_old + kBr;  // (Br): e^(m̃ − m_new) / ℓ_new

  const int tid = threadIdx.x;
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * N;
  const T* Q = hbm_Q + base * kD;
  const T* K = hbm_K + base * kD;
  const T* V = hbm_V + base * kD;
  T* O = hbm_O + base * kD;
  float* l = hbm_l + base;
  float* m = hbm_m + base;
  const int Tr = (N + kBr - 1) / kBr, Tc = (N + kBc - 1) / kBc;

  // line 2: initialise O = 0, ℓ = 0, m = −∞ in HBM.
  for (std::int64_t k = tid; k < static_cast<std::int64_t>(N) * kD; k += kFlash1Threads) O[k] = from_float<T>(0.f);
  for (int k = tid; k < N; k += kFlash1Threads) { l[k] = 0.f; m[k] = -INFINITY; }
  __syncthreads();

  for (int j = 0; j < Tc; ++j) {  // line 5
    const int c0 = j * kBc, cols = min(kBc, N - c0);
    // line 6: load K_j, V_j from HBM to SRAM.
    for (int k = tid; k < cols * kD; k += kFlash1Threads) {
      sram_Kj[(k / kD) * kKStride + k % kD] = to_float(K[static_cast<std::int64_t>(c0) * kD + k]);
      sram_Vj[k] = to_float(V[static_cast<std::int64_t>(c0) * kD + k]);
    }
    for (int i = 0; i < Tr; ++i) {  // line 7
      const int r0 = i * kBr, rows = min(kBr, N - r0);
      if (causal && c0 > r0 + rows - 1) continue;  // every key of K_j after Q_i's last query
      __syncthreads();
      // line 8: load Q_i, O_i, ℓ_i, m_i from HBM to SRAM.
      for (int k = tid; k < rows * kD; k += kFlash1Threads) {
        sram_Qi[k] = to_float(Q[static_cast<std::int64_t>(r0) * kD + k]);
        sram_Oi[k] = to_float(O[static_cast<std::int64_t>(r0) * kD + k]);
      }
      for (int k = tid; k < rows; k += kFlash1Threads) { sram_li[k] = l[r0 + k]; sram_mi[k] = m[r0 + k]; }
      __syncthreads();
      // line 9: S_ij = τ Q_i K_jᵀ (masked after the query when causal).
      for (int k = tid; k < rows * kBc; k += kFlash1Threads) {
        const int r = k / kBc, c = k % kBc;
        float s = -INFINITY;
        if (c < cols && !(causal && c0 + c > r0 + r)) {
          float acc = 0.f;
#pragma unroll 8
          for (int e = 0; e < kD; ++e) acc += sram_Qi[r * kD + e] * sram_Kj[c * kKStride + e];
          s = acc * scale;
        }
        sram_S[k] = s;
      }
      __syncthreads();
      // lines 10–11: m̃ = rowmax(S), P̃ = exp(S − m̃), ℓ̃ = rowsum(P̃); m_new, ℓ_new. One warp per row.
      for (int r = tid / 32; r < rows; r += kFlash1Threads / 32) {
        const int lane = tid % 32;
        float mt = -INFINITY;
        for (int c = lane; c < kBc; c += 32) mt = fmaxf(mt, sram_S[r * kBc + c]);
        for (int o = 16; o > 0; o /= 2) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
        float lt = 0.f;
        for (int c = lane; c < kBc; c += 32) {
          const float p = (mt == -INFINITY) ? 0.f : expf(sram_S[r * kBc + c] - mt);
          sram_S[r * kBc + c] = p;
          lt += p;
        }
        for (int o = 16; o > 0; o /= 2) lt += __shfl_xor_sync(0xffffffffu, lt, o);
        if (lane == 0) {
          const float mi = sram_mi[r], li = sram_li[r];
          const float mn = fmaxf(mi, mt);
          const float a = (mi == -INFINITY) ? 0.f : expf(mi - mn) * li;  // ℓ_i e^(m_i − m_new)
          const float b = (mt == -INFINITY) ? 0.f : expf(mt - mn);       // e^(m̃ − m_new)
          const float ln = a + b * lt;
          sram_scale_old[r] = ln > 0.f ? a / ln : 0.f;
          sram_scale_new[r] = ln > 0.f ? b / ln : 0.f;
          sram_mi[r] = mn;
          sram_li[r] = ln;
        }
      }
      __syncthreads();
      // line 12: O_i = diag(ℓ_new)^-1 (diag(ℓ_i) e^(m_i − m_new) O_i + e^(m̃ − m_new) P̃ V_j), to HBM.
      for (int k = tid; k < rows * kD; k += kFlash1Threads) {
        const int r = k / kD, e = k % kD;
        float acc = 0.f;
        for (int c = 0; c < cols; ++c) acc += sram_S[r * kBc + c] * sram_Vj[c * kD + e];
        const float o = sram_scale_old[r] * sram_Oi[k] + sram_scale_new[r] * acc;
        O[static_cast<std::int64_t>(r0) * kD + k] = from_float<T>(o);
      }
      // line 13: write ℓ_i, m_i to HBM.
      for (int k = tid; k < rows; k += kFlash1Threads) { l[r0 + k] = sram_li[k]; m[r0 + k] = sram_mi[k]; }
    }
    __syncthreads();
  }
}

template <typename T, int kD, int kBr, int kBc>
void launch_shape(const AttentionProblem& p, bool, const DeviceTensors& t, cudaStream_t stream, LaunchInfo* info) {
  constexpr int kSmem = (kBc * (kD + 1) + kBc * kD + 2 * kBr * kD + kBr * kBc + 4 * kBr) * 4;
  auto kernel = flash1_kernel<T, kD, kBr, kBc>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  if (info != nullptr) {
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    info->threads_per_cta = kFlash1Threads;
    info->registers_per_thread = attr.numRegs;
    info->smem_bytes_per_cta = static_cast<int>(kSmem + attr.sharedSizeBytes);
    info->ctas = p.instances();
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info->ctas_per_sm, kernel, kFlash1Threads, kSmem));
    return;
  }
  const int N = static_cast<int>(p.seq_len);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kD)));
  kernel<<<static_cast<unsigned>(p.instances()), kFlash1Threads, kSmem, stream>>>(
      t.at<const T>(Tensor::Q), t.at<const T>(Tensor::K), t.at<const T>(Tensor::V), t.at<T>(Tensor::O),
      t.at<float>(Tensor::l), t.at<float>(Tensor::m), N, scale, p.causal);
  CUDA_CHECK_LAUNCH();
}

// A row of the shape table: launch_shape in fp16 and bf16.
struct Row {
  template <int D, int BR, int BC>
  static constexpr CompiledShape row() {
    return {D, BR, BC, &launch_shape<__half, D, BR, BC>, &launch_shape<__nv_bfloat16, D, BR, BC>};
  }
};

constexpr auto kShapes = shape_table<kernel_tiles::flash1, Row>();

class Flash1Kernels final : public KernelFamily {
public:
  Algo algo() const override { return flash1_room(); }
  std::span<const CompiledShape> shapes() const override { return kShapes; }
  std::vector<ScratchTensor> scratch(const AttentionProblem& p) const override {
    const std::int64_t bytes = p.instances() * p.seq_len * kStatBytes;
    return {{Tensor::l, bytes}, {Tensor::m, bytes}};
  }
  // O lives in HBM in the dtype and is rounded again on each of the Tc outer steps, so its error
  // grows like √Tc roundoffs: twice the default budget.
  Tolerance tolerance(Dtype dtype) const override {
    const Tolerance t = KernelFamily::tolerance(dtype);
    return {2 * t.atol, 2 * t.rtol};
  }
  const char* profiler_names() const override { return "flash1_kernel"; }
  std::int64_t default_max_n() const override { return 8192; }
};

}  // namespace

const KernelFamily& flash1_kernels() {
  static const Flash1Kernels family;
  return family;
}

}  // namespace hbmlab::gpu
