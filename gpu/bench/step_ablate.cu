// One step of hbmlab's flash2 forward (gpu/flash2.cu, Br = 128: 4 warps of two m16 row groups), run
// from shared memory alone, and the same step with one of its parts taken out or doubled: which part
// the SM's cycles a step go to (docs/design.md, "The SM's pipes", "What is left").
//
// The step is the kernel's own code (gpu/ptx.cuh, gpu/tiles.cuh: the same swizzled layout, fragment
// offsets, ldmatrix, mma.sync m16n8k16, ex2.approx and P̃V loop): S = Q_i K_jᵀ with Q_i's fragments
// re-read per k16 step, the row max (two shuffles a row), the exps, the rescale of ℓ and O, then
// O += P̃ V_j, between the kernel's two barriers. K_j and V_j sit in shared memory in the kernel's two
// stages, filled once; the base step loads nothing from global memory (the variant `fills` adds the
// kernel's cp.async of the next K/V block, from a buffer small enough to stay in L2).
// Every CTA runs `steps` steps; thread 0 times them with clock64 between two barriers. With k CTAs
// resident on every SM (a grid of k × SMs CTAs, the shared memory asked for leaving room for k), a
// CTA's cycles over its steps are the SM's cycles a step: k CTAs' block pairs, as the measured
// kernels' "cycles a step" (an SM's elapsed cycles over its block pairs / k).
// Variants (one flag each, the rest as the kernel):
//   no_exp         each ex2.approx becomes an FMUL (the FFMA before it stays)
//   no_rescale     O is not multiplied by e^(m_old − m_new) (ℓ still is)
//   no_ldmatrix    every MMA takes fragments loaded once before the loop (no ldmatrix in the step)
//   no_barrier     the step's two __syncthreads gone
//   no_shuffle     the row max without its two shuffles a row (each thread's own columns)
//   no_softmax     S goes straight to P̃V: MMAs, ldmatrix and barriers only
//   exp_x2         every exp twice (one more FFMA, MUFU.EX2 and FADD per score: d = 64, 128 × 128's exps)
//   rescale_x2     O rescaled twice (d = 128's FMULs at d = 64)
//   fills          the kernel's cp.async of the next K_j, V_j into the other stage, waited on per step
//   no_wait        (with fills) the cp.async not waited on: the fills' wait apart from their traffic
//   stores         in place of fills, the same bytes written by st.shared.v4 from registers
//   fills_only, stores_only   the fills (stores) and the two barriers alone, no GEMM, no softmax
//   ctas1, ctas3   1 or 3 CTAs per SM (3: __launch_bounds__(128, 3), one K/V stage to fit)
// Built with -DSTEP_ABLATE_SWEEP it runs instead the scores' exps swept at fixed MMAs and ldmatrix
// (kExpQ below: 0, ¼, ½, 1, 1½, 2 times the kernel's) at 2 and 1 CTAs an SM, without and with the
// fills, at the three shapes and d = 64, 128 × 64.
// Build and run: gpu/bench/step_ablate.sh OUTDIR (SWEEP=1: the sweep)
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.cuh"
#include "gpu/ptx.cuh"
#include "gpu/tiles.cuh"

