// L2 layout microbenchmark: does the same number of bytes fit the L2 equally well wherever it lies?
//
// The whole GPU (two CTAs per SM, a grid-wide barrier between rounds) reads a working set of W
// bytes `rounds` times over, in the same order each round. The working set is `regions` regions
// of `region` bytes each, `stride` bytes apart: stride = region is one contiguous block; a region
// of 128 KiB every 2 MiB is how the K of 16 heads of N = 512, d = 128 lie when the GPU works on
// one head of each of 32 batches at a time. Loads are ld.global.cg (every access reaches the L2).
//
// A cyclic sweep is the worst case for an LRU: if W fits, DRAM serves it once; if not, every
// round misses again. Nsight Compute's dram__bytes_read.sum per launch tells which, so the W at
// which re-reads start to miss is the capacity the L2 has for that layout. A first launch of no
// regions measures the few KB every launch reads besides. Working sets run from half the L2 the
// driver reports to 90 % of it.
//
// Build: nvcc -O3 -arch=sm_90 -o l2_layout gpu/bench/l2_layout.cu
// Run:   l2_layout          (one launch per (layout, W), printed in launch order; profile it with ncu)
//        LAYOUTS="128:2048 16:256" FRACTIONS="0.5 0.6" l2_layout   (regions:strides in KiB, working
//        sets as shares of the L2: these replace the default lists)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.cuh"

namespace {

void check(cudaError_t e, const char* what) { bench::check(e, "l2_layout", what); }

__global__ void layout_kernel(const char* base, long long region, long long stride, int regions, int rounds,
                              uint4* sink) {
  const long long vectors_per_region = region / 16, vectors = vectors_per_region * regions;
  const long long first = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  uint4 acc{0, 0, 0, 0};
  for (int r = 0; r < rounds; ++r) {
    for (long long v = first; v < vectors; v += step) {
      const long long at = (v / vectors_per_region) * stride + (v % vectors_per_region) * 16;
      const uint4 x = __ldcg(reinterpret_cast<const uint4*>(base + at));
      acc.x ^= x.x, acc.y ^= x.y, acc.z ^= x.z, acc.w ^= x.w;
    }
    bench::grid_barrier(gridDim.x);
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) sink[first] = acc;  // keeps the loads
}

}  // namespace

int main() {
  constexpr long long kKiB = 1 << 10, kMiB = 1 << 20;
  constexpr int kRounds = 4, kThreads = 256;
  struct Layout {
    long long region, stride;
  };
  std::vector<Layout> layouts = {{1 * kMiB, 1 * kMiB},   {2 * kMiB, 4 * kMiB},   {2 * kMiB, 64 * kMiB},
                                 {128 * kKiB, 2 * kMiB}, {128 * kKiB, 3 * kMiB}, {16 * kKiB, 2 * kMiB},
                                 {16 * kKiB, 256 * kKiB}};
  std::vector<double> fractions = {0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9};
  if (const char* env = std::getenv("LAYOUTS")) {
    layouts.clear();
    std::istringstream in(env);
    long long region_kib = 0, stride_kib = 0;
    char colon = 0;
    while (in >> region_kib >> colon >> stride_kib) {
      if (colon != ':' || region_kib < 1 || stride_kib < region_kib) {
        std::fprintf(stderr, "l2_layout: LAYOUTS: want REGION_KIB:STRIDE_KIB with STRIDE >= REGION\n");
        return 2;
      }
      layouts.push_back({region_kib * kKiB, stride_kib * kKiB});
    }
  }
  if (const char* env = std::getenv("FRACTIONS")) {
    fractions.clear();
    std::istringstream in(env);
    for (double f = 0; in >> f;) fractions.push_back(f);
  }
  if (layouts.empty() || fractions.empty()) {
    std::fprintf(stderr, "l2_layout: LAYOUTS or FRACTIONS given but empty\n");
    return 2;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::vector<long long> sizes;  // working sets as shares of the L2 the driver reports, whole MiB
  for (const double f : fractions) sizes.push_back(static_cast<long long>(f * prop.l2CacheSize) / kMiB * kMiB);
  std::sort(sizes.begin(), sizes.end());
  long long span = 0;
  for (const Layout& l : layouts) span = std::max(span, sizes.back() / l.region * l.stride);
  const int ctas = 2 * prop.multiProcessorCount;
  char* base = nullptr;
  uint4* sink = nullptr;
  check(cudaMalloc(&base, span), "cudaMalloc (working sets)");
  check(cudaMalloc(&sink, std::size_t(ctas) * kThreads * sizeof(uint4)), "cudaMalloc");
  check(cudaMemset(base, 1, span), "cudaMemset");
  layout_kernel<<<ctas, kThreads>>>(base, 16, 16, 0, kRounds, sink);  // the baseline: no regions
  check(cudaDeviceSynchronize(), "layout_kernel");
  std::printf("run region 0 stride 0 regions 0 rounds %d\n", kRounds);
  for (const Layout& l : layouts) {
    for (const long long size : sizes) {
      const int regions = static_cast<int>(size / l.region);
      layout_kernel<<<ctas, kThreads>>>(base, l.region, l.stride, regions, kRounds, sink);
      check(cudaDeviceSynchronize(), "layout_kernel");
      std::printf("run region %lld stride %lld regions %d rounds %d\n", l.region, l.stride, regions, kRounds);
    }
  }
  return 0;
}
