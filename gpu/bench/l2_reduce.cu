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
//
// `l2_reduce sm` measures the SM's side instead (the [SECTION] at the end): one CTA per SM (its
// shared memory allows no second), on 1, 2, 4 … 132 SMs, so that with few SMs the L2 is far from
// its limit and what binds is the SM's own path (the LSU and the memory pipe it feeds):
//   rate    each warp issues a stream of reductions (or plain stores, for scale) and the SM's
//           clock64 cycles give the warp instructions one SM issues per clock, for the layouts
//           PyTorch's FlashAttention-2 backward (red.f32, a warp = 32 consecutive floats) and
//           hbmlab's backward kernels (red.v2.f32 in the MMA fragment layout) use;
//   held    rounds of N reductions a warp, then 32 dependent mma.sync (or ldmatrix → mma chases,
//           the first loads of a GEMM): a round's cycles against each part alone say whether the
//           reductions' queue holds the warps that issued them (sum) or drains under their
//           MMAs (max).
// Build and run: gpu/bench/l2_reduce.sh OUTDIR
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
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

namespace {

int l2_main(int reps) {
  const char* me = "l2_reduce";
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

// [SECTION] The SM's side: how fast one SM issues reductions, and whether they hold its warps

constexpr int kSmSmemBytes = 160 * 1024;  // dynamic shared memory: no second CTA fits an SM
constexpr int kDepth = 64;                // reductions a warp issues before it adds into the same words again
constexpr int kMaxWarps = 16;
constexpr std::int64_t kWarpFloats = 8 * 8 * kRow;  // one warp's region: 64 adds of any layout below

// Where a warp's lanes add: `line` 32 consecutive floats (PyTorch's FlashAttention-2 backward, one
// atomicAdd(float) a lane), `rows` the MMA fragment as the L2 part's dQ rows (hbmlab's backward
// kernels: float2 a lane, 8 rows 256 B apart), `line2` 64 consecutive floats as float2, and `store`
// plain st.global.f32 into a line (for scale: another instruction the LSU sends to the L2 without a
// reply). Add u (< kDepth) of a warp goes to words base + step(u) of its own region, u an
// immediate offset in the unrolled loops, so the loop issues little besides the reductions.
enum class Layout { line, rows, line2, store };

template <Layout kL>
__device__ __forceinline__ float* lane_base(float* acc, int lane) {
  const std::int64_t warp = std::int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  float* region = acc + warp * kWarpFloats;
  if constexpr (kL == Layout::rows) return region + (lane / 4) * kRow + (lane % 4) * 2;
  if constexpr (kL == Layout::line2) return region + lane * 2;
  return region + lane;
}
// The words of add u + q (q a multiple of 8) are those of add u, `shift(q)` floats on.
template <Layout kL>
__device__ __forceinline__ int shift(int q) {
  if constexpr (kL == Layout::rows) return (q / 8) * 8 * kRow;
  if constexpr (kL == Layout::line2) return q * 64;
  return q * 32;
}
template <Layout kL>
__device__ __forceinline__ void add(float* base, int u, float x) {
  if constexpr (kL == Layout::line) red1(base + u * 32, x);
  if constexpr (kL == Layout::line2) red2(base + u * 64, x, -x);
  if constexpr (kL == Layout::rows) red2(base + (u / 8) * 8 * kRow + (u % 8) * 8, x, -x);
  if constexpr (kL == Layout::store)
    asm volatile("st.global.f32 [%0], %1;\n" ::"l"(base + u * 32), "f"(x) : "memory");
}

// rate: `rounds` × kDepth reductions a warp, nothing else; the CTA's clock64 span from the first
// to the last warp's last issue.
template <Layout kL>
__global__ void sm_rate_kernel(float* acc, int rounds, long long* cycles) {
  extern __shared__ float unused[];
  float* base = lane_base<kL>(acc, threadIdx.x % 32);
  const float x = 1.0f + float(threadIdx.x % 7) * 0.125f;
  __syncthreads();
  const long long t0 = clock64();
  for (int r = 0; r < rounds; ++r) {
#pragma unroll
    for (int u = 0; u < kDepth; ++u) add<kL>(base, u, x);
  }
  __syncthreads();
  if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - t0;
  if (rounds < 0) unused[0] = x;
}


// What a warp does after its reductions in each round: nothing, 32 MMAs each on the accumulator of
// the one before, or 32 chases ldmatrix.x4 → MMA on the loaded A → the next address from the
// product (latency.cu's; shared memory holds zeros, so the address stays put).
enum class Then { nothing, mma, ldsm };
constexpr int kFollow = 32;

// held: `rounds` rounds of kN reductions a warp (layout kL), then kFollow of `Then`; a round's
// cycles are the CTA's clock64 span over the rounds.
template <Layout kL, int kN, Then kThen>
__global__ void sm_held_kernel(float* acc, int rounds, std::uint32_t zero, long long* cycles, float* sink) {
  extern __shared__ __align__(1024) std::uint32_t smem[];
  if constexpr (kThen == Then::ldsm) {
    for (int i = threadIdx.x; i < 4096; i += blockDim.x) smem[i] = zero;
  }
  const int lane = threadIdx.x % 32;
  float* base = lane_base<kL>(acc, lane);
  const float x = 1.0f + float(lane % 7) * 0.125f;
  std::uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = bench::half2_bits(threadIdx.x * 8 + i, 1.0f);
  for (int i = 0; i < 2; ++i) b[i] = bench::half2_bits(threadIdx.x * 8 + 4 + i, 1.0f);
  float c[4] = {};
  const std::uint32_t row = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem)) + 16 * lane;
  std::uint32_t off = 0;
  __syncthreads();
  const long long t0 = clock64();
  for (int r = 0; r < rounds; ++r) {
    float* at = base + shift<kL>((r * kN) % kDepth);  // the next kN adds of the warp's kDepth
#pragma unroll
    for (int u = 0; u < kN; ++u) add<kL>(at, u, x);
    if constexpr (kThen == Then::mma) {
#pragma unroll
      for (int k = 0; k < kFollow; ++k) bench::mma(c, a, b);
    } else if constexpr (kThen == Then::ldsm) {
#pragma unroll
      for (int k = 0; k < kFollow; ++k) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                     : "r"(row + off));
        bench::mma(c, a, b);
        off = __float_as_uint(c[0]) & 0x200u;  // zero: the loaded A is all zeros
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - t0;
  if (c[0] + c[1] + c[2] + c[3] == 1234.5f || off == 0x12345u) sink[threadIdx.x] = c[0];
}

// step: as the backward kernels' steps, with a barrier: each round a warp issues kN reductions (its
// share of a dQ_i tile), then kK dependent MMAs, then __syncthreads, so no warp of the CTA runs ahead
// into the next round's MMAs while the others' reductions drain. burst[blockIdx.x] gets the cycles
// warp 0 spends issuing its reductions, summed over the rounds: how long the queue holds it.
template <Layout kL, int kN, int kK>
__global__ void sm_step_kernel(float* acc, int rounds, long long* cycles, long long* burst, float* sink) {
  const int lane = threadIdx.x % 32;
  float* base = lane_base<kL>(acc, lane);
  const float x = 1.0f + float(lane % 7) * 0.125f;
  std::uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = bench::half2_bits(threadIdx.x * 8 + i, 1.0f);
  for (int i = 0; i < 2; ++i) b[i] = bench::half2_bits(threadIdx.x * 8 + 4 + i, 1.0f);
  float c[4] = {};
  long long held = 0;
  __syncthreads();
  const long long t0 = clock64();
  for (int r = 0; r < rounds; ++r) {
    const long long b0 = clock64();
    float* at = base + shift<kL>((r * kN) % kDepth);
#pragma unroll
    for (int u = 0; u < kN; ++u) add<kL>(at, u, x);
    held += clock64() - b0;
#pragma unroll
    for (int k = 0; k < kK; ++k) bench::mma(c, a, b);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    cycles[blockIdx.x] = clock64() - t0;
    burst[blockIdx.x] = held;
  }
  if (c[0] + c[1] + c[2] + c[3] == 1234.5f) sink[threadIdx.x] = c[0];
}

struct SmRun {
  double cycles = 0, mhz = 0;  // the median SM's cycles and the clock, medians of 5 launches
};

// `launch(smem)` launches the kernel on `sms` CTAs with that much dynamic shared memory.
template <class Kernel, class Launch>
SmRun time_sm(Kernel kernel, Launch launch, int sms, long long* cycles, const char* what) {
  bench::check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmSmemBytes), "l2_reduce",
               what);
  std::vector<double> cyc, mhz;
  for (const bench::SmLaunch& l : bench::time_per_sm([&] { launch(kSmSmemBytes); }, sms, cycles, "l2_reduce", what)) {
    cyc.push_back(l.median_cycles);
    mhz.push_back(l.mhz);
  }
  return {bench::median(cyc), bench::median(mhz)};
}

