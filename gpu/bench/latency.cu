// The SM's latencies, the other half of pipes.cu: how long a warp waits on a result it depends on,
// measured with the SM's own cycle counter (clock64), one CTA per SM:
//   mma chain    mma.sync m16n8k16 (fp16 in, fp32 accumulate) where each MMA adds into the
//                accumulator of the one before: C independent chains a warp (1, 2, 4, 8), one
//                MMA of each chain per step, with 1, 4 and 8 warps on the SM. With one chain a step
//                lasts one MMA's latency; with more it approaches the pipe's rate (pipes.cu);
//   ldmatrix→mma ldmatrix.x4, then an MMA that takes the four loaded registers as its A operand,
//                then the next address from the MMA's result (ldmatrix and MMA latency in series,
//                plus the two integer ops between: LOP3, IADD);
//   barrier      __syncthreads (bar.sync 0) after bar.sync with 4, 8 and 16 warps, nothing between:
//                a barrier's round trip.
// Shared memory holds zeros (from a kernel argument, so the compiler cannot know), so the chased
// addresses stay in place; the MMAs' operands are not all zeros where no address depends on them.
// Each case reports the median over the SMs of cycles per step and the clock (the slowest SM's
// cycles over the event time), median of 5 launches after a warm-up.
// Build and run: gpu/bench/latency.sh OUTDIR
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.cuh"

namespace {

constexpr int kSmemBytes = 160 * 1024;  // one CTA per SM
constexpr int kUnroll = 8;              // steps per loop iteration

struct Out {
  long long* cycles;  // one per CTA
  unsigned* sink;
};

__device__ __forceinline__ std::uint32_t hash(std::uint32_t x) {
  x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
  return x;
}
__device__ __forceinline__ std::uint32_t half2_bits(std::uint32_t seed) {
  const std::uint32_t h = hash(seed);
  const __half2 v = __floats2half2_rn(static_cast<float>(h & 0xffff) / 65536.0f - 0.5f,
                                      static_cast<float>(h >> 16) / 65536.0f - 0.5f);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}
__device__ __forceinline__ long long start_clock() {
  __syncthreads();
  return clock64();
}
__device__ __forceinline__ void stop_clock(long long t0, const Out& out) {
  __syncthreads();
  if (threadIdx.x == 0) out.cycles[blockIdx.x] = clock64() - t0;
}
__device__ __forceinline__ void mma(float (&c)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// [SECTION] mma.sync dependent chains

template <int kChains>
__global__ void mma_chain_kernel(int iters, std::uint32_t, Out out) {
  std::uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = half2_bits(threadIdx.x * 8 + i);
  for (int i = 0; i < 2; ++i) b[i] = half2_bits(threadIdx.x * 8 + 4 + i);
  float c[kChains][4] = {};
  const long long t0 = start_clock();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int k = 0; k < kChains; ++k) mma(c[k], a, b);
    }
  }
  stop_clock(t0, out);
  float s = 0;
  for (int k = 0; k < kChains; ++k) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
  if (s == 1234.5f) out.sink[0] = 1;
}

// [SECTION] ldmatrix chases

__device__ void fill_smem(std::uint32_t* words, int count, std::uint32_t value) {
  for (int i = threadIdx.x; i < count; i += blockDim.x) words[i] = value;
  __syncthreads();
}

// ldmatrix.x4 → mma.sync with the loaded registers as A → next address from the accumulator's bits.
// (A chase of ldmatrix alone, the next address from the loaded bits, was tried: nvcc removed its
// loop, as nothing but an impossible comparison read the address.)
__global__ void ldsm_chain_kernel(int iters, std::uint32_t zero, Out out) {
  extern __shared__ __align__(1024) std::uint32_t smem[];
  fill_smem(smem, kSmemBytes / 4, zero);
  // Lane t addresses row t%8 of matrix t/8: 512 contiguous bytes, no bank conflict.
  const std::uint32_t base = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem)) + 16 * (threadIdx.x % 32);
  std::uint32_t off = 0;
  std::uint32_t b[2] = {half2_bits(threadIdx.x + 1), half2_bits(threadIdx.x + 2)};
  float c[4] = {};
  const long long t0 = start_clock();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      std::uint32_t a[4];
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(base + off));
      mma(c, a, b);
      off = __float_as_uint(c[0]) & 0x200u;  // zero: the loaded A is all zeros
    }
  }
  stop_clock(t0, out);
  if (off == 0x12345u || c[1] == 1234.5f) out.sink[0] = 1;
}

// [SECTION] barriers

__global__ void barrier_kernel(int iters, std::uint32_t, Out out) {
  const long long t0 = start_clock();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) asm volatile("bar.sync 0;\n" ::: "memory");
  }
  stop_clock(t0, out);
}

struct Case {
  std::string name;
  void (*kernel)(int, std::uint32_t, Out);
  int threads;
  int iters;
  double per_step;  // the instructions of the measured kind a warp issues per step
};

}  // namespace

int main() {
  const char* me = "latency";
  cudaDeviceProp prop{};
  bench::check(cudaGetDeviceProperties(&prop, 0), me, "cudaGetDeviceProperties");
  const int sms = prop.multiProcessorCount;

  std::vector<Case> cases;
  void (*chains[])(int, std::uint32_t, Out) = {mma_chain_kernel<1>, mma_chain_kernel<2>, mma_chain_kernel<4>,
                                               mma_chain_kernel<8>};
  const int chain_counts[] = {1, 2, 4, 8};
  for (int warps : {1, 4, 8})
    for (int k = 0; k < 4; ++k)
      cases.push_back({"mma chain x" + std::to_string(chain_counts[k]) + " " + std::to_string(warps) + "w",
                       chains[k], 32 * warps, 2000, static_cast<double>(chain_counts[k])});
  cases.push_back({"ldmatrix.x4>mma chase 1w", ldsm_chain_kernel, 32, 2000, 1});
  for (int warps : {4, 8, 16}) cases.push_back({"bar.sync " + std::to_string(warps) + "w", barrier_kernel, 32 * warps, 2000, 1});

  long long* cycles = nullptr;
  unsigned* sink = nullptr;
  bench::check(cudaMalloc(&cycles, sms * sizeof(long long)), me, "cudaMalloc cycles");
  bench::check(cudaMalloc(&sink, sizeof(unsigned)), me, "cudaMalloc sink");
  std::printf("device %s, %d SMs, one CTA per SM; cycles per step (clock64), median over SMs, median of 5 launches\n",
              prop.name, sms);
  std::printf("%-26s %6s %14s %16s %10s %9s\n", "case", "thr", "cycles/step", "cycles/instr/w", "cycles", "MHz");
  for (const Case& c : cases) {
    bench::check(cudaFuncSetAttribute(c.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes), me, c.name.c_str());
    std::vector<double> steps, clocks, totals;
    const auto launch = [&] { c.kernel<<<sms, c.threads, kSmemBytes>>>(c.iters, 0u, Out{cycles, sink}); };
    for (const bench::SmLaunch& r : bench::time_per_sm(launch, sms, cycles, me, c.name.c_str())) {
      totals.push_back(r.median_cycles);
      steps.push_back(r.median_cycles / (static_cast<double>(c.iters) * kUnroll));
      clocks.push_back(r.mhz);
    }
    const double step = bench::median(steps);
    std::printf("%-26s %6d %14.2f %16.2f %10.0f %9.0f\n", c.name.c_str(), c.threads, step, step / c.per_step,
                bench::median(totals), bench::median(clocks));
  }
  return 0;
}
