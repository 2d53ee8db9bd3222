// The L2's reduction throughput: how many fp32 adds per second `red.global.add` (scalar, .v2, .v4)
// completes when every SM issues them into distinct fp32 addresses that stay resident in the L2, as
// the backward kernels add their dQ_i fragments into the fp32 accumulator (gpu/flash2_backward.cu,
// gpu/flash3_backward.cu: atomicAdd on float2, red.global.add.v2.f32 once ptxas drops the unused
// result). Cases:
//   red.f32 / red.v2.f32 / red.v4.f32   a warp's lanes add into 128 / 256 / 512 contiguous bytes;
//   red.v2.f32 dQ rows                  the kernels' fragment layout: lane l adds 2 floats at row
//                                       l/4, column pair l%4 of an 8-row stripe, rows 256 B apart
//                                       (d = 64 in fp32), so one instruction touches 8 sectors;
//   ld.global.cg.v2.f32                 plain loads from the L2, the same addresses, for scale;
//   red.v2 + ld.v2 (half each)          half the CTAs reduce, half load (another buffer), at once.
// Every case: 4 CTAs of 256 threads per SM (all resident at once), each thread sweeping a 16 MiB
// buffer (L2-resident after the warm-up launch: the H100's L2 is 50 MB) so that no two adds in
// flight hit the same address; the time is the median of 5 launches (CUDA events) after one
// warm-up; the SM clock is the median CTA's clock64 cycles over that time. Operands are non-zero.
// Build and run: gpu/bench/l2_reduce.sh OUTDIR
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "bench_util.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kCtasPerSm = 4;
constexpr std::int64_t kBufferFloats = 4 << 20;  // 16 MiB
constexpr int kIters = 512;                      // sweeps of the grid over the buffer, per thread

enum class Op { red1, red2, red4, red2_rows, load2, mixed };

