// What a kernel costs before it does any work, and what its first loads cost, as Nsight Compute
// times them (gpu__time_duration under --cache-control all, the condition of every calibration run):
//   empty      G CTAs of 128 threads that do nothing: the launch and drain of a grid of G;
//   one_load   G CTAs whose thread 0 loads 16 bytes (each CTA in its own 2 MiB page) and stores them:
//              the launch plus one cold DRAM round trip;
//   chain      one CTA whose thread 0 follows K dependent loads, each in a new 2 MiB page: the launch
//              plus K cold round trips, so the slope is the latency of a load that misses L2 and TLB.
// kRepeats launches per case, in the order printed ("case NAME G K" per launch), so the ncu rows match
// them; launch_cost.sh reports each case's median, fastest and slowest.
// Build and run: gpu/bench/launch_cost.sh OUTDIR
#include <cstdint>
#include <cstdio>
#include <vector>

#include "bench_util.cuh"

namespace {

constexpr int kThreads = 128;
constexpr int kRepeats = 5;
constexpr std::size_t kPage = std::size_t{2} << 20;  // bytes between two CTAs' (or two steps') loads

__global__ void empty_kernel() {}

__global__ void one_load_kernel(const int4* in, int4* out) {
  if (threadIdx.x == 0) out[blockIdx.x] = in[blockIdx.x * (kPage / sizeof(int4))];
}

// next[i] holds the index of the next load; each step lands in another page.
__global__ void chain_kernel(const std::uint32_t* next, std::uint32_t* out, int steps) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  std::uint32_t at = 0;
  for (int k = 0; k < steps; ++k) at = next[at];
  out[0] = at;
}

}  // namespace

int main() {
  const char* me = "launch_cost";
  const int grids[] = {1, 33, 132, 264, 528, 1056, 4224};
  const int chains[] = {1, 2, 4, 8, 16, 32};
  const int max_grid = 4224, max_steps = 32;

  int4 *in = nullptr, *out = nullptr;
  bench::check(cudaMalloc(&in, max_grid * kPage), me, "cudaMalloc in");
  bench::check(cudaMalloc(&out, max_grid * sizeof(int4)), me, "cudaMalloc out");
  bench::check(cudaMemset(in, 0, max_grid * kPage), me, "cudaMemset in");

  // The chain: step k reads word k·page/4 + (k % 32)·32 (a different 128-byte line in each page).
  const std::size_t words = (max_steps + 1) * kPage / sizeof(std::uint32_t);
  std::vector<std::uint32_t> host(words, 0);
  const auto word = [](int k) { return static_cast<std::uint32_t>(k * (kPage / 4) + (k % 32) * 32); };
  for (int k = 0; k < max_steps; ++k) host[word(k)] = word(k + 1);
  std::uint32_t *next = nullptr, *sink = nullptr;
  bench::check(cudaMalloc(&next, words * sizeof(std::uint32_t)), me, "cudaMalloc chain");
  bench::check(cudaMalloc(&sink, sizeof(std::uint32_t)), me, "cudaMalloc sink");
  bench::check(cudaMemcpy(next, host.data(), words * sizeof(std::uint32_t), cudaMemcpyHostToDevice), me, "copy chain");

  // Warm up: the first launch of each kernel loads its module.
  empty_kernel<<<1, kThreads>>>();
  one_load_kernel<<<1, kThreads>>>(in, out);
  chain_kernel<<<1, kThreads>>>(next, sink, 1);
  bench::check(cudaDeviceSynchronize(), me, "warm-up");
  std::printf("warmup\n");

  for (int g : grids)
    for (int r = 0; r < kRepeats; ++r) {
      empty_kernel<<<g, kThreads>>>();
      bench::check(cudaDeviceSynchronize(), me, "empty");
      std::printf("case empty %d 0\n", g);
    }
  for (int g : grids)
    for (int r = 0; r < kRepeats; ++r) {
      one_load_kernel<<<g, kThreads>>>(in, out);
      bench::check(cudaDeviceSynchronize(), me, "one_load");
      std::printf("case one_load %d 1\n", g);
    }
  for (int k : chains)
    for (int r = 0; r < kRepeats; ++r) {
      chain_kernel<<<1, kThreads>>>(next, sink, k);
      bench::check(cudaDeviceSynchronize(), me, "chain");
      std::printf("case chain 1 %d\n", k);
    }
  return 0;
}