namespace {

using hbmlab::gpu::FragmentOffsets;
using hbmlab::gpu::fast_exp2;
using hbmlab::gpu::ldmatrix_x4;
using hbmlab::gpu::ldmatrix_x4_trans;
using hbmlab::gpu::mma_16816;
using hbmlab::gpu::pack2;
using hbmlab::gpu::smem_u32;
using T = __half;

enum Flag : int {
  kNoExp = 1,
  kNoRescale = 2,
  kNoLdmatrix = 4,
  kNoBarrier = 8,
  kNoShuffle = 16,
  kNoSoftmax = 32,
  kExpX2 = 64,
  kRescaleX2 = 128,
  kFills = 256,
  kStores = 512,
  kNoCompute = 1024,
  kNoWait = 2048,
};

constexpr int kBr = 128, kWM = 2, kThreads = 128;

template <int kD, int kBc, int kStages>
__host__ __device__ constexpr int smem_bytes() {
  return (kBr + 2 * kStages * kBc) * kD * 2;
}

// kExpQ: the scores' exps in quarters of the kernel's (4: one a score, the kernel's own). Below 4 the
// score tiles t with t mod 4 ≥ kExpQ take no exp (the score, scaled and shifted by its FFMA, goes to
// P̃ as it is); above 4 the tiles with t mod 4 < kExpQ − 4 take a second exp of the same argument,
// negated, added to ℓ (one MUFU.EX2 and one FADD a score). MMAs, ldmatrix and the rest stay.
template <int kD, int kBc, int kFlags, int kMinCtas, int kExpQ = 4>
__global__ void __launch_bounds__(kThreads, kMinCtas)
step_kernel(int steps, float scale_log2, const T* __restrict__ hbm_K, const T* __restrict__ hbm_V, int kv_rows,
            long long* __restrict__ cycles, unsigned* __restrict__ sm_of, float* __restrict__ sink) {
  constexpr int kStages = kMinCtas >= 3 ? 1 : 2;
  constexpr int kDTiles = kD / 8, kKSteps = kD / 16, kSTiles = kBc / 8;
  constexpr bool no_exp = kFlags & kNoExp, no_rescale = kFlags & kNoRescale, no_ld = kFlags & kNoLdmatrix;
  constexpr bool no_bar = kFlags & kNoBarrier, no_shfl = kFlags & kNoShuffle, no_softmax = kFlags & kNoSoftmax;
  constexpr bool exp_x2 = kFlags & kExpX2, rescale_x2 = kFlags & kRescaleX2, fills = kFlags & kFills;
  constexpr bool stores = kFlags & kStores, no_compute = kFlags & kNoCompute, no_wait = kFlags & kNoWait;
  static_assert(!((fills || stores) && kStages == 1), "fills need the kernel's two stages");

  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t sram_Q = smem_u32(smem);
  const std::uint32_t sram_K = sram_Q + kBr * kD * 2;
  const std::uint32_t sram_V = sram_K + kStages * kBc * kD * 2;
  {  // Q_i, K_j, V_j: fp16 in [-0.5, 0.5), different per CTA
    auto* words = reinterpret_cast<std::uint32_t*>(smem);
    for (int w = threadIdx.x; w < smem_bytes<kD, kBc, kStages>() / 4; w += kThreads)
      words[w] = bench::half2_bits(blockIdx.x * 1000003u + w, 1.0f);
  }
  __syncthreads();

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int warp_row0 = warp * 16 * kWM;
  const FragmentOffsets q_at = FragmentOffsets::template make<kD>(warp_row0 + (lane % 8) + 8 * ((lane / 8) % 2), lane / 16);
  const FragmentOffsets k_at = FragmentOffsets::template make<kD>((lane % 8) + 8 * (lane / 16), (lane / 8) % 2);
  const FragmentOffsets v_at = FragmentOffsets::template make<kD>((lane % 8) + 8 * ((lane / 8) % 2), lane / 16);
  auto v_offset = [&](int pair, int key0) -> std::uint32_t { return v_at.template get<kD>(pair, key0); };

  // no_ldmatrix: one fragment of each operand, loaded here, feeds every MMA.
  std::uint32_t fixed_q[4] = {}, fixed_k[4] = {}, fixed_v[4] = {};
  if constexpr (no_ld) {
    ldmatrix_x4(fixed_q, sram_Q + q_at.template get<kD>(0, 0));
    ldmatrix_x4(fixed_k, sram_K + k_at.template get<kD>(0, 0));
    ldmatrix_x4_trans(fixed_v, sram_V + v_offset(0, 0));
  }

  float reg_O[kWM][kDTiles][4], reg_m[kWM][2], reg_l[kWM][2];
#pragma unroll
  for (int g = 0; g < kWM; ++g) {
    reg_m[g][0] = reg_m[g][1] = -INFINITY;
    reg_l[g][0] = reg_l[g][1] = 0.f;
#pragma unroll
    for (int t = 0; t < kDTiles; ++t) reg_O[g][t][0] = reg_O[g][t][1] = reg_O[g][t][2] = reg_O[g][t][3] = 0.f;
  }
  // fills: the next block's K_j, V_j from a small global buffer (L2-resident), as the kernel's prefetch.
  const int kv_blocks = kv_rows / kBc;
  const T* K = hbm_K;
  const T* V = hbm_V;

  __shared__ long long t0;  // thread 0's start, kept out of the loop's registers
  __syncthreads();
  if (tid == 0) t0 = clock64();
#pragma unroll 1
  for (int n = 0; n < steps; ++n) {
    const int stage = kStages == 2 ? (n & 1) : 0;
    if constexpr (fills) {
      const int next = (blockIdx.x + n + 1) % kv_blocks;
      hbmlab::gpu::load_tile<T, kD, kBc, kThreads>(sram_K + (stage ^ 1) * kBc * kD * 2, K, next * kBc, kv_rows, tid);
      hbmlab::gpu::load_tile<T, kD, kBc, kThreads>(sram_V + (stage ^ 1) * kBc * kD * 2, V, next * kBc, kv_rows, tid);
      hbmlab::gpu::cp_async_commit();
      if constexpr (!no_wait) hbmlab::gpu::cp_async_wait<1>();
    }
    if constexpr (stores) {  // the same bytes at the same swizzled places, from registers (st.shared.v4)
      constexpr int kChunks = kD / 8, kRowsPerPass = kThreads / kChunks;
      const std::uint32_t v = static_cast<std::uint32_t>(n) * 0x00010001u;
#pragma unroll
      for (int tile = 0; tile < 2; ++tile) {
        const std::uint32_t base = (tile == 0 ? sram_K : sram_V) + (stage ^ 1) * kBc * kD * 2 +
                                   hbmlab::gpu::swz<kD>(tid / kChunks, tid % kChunks) * 16;
#pragma unroll
        for (int k = 0; k < kBc / kRowsPerPass; ++k)
          asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(base + k * kRowsPerPass * kD * 2), "r"(v));
      }
    }
    if constexpr (!no_bar) __syncthreads();
    if constexpr (!no_compute) {
    const std::uint32_t sK = sram_K + stage * kBc * kD * 2;
    const std::uint32_t sV = sram_V + stage * kBc * kD * 2;

    float reg_S[kWM][kSTiles][4];
#pragma unroll
    for (int g = 0; g < kWM; ++g)
#pragma unroll
      for (int t = 0; t < kSTiles; ++t) reg_S[g][t][0] = reg_S[g][t][1] = reg_S[g][t][2] = reg_S[g][t][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      std::uint32_t a[kWM][4];
#pragma unroll
      for (int g = 0; g < kWM; ++g) {
        if constexpr (no_ld) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[g][e] = fixed_q[e];
        } else {
          ldmatrix_x4(a[g], sram_Q + q_at.template get<kD>(kk, 16 * g));
        }
      }
#pragma unroll
      for (int t = 0; t < kSTiles; t += 2) {
        std::uint32_t b[4];
        if constexpr (no_ld) {
#pragma unroll
          for (int e = 0; e < 4; ++e) b[e] = fixed_k[e];
        } else {
          ldmatrix_x4(b, sK + k_at.template get<kD>(kk, t * 8));
        }
#pragma unroll
        for (int g = 0; g < kWM; ++g) {
          mma_16816<T>(reg_S[g][t], a[g], b[0], b[1]);
          mma_16816<T>(reg_S[g][t + 1], a[g], b[2], b[3]);
        }
      }
    }

    if constexpr (!no_softmax) {
      const float scale_half = scale_log2 * 0.5f;  // exp_x2's second exp: its own FFMA
#pragma unroll
      for (int g = 0; g < kWM; ++g) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float mx = reg_m[g][h];
#pragma unroll
          for (int t = 0; t < kSTiles; ++t) mx = fmaxf(mx, fmaxf(reg_S[g][t][2 * h], reg_S[g][t][2 * h + 1]) * scale_log2);
          if constexpr (!no_shfl) {
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          }
          const float base = (mx == -INFINITY) ? 0.f : mx;
          auto ex = [&](float x) { if constexpr (no_exp) return x * 0.75f; else return fast_exp2(x); };
          const float rescale = ex(reg_m[g][h] - base);
          reg_m[g][h] = mx;
          float sum = 0.f;
#pragma unroll
          for (int t = 0; t < kSTiles; ++t) {
            const float s0 = reg_S[g][t][2 * h], s1 = reg_S[g][t][2 * h + 1];
            float p0, p1;
            if constexpr (kExpQ == 4) {
              p0 = ex(s0 * scale_log2 - base);
              p1 = ex(s1 * scale_log2 - base);
            } else {
              const bool first_exp = (t % 4) < kExpQ;
              const float x0 = s0 * scale_log2 - base, x1 = s1 * scale_log2 - base;
              p0 = first_exp ? ex(x0) : x0;
              p1 = first_exp ? ex(x1) : x1;
              if constexpr (kExpQ > 4) {
                if ((t % 4) < kExpQ - 4) sum += fast_exp2(-x0) + fast_exp2(-x1);
              }
            }
            reg_S[g][t][2 * h] = p0;
            reg_S[g][t][2 * h + 1] = p1;
            sum += p0 + p1;
            if constexpr (exp_x2) sum += ex(s0 * scale_half - base) + ex(s1 * scale_half - base);
          }
          reg_l[g][h] = reg_l[g][h] * rescale + sum;
          if constexpr (!no_rescale) {
#pragma unroll
            for (int t = 0; t < kDTiles; ++t) {
              reg_O[g][t][2 * h] *= rescale;
              reg_O[g][t][2 * h + 1] *= rescale;
            }
            if constexpr (rescale_x2) {
              const float again = rescale * 0.999f;
#pragma unroll
              for (int t = 0; t < kDTiles; ++t) {
                reg_O[g][t][2 * h] *= again;
                reg_O[g][t][2 * h + 1] *= again;
              }
            }
          }
        }
      }
    }

    // O += P̃ V_j (tiles.cuh's pv_mma, with the fixed fragment for no_ldmatrix)