struct HeldCase {
  const char* name;
  void (*kernel)(float*, int, std::uint32_t, long long*, float*);
  int reds;
  Then then;
};

template <Layout kL>
void held_table(const char* layout, float* acc, float* sink, long long* cycles, int all) {
  const HeldCase cases[] = {
      {"32 mma", sm_held_kernel<kL, 0, Then::mma>, 0, Then::mma},
      {"32 ldsm>mma", sm_held_kernel<kL, 0, Then::ldsm>, 0, Then::ldsm},
      {"8 red", sm_held_kernel<kL, 8, Then::nothing>, 8, Then::nothing},
      {"8 red + 32 mma", sm_held_kernel<kL, 8, Then::mma>, 8, Then::mma},
      {"8 red + 32 ldsm>mma", sm_held_kernel<kL, 8, Then::ldsm>, 8, Then::ldsm},
      {"32 red", sm_held_kernel<kL, 32, Then::nothing>, 32, Then::nothing},
      {"32 red + 32 mma", sm_held_kernel<kL, 32, Then::mma>, 32, Then::mma},
      {"32 red + 32 ldsm>mma", sm_held_kernel<kL, 32, Then::ldsm>, 32, Then::ldsm},
      {"64 red", sm_held_kernel<kL, 64, Then::nothing>, 64, Then::nothing},
      {"64 red + 32 mma", sm_held_kernel<kL, 64, Then::mma>, 64, Then::mma},
      {"64 red + 32 ldsm>mma", sm_held_kernel<kL, 64, Then::ldsm>, 64, Then::ldsm},
  };
  constexpr int kRounds = 128, kThreads = 256;
  for (int sms : {1, all}) {
    for (const HeldCase& c : cases) {
      const SmRun r = time_sm(
          c.kernel, [&](int smem) { c.kernel<<<sms, kThreads, smem>>>(acc, kRounds, 0u, cycles, sink); }, sms, cycles,
          c.name);
      std::printf("%-16s %-22s %4d %5d %12.1f %6.0f\n", layout, c.name, sms, kThreads / 32, r.cycles / kRounds, r.mhz);
    }
  }
}

