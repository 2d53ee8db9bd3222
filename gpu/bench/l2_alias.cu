// L2 aliasing microbenchmark: do lines a large power of two apart compete for the same L2 sets?
//
// One CTA (one SM) reads `lines` lines, `stride` bytes apart, `rounds` times over, 16 bytes of
// each line per read (ld.global.cg, so every read reaches the L2). If the lines fit, DRAM serves
// each line once; if they alias onto too few sets, every round misses again. Nsight Compute's
// dram__bytes_read.sum per launch tells which: about 64 bytes per line (one DRAM fill) against
// 64 · rounds. A first launch of no lines measures the few KB every launch reads besides.
//
// Build: nvcc -O3 -arch=sm_90 -o l2_alias gpu/bench/l2_alias.cu
// Run:   l2_alias          (one launch per (stride, lines), printed in launch order; profile it with ncu)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_util.cuh"

namespace {

void check(cudaError_t e, const char* what) { bench::check(e, "l2_alias", what); }

__global__ void alias_kernel(const char* base, long long stride, int lines, int rounds, unsigned* sink) {
  unsigned acc = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int i = threadIdx.x; i < lines; i += blockDim.x) {
      const uint4 x = __ldcg(reinterpret_cast<const uint4*>(base + static_cast<long long>(i) * stride));
      acc ^= x.x ^ x.w;
    }
    __syncthreads();
  }
  if (acc == 0x9e3779b9u) sink[threadIdx.x] = acc;  // keeps the loads; never true for the memset bytes
}

}  // namespace

int main() {
  constexpr long long kMiB = 1 << 20;
  constexpr int kRounds = 8;
  const long long buffer = 30LL << 30;
  char* base = nullptr;
  unsigned* sink = nullptr;
  check(cudaMalloc(&base, buffer), "cudaMalloc (30 GiB)");
  check(cudaMalloc(&sink, 1024 * sizeof(unsigned)), "cudaMalloc");
  check(cudaMemset(base, 1, buffer), "cudaMemset");
  const std::vector<long long> strides = {128 << 10, 1 * kMiB, 2 * kMiB, 2 * kMiB + 128, 3 * kMiB,
                                          4 * kMiB,  16 * kMiB, 32 * kMiB, 64 * kMiB};
  const std::vector<int> counts = {64, 128, 256, 512, 1024, 2048};
  alias_kernel<<<1, 1024>>>(base, 0, 0, kRounds, sink);  // the baseline: no lines
  check(cudaDeviceSynchronize(), "alias_kernel");
  std::printf("run stride 0 lines 0 rounds %d\n", kRounds);
  for (const long long stride : strides) {
    for (const int lines : counts) {
      if (static_cast<long long>(lines) * stride > buffer) continue;
      alias_kernel<<<1, 1024>>>(base, stride, lines, kRounds, sink);
      check(cudaDeviceSynchronize(), "alias_kernel");
      std::printf("run stride %lld lines %d rounds %d\n", stride, lines, kRounds);
    }
  }
  return 0;
}