#pragma unroll
    for (int kt = 0; kt < kSTiles / 2; ++kt) {
      std::uint32_t a[kWM][4];
#pragma unroll
      for (int g = 0; g < kWM; ++g) {
        a[g][0] = pack2<T>(reg_S[g][2 * kt][0], reg_S[g][2 * kt][1]);
        a[g][1] = pack2<T>(reg_S[g][2 * kt][2], reg_S[g][2 * kt][3]);
        a[g][2] = pack2<T>(reg_S[g][2 * kt + 1][0], reg_S[g][2 * kt + 1][1]);
        a[g][3] = pack2<T>(reg_S[g][2 * kt + 1][2], reg_S[g][2 * kt + 1][3]);
      }
#pragma unroll
      for (int dt = 0; dt < kDTiles; dt += 2) {
        std::uint32_t b[4];
        if constexpr (no_ld) {
#pragma unroll
          for (int e = 0; e < 4; ++e) b[e] = fixed_v[e];
        } else {
          ldmatrix_x4_trans(b, sV + v_offset(dt / 2, kt * 16));
        }
#pragma unroll
        for (int g = 0; g < kWM; ++g) {
          mma_16816<T>(reg_O[g][dt], a[g], b[0], b[1]);
          mma_16816<T>(reg_O[g][dt + 1], a[g], b[2], b[3]);
        }
      }
    }
    }  // !no_compute
    if constexpr (!no_bar) __syncthreads();
  }
  if constexpr (fills) hbmlab::gpu::cp_async_wait<0>();
  __syncthreads();
  const long long t1 = clock64();
  if (tid == 0) {
    cycles[blockIdx.x] = t1 - t0;
    unsigned sm = 0;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    sm_of[blockIdx.x] = sm;
  }
  float acc = 0.f;