struct StepCase {
  void (*kernel)(float*, int, long long*, long long*, float*);
  int reds, mmas;
};

template <Layout kL>
void step_table(const char* layout, float* acc, float* sink, long long* cycles, long long* burst, int all) {
  const StepCase cases[] = {
      {sm_step_kernel<kL, 0, 32>, 0, 32},    {sm_step_kernel<kL, 0, 128>, 0, 128},  {sm_step_kernel<kL, 8, 0>, 8, 0},
      {sm_step_kernel<kL, 8, 32>, 8, 32},    {sm_step_kernel<kL, 8, 128>, 8, 128},  {sm_step_kernel<kL, 16, 0>, 16, 0},
      {sm_step_kernel<kL, 16, 32>, 16, 32},  {sm_step_kernel<kL, 16, 128>, 16, 128}, {sm_step_kernel<kL, 32, 0>, 32, 0},
      {sm_step_kernel<kL, 32, 32>, 32, 32},  {sm_step_kernel<kL, 32, 128>, 32, 128},
  };
  constexpr int kRounds = 64, kThreads = 256;
  for (int per_sm : {1, 2}) {
    // Two CTAs an SM: each takes a little under half the shared memory, so exactly two fit.
    const int smem = per_sm == 1 ? kSmSmemBytes : 100 * 1024;
    // (Two CTAs on one SM alone cannot be asked for: the GPU spreads a grid's CTAs over the SMs.)
    for (int sms : {1, all}) {
      if (per_sm == 2 && sms == 1) continue;
      const int ctas = sms * per_sm;
      for (const StepCase& c : cases) {
        bench::check(cudaFuncSetAttribute(c.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmSmemBytes),
                     "l2_reduce", "attr");
        std::vector<double> cyc, held;
        for (const bench::SmLaunch& l : bench::time_per_sm(
                 [&] { c.kernel<<<ctas, kThreads, smem>>>(acc, kRounds, cycles, burst, sink); }, ctas, cycles,
                 "l2_reduce", "step")) {
          cyc.push_back(l.median_cycles);
          std::vector<long long> h(ctas);
          bench::check(cudaMemcpy(h.data(), burst, ctas * sizeof(long long), cudaMemcpyDeviceToHost), "l2_reduce",
                       "burst");
          std::sort(h.begin(), h.end());
          held.push_back(double(h[ctas / 2]));
        }
        std::printf("%-16s %4d %4d %4d %7d %12.1f %12.1f\n", layout, c.reds, c.mmas, sms, per_sm,
                    bench::median(cyc) / kRounds, bench::median(held) / kRounds);
      }
    }
  }
}

