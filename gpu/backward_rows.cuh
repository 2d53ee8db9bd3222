// The two row-block kernels of hbmlab's backward passes (gpu/flash2_backward.cu, gpu/flash3_backward.cu),
// which run before and after their main kernels: dot_do_o_kernel, D_i = rowsum(dO_i ∘ O_i) in fp32
// with the fp32 dQ accumulator's rows cleared; convert_dq_kernel, dQ = τ·dQ_accum in the dtype.
// Included by those .cu files only.
#pragma once

#include "gpu/ptx.cuh"

namespace hbmlab::gpu {
// Internal to each .cu file that includes it: the two are built for different targets (sm_90, sm_90a),
// so each keeps its own copy of these kernels.
namespace {

// [SECTION] (a) D = rowsum(dO ∘ O) and dQ_accum ← 0; (c) dQ = τ·dQ_accum

constexpr int kRowThreads = 128;  // threads of the two row-block kernels

// Each thread takes one 16-byte chunk of a row; the d/8 threads of a row are consecutive lanes and
// add their partial dot products with shuffles.
template <typename T, int kD, int kBr>
__global__ void __launch_bounds__(kRowThreads)
dot_do_o_kernel(const T* __restrict__ hbm_O, const T* __restrict__ hbm_dO, float* __restrict__ hbm_D,
                float* __restrict__ hbm_dQ_accum, int N) {
  constexpr int kChunks = kD / 8;
  constexpr int kRowsPerPass = kRowThreads / kChunks;
  static_assert(32 % kChunks == 0 && kBr % kRowsPerPass == 0, "a row's chunks must sit in one warp");
  const int r = threadIdx.x / kChunks, c = threadIdx.x % kChunks;
  const std::int64_t bh = blockIdx.y;
#pragma unroll
  for (int k = 0; k < kBr / kRowsPerPass; ++k) {
    const int row = blockIdx.x * kBr + k * kRowsPerPass + r;
    float dot = 0.f;
    if (row < N) {
      const std::int64_t at = (bh * N + row) * kD + c * 8;
      const int4 o = *reinterpret_cast<const int4*>(hbm_O + at);
      const int4 g = *reinterpret_cast<const int4*>(hbm_dO + at);
      const auto* o2 = reinterpret_cast<const typename Pair<T>::type*>(&o);
      const auto* g2 = reinterpret_cast<const typename Pair<T>::type*>(&g);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 a = Pair<T>::split(o2[e]), b = Pair<T>::split(g2[e]);
        dot += a.x * b.x + a.y * b.y;
      }
      float4* acc = reinterpret_cast<float4*>(hbm_dQ_accum + at);  // line 3: dQ ← 0, in fp32
      acc[0] = acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int s = kChunks / 2; s > 0; s /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, s);
    if (c == 0 && row < N) hbm_D[bh * N + row] = dot;  // line 4
  }
}

template <typename T, int kD, int kBr>
__global__ void __launch_bounds__(kRowThreads)
convert_dq_kernel(const float* __restrict__ hbm_dQ_accum, T* __restrict__ hbm_dQ, int N, float scale) {
  const int row0 = blockIdx.x * kBr;
  const std::int64_t base = (static_cast<std::int64_t>(blockIdx.y) * N + row0) * kD;
  const int chunks = min(kBr, N - row0) * (kD / 8);
  for (int k = threadIdx.x; k < chunks; k += kRowThreads) {
    const float4* src = reinterpret_cast<const float4*>(hbm_dQ_accum + base + 8 * k);
    const float4 a = src[0], b = src[1];
    const float x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    *reinterpret_cast<int4*>(hbm_dQ + base + 8 * k) = pack8<T>(x, scale);
  }
}

}  // namespace
}  // namespace hbmlab::gpu