#pragma unroll
  for (int g = 0; g < kWM; ++g) {
    acc += reg_l[g][0] + reg_l[g][1];
#pragma unroll
    for (int t = 0; t < kDTiles; ++t) acc += reg_O[g][t][0] + reg_O[g][t][1] + reg_O[g][t][2] + reg_O[g][t][3];
  }
  sink[blockIdx.x * kThreads + tid] = acc;
}

struct Bufs {
  long long* cycles;
  unsigned* sm_of;
  float* sink;
  const T* K;
  const T* V;
  int kv_rows;
  int sms;
};

constexpr int kSteps = 1024;
const char* kMe = "step_ablate";

// One variant at k CTAs per SM: the median CTA's cycles a step, the spread over the CTAs, the clock.
template <int kD, int kBc, int kFlags, int kCtas, int kExpQ = 4>
void run(const char* name, const Bufs& b) {
  constexpr int kMinCtas = kCtas >= 3 ? 3 : 1;
  constexpr int kStages = kCtas >= 3 ? 1 : 2;
  auto kernel = step_kernel<kD, kBc, kFlags, kMinCtas, kExpQ>;
  // The shared memory asked for leaves room for kCtas CTAs and no more (228 KiB an SM, 1 KiB each reserved).
  int bytes = smem_bytes<kD, kBc, kStages>();
  if (kCtas == 1) bytes = std::max(bytes, 120 * 1024);
  bench::check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), kMe, name);
  int fit = 0;
  bench::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kernel, kThreads, bytes), kMe, name);
  cudaFuncAttributes attr{};
  bench::check(cudaFuncGetAttributes(&attr, kernel), kMe, name);
  if (fit < kCtas) {
    std::printf("%-5d %-4d %-14s %5d  does not fit: %d CTAs an SM (%d registers, %d B shared)\n", kD, kBc, name,
                kCtas, fit, attr.numRegs, bytes);
    return;
  }
  const int ctas = kCtas * b.sms;
  const float scale_log2 = static_cast<float>(1.0 / std::sqrt(double{kD}) * 1.4426950408889634);
  auto launch = [&] {
    kernel<<<ctas, kThreads, bytes>>>(kSteps, scale_log2, b.K, b.V, b.kv_rows, b.cycles, b.sm_of, b.sink);
  };
  std::vector<double> per_step, mhz;
  for (const bench::SmLaunch& r : bench::time_per_sm(launch, ctas, b.cycles, kMe, name)) {
    per_step.push_back(r.median_cycles / kSteps);
    mhz.push_back(r.mhz);
  }
  // Residency: CTAs per SM, from %smid of the last launch.
  std::vector<unsigned> sm_of(ctas);
  bench::check(cudaMemcpy(sm_of.data(), b.sm_of, ctas * sizeof(unsigned), cudaMemcpyDeviceToHost), kMe, "copy");
  std::vector<int> per_sm(1024, 0);
  for (unsigned s : sm_of) ++per_sm[s % 1024];
  int lo = 1 << 30, hi = 0;
  for (int s = 0; s < b.sms; ++s) lo = std::min(lo, per_sm[s]), hi = std::max(hi, per_sm[s]);
  std::vector<long long> cyc(ctas);
  bench::check(cudaMemcpy(cyc.data(), b.cycles, ctas * sizeof(long long), cudaMemcpyDeviceToHost), kMe, "copy");
  std::sort(cyc.begin(), cyc.end());
  std::printf("%-5d %-4d %-14s %5d %9.1f %9.1f %9.1f %6.0f %5d %4d-%d\n", kD, kBc, name, kCtas, bench::median(per_step),
              static_cast<double>(cyc[0]) / kSteps, static_cast<double>(cyc[ctas - 1]) / kSteps, bench::median(mhz),
              attr.numRegs, lo, hi);
}