__device__ __forceinline__ void red1(float* a, float x) {
  asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(a), "f"(x) : "memory");
}
__device__ __forceinline__ void red2(float* a, float x, float y) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(a), "f"(x), "f"(y) : "memory");
}
__device__ __forceinline__ void red4(float* a, float x, float y, float z, float w) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(a), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
}
__device__ __forceinline__ float2 load2(const float* a) {
  float2 v;
  asm volatile("ld.global.cg.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "l"(a));
  return v;
}

// Word offset of thread `t` (of `threads`) in sweep `k`, for accesses of `vec` floats: the grid's
// threads cover `threads · vec` consecutive floats per sweep, and sweeps follow each other round
// the buffer. kBufferFloats is a multiple of every such span's alignment, so vectors stay aligned.
__device__ __forceinline__ std::int64_t offset(std::int64_t k, std::int64_t t, std::int64_t threads, int vec) {
  return ((k * threads + t) * vec) % kBufferFloats;
}

// The backward kernels' dQ fragment: an 8-row stripe of kRow fp32 columns; lane l adds floats
// 2(l%4), 2(l%4)+1 of row l/4 in column block k%8 (8 floats wide). Warp w of the grid owns stripe w
// for 8 sweeps (its 8 column blocks), then every stripe moves on by the grid's warps (fewer than the
// buffer's 8,192 stripes, so no two warps share one).
constexpr std::int64_t kRow = 64;
__device__ __forceinline__ std::int64_t dq_offset(std::int64_t k, std::int64_t warp, std::int64_t warps, int lane) {
  const std::int64_t stripe = ((k / 8) * warps + warp) % (kBufferFloats / (8 * kRow));
  return stripe * 8 * kRow + (lane / 4) * kRow + (k % 8) * 8 + (lane % 4) * 2;
}

template <Op kOp>
__global__ void __launch_bounds__(kThreads) reduce_kernel(float* acc, const float* src, long long* cycles, float* sink) {
  const std::int64_t threads = std::int64_t(gridDim.x) * blockDim.x;
  const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const float x = 1.0f + float(t % 7) * 0.125f;  // non-zero addends, exact in fp32
  float kept = 0;
  __syncthreads();
  const long long t0 = clock64();
  if constexpr (kOp == Op::red1) {
    for (int k = 0; k < kIters; ++k) red1(acc + offset(k, t, threads, 1), x);
  } else if constexpr (kOp == Op::red2) {
    for (int k = 0; k < kIters; ++k) red2(acc + offset(k, t, threads, 2), x, -x);
  } else if constexpr (kOp == Op::red4) {
    for (int k = 0; k < kIters; ++k) red4(acc + offset(k, t, threads, 4), x, -x, x, -x);
  } else if constexpr (kOp == Op::red2_rows) {
    const std::int64_t warps = threads / 32, warp = t / 32;
    for (int k = 0; k < kIters; ++k) red2(acc + dq_offset(k, warp, warps, threadIdx.x % 32), x, -x);
  } else if constexpr (kOp == Op::load2) {
    for (int k = 0; k < kIters; ++k) {
      const float2 v = load2(src + offset(k, t, threads, 2));
      kept += v.x + v.y;
    }
  } else {  // mixed: even CTAs reduce into acc, odd CTAs load from src; each half sweeps its own buffer
    const std::int64_t half = threads / 2;
    const std::int64_t u = std::int64_t(blockIdx.x / 2) * blockDim.x + threadIdx.x;
    if (blockIdx.x % 2 == 0) {
      for (int k = 0; k < kIters; ++k) red2(acc + offset(k, u, half, 2), x, -x);
    } else {
      for (int k = 0; k < kIters; ++k) {
        const float2 v = load2(src + offset(k, u, half, 2));
        kept += v.x + v.y;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - t0;
  if (kept == 12345.0f) sink[t] = kept;  // keeps the loads; never true for the buffer's values
}

struct Case {
  const char* name;
  void (*kernel)(float*, const float*, long long*, float*);
  double red_floats_per_thread, load_floats_per_thread;  // over the whole grid's threads, per sweep
};

template <typename T>
T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const char* me = "l2_reduce";
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;  // l2_reduce.sh passes 1 under ncu
  cudaDeviceProp prop{};
  bench::check(cudaGetDeviceProperties(&prop, 0), me, "cudaGetDeviceProperties");
  const int ctas = prop.multiProcessorCount * kCtasPerSm;
  const std::int64_t threads = std::int64_t(ctas) * kThreads;
  float *acc = nullptr, *src = nullptr, *sink = nullptr;
  long long* cycles = nullptr;
  bench::check(cudaMalloc(&acc, kBufferFloats * sizeof(float)), me, "cudaMalloc acc");
  bench::check(cudaMalloc(&src, kBufferFloats * sizeof(float)), me, "cudaMalloc src");
  bench::check(cudaMalloc(&sink, threads * sizeof(float)), me, "cudaMalloc sink");
  bench::check(cudaMalloc(&cycles, ctas * sizeof(long long)), me, "cudaMalloc cycles");
  bench::check(cudaMemset(acc, 0, kBufferFloats * sizeof(float)), me, "cudaMemset acc");
  {
    std::vector<float> ones(kBufferFloats, 0.5f);
    bench::check(cudaMemcpy(src, ones.data(), kBufferFloats * sizeof(float), cudaMemcpyHostToDevice), me, "cudaMemcpy src");
  }
  const Case cases[] = {
      {"red.global.add.f32", reduce_kernel<Op::red1>, 1, 0},
      {"red.global.add.v2.f32", reduce_kernel<Op::red2>, 2, 0},
      {"red.global.add.v4.f32", reduce_kernel<Op::red4>, 4, 0},
      {"red.global.add.v2.f32 dQ rows", reduce_kernel<Op::red2_rows>, 2, 0},
      {"ld.global.cg.v2.f32", reduce_kernel<Op::load2>, 0, 2},
      {"red.v2 + ld.v2 (half each)", reduce_kernel<Op::mixed>, 1, 1},
  };
  std::printf("device %s, %d SMs, %d CTAs x %d threads, %d sweeps of a %lld MiB L2-resident buffer; "
              "median of %d launches\n",
              prop.name, prop.multiProcessorCount, ctas, kThreads, kIters,
              static_cast<long long>(kBufferFloats * 4 >> 20), reps);
  std::printf("%-32s %10s %10s %12s %12s %8s\n", "case", "red GB/s", "load GB/s", "red add/clk", "load B/clk", "MHz");
  cudaEvent_t e0, e1;
  bench::check(cudaEventCreate(&e0), me, "cudaEventCreate");
  bench::check(cudaEventCreate(&e1), me, "cudaEventCreate");
  std::vector<long long> cyc(ctas);
  bool wrong = false;
  for (const Case& c : cases) {
    std::vector<float> ms;
    std::vector<long long> med_cycles;
    for (int r = 0; r <= reps; ++r) {  // launch 0 warms the L2 and is not timed
      bench::check(cudaEventRecord(e0), me, "cudaEventRecord");
      c.kernel<<<ctas, kThreads>>>(acc, src, cycles, sink);
      bench::check(cudaGetLastError(), me, c.name);
      bench::check(cudaEventRecord(e1), me, "cudaEventRecord");
      bench::check(cudaEventSynchronize(e1), me, c.name);
      float t = 0;
      bench::check(cudaEventElapsedTime(&t, e0, e1), me, "cudaEventElapsedTime");
      bench::check(cudaMemcpy(cyc.data(), cycles, ctas * sizeof(long long), cudaMemcpyDeviceToHost), me, "cycles");
      if (r > 0) {
        ms.push_back(t);
        med_cycles.push_back(median(cyc));
      }
    }
    const double s = median(ms) * 1e-3, clk = double(median(med_cycles));
    const double red_bytes = c.red_floats_per_thread * 4.0 * double(threads) * kIters;
    const double load_bytes = c.load_floats_per_thread * 4.0 * double(threads) * kIters;
    std::printf("%-32s %10.0f %10.0f %12.1f %12.1f %8.0f\n", c.name, red_bytes / s / 1e9, load_bytes / s / 1e9,
                red_bytes / 4.0 / clk, load_bytes / clk, clk / s / 1e6);
  }
  // The reductions really happened: every add of +x was matched by one of −x (.v2, .v4) or sums
  // whole numbers of eighths (.f32), so the buffer holds multiples of 1/8, and some are not zero.
  {
    std::vector<float> host(kBufferFloats);
    bench::check(cudaMemcpy(host.data(), acc, kBufferFloats * sizeof(float), cudaMemcpyDeviceToHost), me, "acc");
    std::int64_t nonzero = 0;
    for (float v : host) {
      if (v != 0) ++nonzero;
      if (v * 8 != float(static_cast<long long>(v * 8))) wrong = true;
    }
    std::printf("check: %lld of %lld accumulator words non-zero, all multiples of 1/8: %s\n",
                static_cast<long long>(nonzero), static_cast<long long>(kBufferFloats), wrong ? "NO" : "yes");
    if (nonzero == 0) wrong = true;
  }
  return wrong ? 1 : 0;
}