int sm_main() {
  const char* me = "l2_reduce sm";
  cudaDeviceProp prop{};
  bench::check(cudaGetDeviceProperties(&prop, 0), me, "cudaGetDeviceProperties");
  const int all = prop.multiProcessorCount;
  const std::int64_t floats = std::int64_t(all) * kMaxWarps * kWarpFloats;
  float *acc = nullptr, *scratch = nullptr, *sink = nullptr;
  long long* cycles = nullptr;
  bench::check(cudaMalloc(&acc, floats * sizeof(float)), me, "cudaMalloc acc");
  bench::check(cudaMalloc(&scratch, floats * sizeof(float)), me, "cudaMalloc scratch");
  bench::check(cudaMalloc(&sink, 1024 * sizeof(float)), me, "cudaMalloc sink");
  bench::check(cudaMalloc(&cycles, 2 * all * sizeof(long long)), me, "cudaMalloc cycles");
  bench::check(cudaMemset(acc, 0, floats * sizeof(float)), me, "cudaMemset acc");
  std::printf("device %s, %d SMs; one CTA per SM (%d KiB of shared memory each); each warp adds into its own "
              "%lld KiB region, the same words every %d adds, all L2-resident; medians of 5 launches after a warm-up\n",
              prop.name, all, kSmSmemBytes / 1024, static_cast<long long>(kWarpFloats * 4 / 1024), kDepth);

  struct RateCase {
    const char* name;
    void (*kernel)(float*, int, long long*);
    bool store;
    int bytes;  // per warp instruction
  };
  const RateCase rates[] = {
      {"red.f32 line", sm_rate_kernel<Layout::line>, false, 128},
      {"red.v2.f32 dQ rows", sm_rate_kernel<Layout::rows>, false, 256},
      {"red.v2.f32 line", sm_rate_kernel<Layout::line2>, false, 256},
      {"st.global.f32 line", sm_rate_kernel<Layout::store>, true, 128},
  };
  struct Shape {
    int sms, warps;
  };
  std::vector<Shape> shapes = {{1, 1}, {1, 4}, {1, 8}, {1, 16}};
  for (int s = 2; s < all; s *= 2) shapes.push_back({s, 8});
  shapes.push_back({all, 8});
  constexpr int kRounds = 128;  // 8,192 instructions a warp
  std::printf("\n# rate: warp instructions (and bytes) one SM issues per SM clock, %d a warp\n", kRounds * kDepth);
  std::printf("%-22s %4s %5s %10s %12s %10s %10s %6s\n", "case", "SMs", "warps", "cycles", "inst/clk/SM",
              "B/clk/SM", "GPU GB/s", "MHz");
  for (const RateCase& c : rates) {
    float* into = c.store ? scratch : acc;
    for (const Shape& sh : shapes) {
      const SmRun r = time_sm(
          c.kernel, [&](int smem) { c.kernel<<<sh.sms, 32 * sh.warps, smem>>>(into, kRounds, cycles); }, sh.sms,
          cycles, c.name);
      const double inst = double(sh.warps) * kRounds * kDepth;
      std::printf("%-22s %4d %5d %10.0f %12.3f %10.1f %10.0f %6.0f\n", c.name, sh.sms, sh.warps, r.cycles,
                  inst / r.cycles, inst * c.bytes / r.cycles, inst * c.bytes * sh.sms / (r.cycles / (r.mhz * 1e6)) / 1e9,
                  r.mhz);
    }
  }

  std::printf("\n# held: cycles a round of N reductions a warp then 32 dependent MMAs (or ldmatrix>mma chases), "
              "8 warps a CTA, 128 rounds\n");
  std::printf("%-16s %-22s %4s %5s %12s %6s\n", "layout", "round", "SMs", "warps", "cycles/round", "MHz");
  held_table<Layout::line>("red.f32 line", acc, sink, cycles, all);
  held_table<Layout::rows>("red.v2.f32 rows", acc, sink, cycles, all);

  std::printf("\n# step: rounds of N reductions a warp, K dependent MMAs, __syncthreads (a backward step's shape); "
              "8 warps a CTA, 1 or 2 CTAs an SM, 64 rounds; held = warp 0's cycles issuing its N reductions\n");
  std::printf("%-16s %4s %4s %4s %7s %12s %12s\n", "layout", "N", "K", "SMs", "CTAs/SM", "cycles/round", "held/round");
  long long* burst = nullptr;
  bench::check(cudaMalloc(&burst, 2 * all * sizeof(long long)), me, "cudaMalloc burst");
  step_table<Layout::line>("red.f32 line", acc, sink, cycles, burst, all);
  step_table<Layout::rows>("red.v2.f32 rows", acc, sink, cycles, burst, all);

  // The reductions happened: every word a warp added into holds a non-zero multiple of 1/8 (the
  // .v2 layouts add +x and −x, so only the scalar words are non-zero).
  std::vector<float> host(floats);
  bench::check(cudaMemcpy(host.data(), acc, floats * sizeof(float), cudaMemcpyDeviceToHost), me, "acc");
  std::int64_t nonzero = 0;
  bool wrong = false;
  for (float v : host) {
    if (v != 0) ++nonzero;
    if (v * 8 != float(static_cast<long long>(v * 8))) wrong = true;
  }
  std::printf("check: %lld accumulator words non-zero, all multiples of 1/8: %s\n", static_cast<long long>(nonzero),
              wrong ? "NO" : "yes");
  return wrong || nonzero == 0 ? 1 : 0;
}