#ifndef STEP_ABLATE_SWEEP
template <int kD, int kBc>
void shape(const Bufs& b) {
  run<kD, kBc, 0, 2>("base", b);
  run<kD, kBc, kNoExp, 2>("no_exp", b);
  run<kD, kBc, kNoRescale, 2>("no_rescale", b);
  run<kD, kBc, kNoLdmatrix, 2>("no_ldmatrix", b);
  run<kD, kBc, kNoBarrier, 2>("no_barrier", b);
  run<kD, kBc, kNoShuffle, 2>("no_shuffle", b);
  run<kD, kBc, kNoSoftmax, 2>("no_softmax", b);
  run<kD, kBc, kNoExp | kNoRescale, 2>("no_exp,resc", b);
  run<kD, kBc, kExpX2, 2>("exp_x2", b);
  run<kD, kBc, kRescaleX2, 2>("rescale_x2", b);
  run<kD, kBc, kFills, 2>("fills", b);
  run<kD, kBc, kFills | kNoWait, 2>("fills,no_wait", b);
  run<kD, kBc, kFills | kNoCompute, 2>("fills_only", b);
  run<kD, kBc, kFills | kNoSoftmax, 2>("fills,no_sm", b);
  run<kD, kBc, kFills | kNoExp, 2>("fills,no_exp", b);
  run<kD, kBc, kFills | kNoRescale, 2>("fills,no_resc", b);
  run<kD, kBc, kFills | kNoLdmatrix, 2>("fills,no_ld", b);
  run<kD, kBc, kFills, 1>("fills,ctas1", b);
  run<kD, kBc, kStores, 2>("stores", b);
  run<kD, kBc, kStores | kNoCompute, 2>("stores_only", b);
  run<kD, kBc, 0, 1>("ctas1", b);
  run<kD, kBc, kNoExp | kNoRescale, 1>("ctas1,no_e,r", b);
  run<kD, kBc, 0, 3>("ctas3", b);
}
#else
// The exps swept at fixed MMAs and ldmatrix: 0, ¼, ½, 1, 1½ and 2 times the kernel's exps a score,
// at 2 and 1 CTAs an SM, without and with the K/V fills.
template <int kD, int kBc, int kFlags, int kCtas>
void sweep(const char* tag, const Bufs& b) {
  char name[32];
  auto label = [&](const char* q) { std::snprintf(name, sizeof name, "%s,e%s", tag, q); return name; };
  run<kD, kBc, kFlags, kCtas, 0>(label("0"), b);
  run<kD, kBc, kFlags, kCtas, 1>(label(".25"), b);
  run<kD, kBc, kFlags, kCtas, 2>(label(".5"), b);
  run<kD, kBc, kFlags, kCtas, 4>(label("1"), b);
  run<kD, kBc, kFlags, kCtas, 6>(label("1.5"), b);
  run<kD, kBc, kFlags, kCtas, 8>(label("2"), b);
}
template <int kD, int kBc>
void shape(const Bufs& b) {
  sweep<kD, kBc, 0, 2>("c2", b);
  sweep<kD, kBc, 0, 1>("c1", b);
  sweep<kD, kBc, kFills, 2>("c2,fills", b);
  sweep<kD, kBc, kFills, 1>("c1,fills", b);
}
#endif

}  // namespace

