// What the microbenchmarks share: an exit on a CUDA error (every one), the L2 benchmarks' %smid, fill
// and streaming read (l2_partition.cu, l2_policy.cu, l2_reuse.cu), a grid-wide barrier for grids
// whose CTAs are all resident at once (l2_reuse.cu, l2_layout.cu, l2_alias.cu), and the timing of a
// kernel that runs one CTA per SM under its own clock (pipes.cu, latency.cu), and the operands and
// MMA those kernels feed their tensor pipes with (pipes.cu, latency.cu, l2_reduce.cu).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace bench {

__device__ __forceinline__ std::uint32_t hash(std::uint32_t x) {
  x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
  return x;
}
// Two fp16 values from hash(seed), uniform in [-span/2, span/2), packed as an MMA operand register.
__device__ __forceinline__ std::uint32_t half2_bits(std::uint32_t seed, float span) {
  const std::uint32_t h = hash(seed);
  const __half2 v = __floats2half2_rn((static_cast<float>(h & 0xffff) / 65536.0f - 0.5f) * span,
                                      (static_cast<float>(h >> 16) / 65536.0f - 0.5f) * span);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}
// mma.sync m16n8k16, fp16 in, fp32 accumulated into c.
__device__ __forceinline__ void mma(float (&c)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Prints "PROGRAM: WHAT: error" and exits 1 unless `e` is cudaSuccess.
inline void check(cudaError_t e, const char* program, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", program, what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// The SM this thread runs on.
__device__ __forceinline__ unsigned int sm_id() {
  unsigned int s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

// Writes `vectors` uint4s of a pattern, so that every page of the buffer is the GPU's own.
__global__ void fill_kernel(uint4* data, std::size_t vectors) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < vectors; i += std::size_t(gridDim.x) * blockDim.x)
    data[i] = uint4{unsigned(i), unsigned(i * 2654435761u), unsigned(i >> 7), 0x5bd1e995u};
}

// Streams through `vectors` uint4s from the whole grid (ld.global.cg): evicts whatever the L2 held.
__global__ void flush_kernel(const uint4* data, std::size_t vectors, uint4* sink) {
  uint4 acc{0, 0, 0, 0};
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < vectors; i += std::size_t(gridDim.x) * blockDim.x) {
    const uint4 x = __ldcg(data + i);
    acc.x ^= x.x, acc.y ^= x.y, acc.z ^= x.z, acc.w ^= x.w;
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) sink[threadIdx.x] = acc;
}

__device__ unsigned int g_arrived = 0;
__device__ volatile unsigned int g_generation = 0;

// Every CTA of the grid waits here until all `ctas` have arrived. Only for grids that fit the GPU
// at once: a CTA that never gets an SM would leave the others waiting for ever.
__device__ void grid_barrier(unsigned int ctas) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned int gen = g_generation;
    __threadfence();
    if (atomicAdd(&g_arrived, 1u) == ctas - 1) {
      g_arrived = 0;
      __threadfence();
      g_generation = gen + 1;
    } else {
      while (g_generation == gen) {
      }
    }
  }
  __syncthreads();
}

// One timed launch of a kernel that runs one CTA per SM and writes each CTA's clock64 span to
// cycles[blockIdx.x]: the median SM's cycles, and the SM clock in MHz (the slowest SM's cycles over
// the launch's elapsed time).
struct SmLaunch {
  double median_cycles = 0, mhz = 0;
};

// Runs `launch()` six times, the first a warm-up, and returns the five timed launches.
template <class Launch>
std::vector<SmLaunch> time_per_sm(Launch launch, int sms, const long long* cycles, const char* program,
                                  const char* what) {
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), program, "event");
  check(cudaEventCreate(&e1), program, "event");
  std::vector<SmLaunch> runs;
  for (int rep = 0; rep < 6; ++rep) {
    check(cudaEventRecord(e0), program, "record");
    launch();
    check(cudaGetLastError(), program, what);
    check(cudaEventRecord(e1), program, "record");
    check(cudaDeviceSynchronize(), program, what);
    if (rep == 0) continue;  // warm-up
    float ms = 0;
    check(cudaEventElapsedTime(&ms, e0, e1), program, "elapsed");
    std::vector<long long> cyc(sms);
    check(cudaMemcpy(cyc.data(), cycles, sms * sizeof(long long), cudaMemcpyDeviceToHost), program, "copy");
    std::sort(cyc.begin(), cyc.end());
    runs.push_back({static_cast<double>(cyc[sms / 2]), static_cast<double>(cyc[sms - 1]) / (ms * 1e-3) / 1e6});
  }
  check(cudaEventDestroy(e0), program, "event");
  check(cudaEventDestroy(e1), program, "event");
  return runs;
}

// The median of `v` (the upper one of an even count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace bench