// One launch each of three SM cases on one SM, 8 warps, for ncu (l2_reduce.sh): the two rate
// layouts and 32 reductions + 32 MMAs a round.
int sm_ncu_main() {
  const char* me = "l2_reduce sm-ncu";
  const std::int64_t floats = std::int64_t(kMaxWarps) * kWarpFloats;
  float *acc = nullptr, *sink = nullptr;
  long long* cycles = nullptr;
  bench::check(cudaMalloc(&acc, floats * sizeof(float)), me, "cudaMalloc acc");
  bench::check(cudaMalloc(&sink, 1024 * sizeof(float)), me, "cudaMalloc sink");
  bench::check(cudaMalloc(&cycles, sizeof(long long)), me, "cudaMalloc cycles");
  bench::check(cudaMemset(acc, 0, floats * sizeof(float)), me, "cudaMemset acc");
  auto big = [&](auto kernel) {
    bench::check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmSmemBytes), me, "attr");
  };
  big(sm_rate_kernel<Layout::line>);
  big(sm_rate_kernel<Layout::rows>);
  big(sm_held_kernel<Layout::line, 32, Then::mma>);
  sm_rate_kernel<Layout::line><<<1, 256, kSmSmemBytes>>>(acc, 32, cycles);
  sm_rate_kernel<Layout::rows><<<1, 256, kSmSmemBytes>>>(acc, 32, cycles);
  sm_held_kernel<Layout::line, 32, Then::mma><<<1, 256, kSmSmemBytes>>>(acc, 64, 0u, cycles, sink);
  bench::check(cudaDeviceSynchronize(), me, "launches");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "sm") == 0) return sm_main();
  if (argc > 1 && std::strcmp(argv[1], "sm-ncu") == 0) return sm_ncu_main();
  return l2_main(argc > 1 ? std::max(1, std::atoi(argv[1])) : 5);  // l2_reduce.sh passes 1 under ncu
}