int main() {
  int dev = 0, sms = 0;
  bench::check(cudaGetDevice(&dev), kMe, "device");
  bench::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), kMe, "SMs");
  cudaDeviceProp prop{};
  bench::check(cudaGetDeviceProperties(&prop, dev), kMe, "properties");
  std::printf("%s, %d SMs; %d steps a CTA; cycles a step = a CTA's clock64 cycles / steps (median, min, max CTA)\n",
              prop.name, sms, kSteps);
  Bufs b{};
  b.sms = sms;
  b.kv_rows = 1024;  // 256 KiB of K and of V at d = 128: L2-resident
  const int max_ctas = 3 * sms;
  bench::check(cudaMalloc(&b.cycles, max_ctas * sizeof(long long)), kMe, "malloc");
  bench::check(cudaMalloc(&b.sm_of, max_ctas * sizeof(unsigned)), kMe, "malloc");
  bench::check(cudaMalloc(&b.sink, max_ctas * kThreads * sizeof(float)), kMe, "malloc");
  std::vector<__half> host(static_cast<size_t>(b.kv_rows) * 128);
  for (size_t k = 0; k < host.size(); ++k) host[k] = __float2half(static_cast<float>((k * 2654435761u) % 1000) / 1000.f - 0.5f);
  T *K = nullptr, *V = nullptr;
  bench::check(cudaMalloc(&K, host.size() * sizeof(T)), kMe, "malloc");
  bench::check(cudaMalloc(&V, host.size() * sizeof(T)), kMe, "malloc");
  bench::check(cudaMemcpy(K, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), kMe, "copy");
  bench::check(cudaMemcpy(V, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), kMe, "copy");
  b.K = K;
  b.V = V;
  std::printf("%-5s %-4s %-14s %5s %9s %9s %9s %6s %5s %s\n", "d", "Bc", "variant", "CTAs", "cyc/step", "min", "max",
              "MHz", "regs", "CTAs/SM");
  shape<128, 64>(b);
  shape<64, 128>(b);
  shape<128, 32>(b);
#ifdef STEP_ABLATE_SWEEP
  shape<64, 64>(b);
#endif
  return 0;
}
