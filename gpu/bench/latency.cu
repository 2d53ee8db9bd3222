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
//                a barrier's round trip;
//   ffma chain   fma.rn.f32 into the accumulator of the one before (C chains a warp, 1 or 8 warps):
//                one FP32 FMA's latency, what a dot product with one accumulator waits per element;
//   ld.shared    a pointer chase in shared memory: ld.shared.u32 of the next address (each word holds
//                its own address), and ld.shared.f32 → fma.rn.f32 on the loaded value → next address
//                from the FMA's bits (LOP3, IADD between, as the ldmatrix chase);
//   shfl         shfl.sync.bfly into the value of the one before, alone and as a reduction step with
//                max.f32 or add.f32 (a warp's row max and row sum take five of these in a row);
//   expf, div    expf and IEEE division (the compiler's own sequences) each on the last one's result.
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

__device__ __forceinline__ long long start_clock() {
  __syncthreads();
  return clock64();
}
__device__ __forceinline__ void stop_clock(long long t0, const Out& out) {
  __syncthreads();
  if (threadIdx.x == 0) out.cycles[blockIdx.x] = clock64() - t0;
}

// [SECTION] mma.sync dependent chains

template <int kChains>
__global__ void mma_chain_kernel(int iters, std::uint32_t, Out out) {
  std::uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = bench::half2_bits(threadIdx.x * 8 + i, 1.0f);
  for (int i = 0; i < 2; ++i) b[i] = bench::half2_bits(threadIdx.x * 8 + 4 + i, 1.0f);
  float c[kChains][4] = {};
  const long long t0 = start_clock();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int k = 0; k < kChains; ++k) bench::mma(c[k], a, b);
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
  std::uint32_t b[2] = {bench::half2_bits(threadIdx.x + 1, 1.0f), bench::half2_bits(threadIdx.x + 2, 1.0f)};
  float c[4] = {};
  const long long t0 = start_clock();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      std::uint32_t a[4];
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(base + off));
      bench::mma(c, a, b);
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

// [SECTION] FP32, shared-memory load and shuffle chains

template <int kChains>
__global__ void ffma_chain_kernel(int iters, std::uint32_t, Out out) {
  const float a = 1.0f + 1e-7f * static_cast<float>(threadIdx.x), b = 1e-7f;
  float c[kChains];
  for (int k = 0; k < kChains; ++k) c[k] = static_cast<float>(k);
  const long long t0 = start_clock();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int k = 0; k < kChains; ++k) asm volatile("fma.rn.f32 %0, %1, %2, %0;\n" : "+f"(c[k]) : "f"(a), "f"(b));
    }
  }
  stop_clock(t0, out);
  float s = 0;
  for (int k = 0; k < kChains; ++k) s += c[k];
  if (s == 1234.5f) out.sink[0] = 1;
}

// Each word holds its own shared-memory address, so ld.shared of an address returns it again.
__global__ void lds_chase_kernel(int iters, std::uint32_t zero, Out out) {
  extern __shared__ __align__(1024) std::uint32_t smem[];
  const std::uint32_t base = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  for (int i = threadIdx.x; i < kSmemBytes / 4; i += blockDim.x) smem[i] = base + 4 * i + zero;
  __syncthreads();
  std::uint32_t addr = base + 4 * (threadIdx.x % 32);  // a warp's 32 consecutive words: one wavefront
  const long long t0 = start_clock();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) asm volatile("ld.shared.u32 %0, [%0];\n" : "+r"(addr));
  }
  stop_clock(t0, out);
  if (addr == 0x12345u) out.sink[0] = 1;
}

// ld.shared.f32 → fma.rn.f32 on the loaded float → the next address from the FMA's bits (zero:
// shared memory holds zeros and the accumulator stays 0).
__global__ void lds_ffma_chase_kernel(int iters, std::uint32_t zero, Out out) {
  extern __shared__ __align__(1024) std::uint32_t smem[];
  fill_smem(smem, kSmemBytes / 4, zero);
  const std::uint32_t base = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem)) + 4 * (threadIdx.x % 32);
  std::uint32_t off = 0;
  float acc = 0.f;
  const float x = 1.0f + static_cast<float>(threadIdx.x);
  const long long t0 = start_clock();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float v;
      asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(base + off));
      asm volatile("fma.rn.f32 %0, %1, %2, %0;\n" : "+f"(acc) : "f"(v), "f"(x));
      off = __float_as_uint(acc) & 0x200u;
    }
  }
  stop_clock(t0, out);
  if (off == 0x12345u || acc == 1234.5f) out.sink[0] = 1;
}

// kOp 0: shfl.sync.bfly alone; 1: then max.f32 with the value before (a row max's step); 2: add.f32.
template <int kOp>
__global__ void shfl_chain_kernel(int iters, std::uint32_t, Out out) {
  float v = static_cast<float>(threadIdx.x % 32);
  const long long t0 = start_clock();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float t;
      asm volatile("shfl.sync.bfly.b32 %0, %1, 1, 0x1f, 0xffffffff;\n" : "=f"(t) : "f"(v));
      if constexpr (kOp == 0) v = t;
      if constexpr (kOp == 1) asm volatile("max.f32 %0, %0, %1;\n" : "+f"(v) : "f"(t));
      if constexpr (kOp == 2) asm volatile("add.f32 %0, %0, %1;\n" : "+f"(v) : "f"(t));
    }
  }
  stop_clock(t0, out);
  if (v == 1234.5f) out.sink[0] = 1;
}

// expf (v stays near the fixed point 1 of e^(v − 1)) and IEEE division (1/v stays 1), each on the
// last result.
template <bool kDivide>
__global__ void sfu_chain_kernel(int iters, std::uint32_t zero, Out out) {
  float v = 1.0f + __uint_as_float(zero);
  const long long t0 = start_clock();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if constexpr (kDivide) v = 1.0f / v;
      else v = expf(v - 1.0f);
      asm volatile("" : "+f"(v));
    }
  }
  stop_clock(t0, out);
  if (v == 1234.5f) out.sink[0] = 1;
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
  for (int warps : {1, 8}) {
    const std::string w = " " + std::to_string(warps) + "w";
    cases.push_back({"ffma chain x1" + w, ffma_chain_kernel<1>, 32 * warps, 2000, 1});
    cases.push_back({"ffma chain x4" + w, ffma_chain_kernel<4>, 32 * warps, 2000, 4});
    cases.push_back({"ld.shared chase" + w, lds_chase_kernel, 32 * warps, 2000, 1});
    cases.push_back({"ld.shared>ffma chase" + w, lds_ffma_chase_kernel, 32 * warps, 2000, 1});
    cases.push_back({"shfl.bfly chain" + w, shfl_chain_kernel<0>, 32 * warps, 2000, 1});
    cases.push_back({"shfl.bfly+max.f32" + w, shfl_chain_kernel<1>, 32 * warps, 2000, 1});
    cases.push_back({"shfl.bfly+add.f32" + w, shfl_chain_kernel<2>, 32 * warps, 2000, 1});
  }
  cases.push_back({"expf chain 1w", sfu_chain_kernel<false>, 32, 2000, 1});
  cases.push_back({"div.rn.f32 chain 1w", sfu_chain_kernel<true>, 32, 2000, 1});

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
