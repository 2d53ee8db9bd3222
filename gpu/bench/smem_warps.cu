// What share of the SM's shared-memory bandwidth flash1's 8 warps take (gpu/flash1.cu): its inner
// loop's two products, run over and over on operands already in shared memory, with one CTA of 256
// threads (flash1's launch) or two per SM, with or without the barriers that separate them:
//   S     line 9: S_ij = τ Q_i K_jᵀ, a thread per element of S_ij, a warp on one row of Q_i (the same
//         16 bytes to every lane: a broadcast) and 32 rows of K_j (padded to d + 1 floats: 32 banks),
//         then the store of S_ij;
//   PV    line 12: P̃_ij V_j, a thread per element of O_i, a warp on one row of P̃_ij (a broadcast)
//         and 32 consecutive floats of a row of V_j, the rescale with O_i, the store of O_i to
//         global memory (fp16, as flash1 writes it to HBM);
//   S+PV  both, as flash1's inner loop runs them (its softmax and its HBM loads left out);
//   S+PV sep  the same, PV reading its P̃_ij from another buffer than the one S writes;
//   loop  S, lines 10–11 (the softmax: a warp per row, rescaling factors) and PV with flash1's
//         barriers: the kernel's inner loop without its HBM loads (line 8) and ℓ_i, m_i stores (13).
// The loops are flash1's own code (same index arithmetic, same unrolling), so nvcc emits the same
// shared-memory instructions. Each CTA times its loop with clock64 between two barriers; the table
// gives the median CTA's cycles and, per SM clock, the FMAs and the bytes hbmlab's plan counts for
// them (8 a FMA: 4 per FLOP, sim/algo/flash1: one operand of each side), and that as a share of the
// SM's 128 B/clk. smem_warps.sh reads the wavefronts (128 B each) from Nsight Compute beside it.
//   step  (`smem_warps step`, flash1_step.sh) flash1's step taken apart: the products (S then PV),
//         the softmax alone, the inner loop, and the whole step (the loop with line 8's loads of Q_i,
//         O_i, ℓ_i, m_i from global memory, line 12's store of O_i and line 13's of ℓ_i, m_i, the CTA
//         walking its own N rows block by block as the kernel does), each with 1, 2 and up to 4 CTAs
//         an SM, as SM cycles a block pair (a CTA's cycles over its pairs, over the CTAs an SM holds).
// Run: gpu/bench/smem_warps.sh OUTDIR   (or smem_warps [once|step]: `once` launches each case a single time, for ncu)
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.cuh"

namespace {

constexpr int kThreads = 256;  // flash1's launch: 8 warps
enum Part { kS = 1, kPV = 2, kBoth = 3, kSoftmax = 4, kLoop = 7, kSeparate = 8, kBothSeparate = 11, kLine8 = 16, kStep = 23 };

// Global memory of the `step` cases: each CTA's own N rows of Q and O (fp16) and of ℓ and m (fp32).
struct Rows {
  const __half* Q = nullptr;
  __half* O = nullptr;
  float *l = nullptr, *m = nullptr;
  int N = 0;
};

template <int kD, int kBr, int kBc>
__host__ __device__ constexpr int kernel_smem() {  // flash1's shared memory (gpu/flash1.cu, launch_shape)
  return (kBc * (kD + 1) + kBc * kD + 2 * kBr * kD + kBr * kBc + 4 * kBr) * 4;
}

template <int kD, int kBr, int kBc, int kPart, bool kBarrier>
__global__ void __launch_bounds__(kThreads)
smem_warps_kernel(int reps, int cols, bool causal, __half* O_scratch, long long* cycles, float* sink, Rows g) {
  extern __shared__ __align__(16) float sram[];
  constexpr int kKStride = kD + 1;
  float* sram_Kj = sram;
  float* sram_Vj = sram_Kj + kBc * kKStride;
  float* sram_Qi = sram_Vj + kBc * kD;
  float* sram_Oi = sram_Qi + kBr * kD;
  float* sram_S = sram_Oi + kBr * kD;
  float* sram_li = sram_S + kBr * kBc;
  float* sram_mi = sram_li + kBr;
  float* sram_scale_old = sram_mi + kBr;
  float* sram_scale_new = sram_scale_old + kBr;
  // P̃_ij as PV reads it: S_ij itself, or (kSeparate) K_j's buffer, which holds Br × Bc floats.
  static_assert(kBc * (kD + 1) >= kBr * kBc, "K_j's buffer holds P̃_ij");
  const float* sram_P = (kPart & kSeparate) ? sram_Kj : sram_S;
  const int tid = threadIdx.x;
  // Operands in [-1/2, 1/2): the products stay finite however often the loop runs.
  constexpr int kFloats = kernel_smem<kD, kBr, kBc>() / 4;
  for (int k = tid; k < kFloats; k += kThreads) sram[k] = static_cast<float>(bench::hash(k + 1) & 0xffff) / 65536.0f - 0.5f;
  __syncthreads();
  // O_i's store: a scratch block of the CTA's own, or (kLine8) row block i of the CTA's N rows.
  __half* O = O_scratch + static_cast<std::int64_t>(blockIdx.x) * kBr * kD;
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * g.N;
  const int rows = kBr, c0 = 0;
  int r0 = 0;
  const float scale = 0.125f;
  float keep = 0.f;
  __syncthreads();
  const long long t0 = clock64();
  for (int rep = 0; rep < reps; ++rep) {
    if (kPart & kLine8) {
      // gpu/flash1.cu line 8, Q_i, O_i, ℓ_i, m_i from the CTA's row block i = rep mod Tr.
      r0 = (rep % (g.N / kBr)) * kBr;
      O = g.O + (base + r0) * kD;
      __syncthreads();
      for (int k = tid; k < rows * kD; k += kThreads) {
        sram_Qi[k] = __half2float(g.Q[(base + r0) * kD + k]);
        sram_Oi[k] = __half2float(O[k]);
      }
      for (int k = tid; k < rows; k += kThreads) { sram_li[k] = g.l[base + r0 + k]; sram_mi[k] = g.m[base + r0 + k]; }
      __syncthreads();
    }
    if (kPart & kS) {
      // gpu/flash1.cu line 9.
      for (int k = tid; k < rows * kBc; k += kThreads) {
        const int r = k / kBc, c = k % kBc;
        float s = -INFINITY;
        if (c < cols && !(causal && c0 + c > r0 + r)) {
          float acc = 0.f;
#pragma unroll 8
          for (int e = 0; e < kD; ++e) acc += sram_Qi[r * kD + e] * sram_Kj[c * kKStride + e];
          s = acc * scale;
        }
        sram_S[k] = s;
      }
      if (kBarrier) __syncthreads();
    }
    if (kPart & kSoftmax) {
      // gpu/flash1.cu lines 10–11.
      for (int r = tid / 32; r < rows; r += kThreads / 32) {
        const int lane = tid % 32;
        float mt = -INFINITY;
        for (int c = lane; c < kBc; c += 32) mt = fmaxf(mt, sram_S[r * kBc + c]);
        for (int o = 16; o > 0; o /= 2) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
        float lt = 0.f;
        for (int c = lane; c < kBc; c += 32) {
          const float p = (mt == -INFINITY) ? 0.f : expf(sram_S[r * kBc + c] - mt);
          sram_S[r * kBc + c] = p;
          lt += p;
        }
        for (int o = 16; o > 0; o /= 2) lt += __shfl_xor_sync(0xffffffffu, lt, o);
        if (lane == 0) {
          const float mi = sram_mi[r], li = sram_li[r];
          const float mn = fmaxf(mi, mt);
          const float a = (mi == -INFINITY) ? 0.f : expf(mi - mn) * li;
          const float b = (mt == -INFINITY) ? 0.f : expf(mt - mn);
          const float ln = a + b * lt;
          sram_scale_old[r] = ln > 0.f ? a / ln : 0.f;
          sram_scale_new[r] = ln > 0.f ? b / ln : 0.f;
          sram_mi[r] = mn;
          sram_li[r] = ln;
        }
      }
      if (kBarrier) __syncthreads();
    }
    if (kPart & kPV) {
      // gpu/flash1.cu line 12 (S_ij read as P̃_ij: the softmax between is left out).
      for (int k = tid; k < rows * kD; k += kThreads) {
        const int r = k / kD, e = k % kD;
        float acc = 0.f;
        for (int c = 0; c < cols; ++c) acc += sram_P[r * kBc + c] * sram_Vj[c * kD + e];
        const float o = sram_scale_old[r] * sram_Oi[k] + sram_scale_new[r] * acc;
        O[k] = __float2half_rn(o);
        keep += o;
      }
      if (kBarrier && !(kPart & kLine8)) __syncthreads();
    }
    if (kPart & kLine8) {
      // line 13: ℓ_i, m_i out (the kernel's next barrier is line 8's, at the top of the next pair).
      for (int k = tid; k < rows; k += kThreads) { g.l[base + r0 + k] = sram_li[k]; g.m[base + r0 + k] = sram_mi[k]; }
    }
  }
  __syncthreads();
  if (tid == 0) cycles[blockIdx.x] = clock64() - t0;
  if (keep == 12345.f) sink[blockIdx.x] = keep;  // never true; keeps nothing from being dropped
}

struct Case {
  std::string name;
  void (*kernel)(int, int, bool, __half*, long long*, float*, Rows);
  int smem;       // flash1's shared memory for the shape
  int ctas_per_sm;
  int reps;
  int cols;       // keys of K_j (Bc: full blocks)
  double fmas;    // per CTA, per rep
};

template <int kD, int kBr, int kBc, int kPart, bool kBarrier>
Case make(int ctas_per_sm, int reps) {
  const double s_fma = double(kBr) * kBc * kD, pv_fma = double(kBr) * kD * kBc;
  const char* part = kPart == kS ? "S" : kPart == kPV ? "PV" : kPart == kLoop ? "loop" : kPart == kBothSeparate ? "S+PV sep"
                     : kPart == kSoftmax ? "softmax" : kPart == kStep ? "step" : "S+PV";
  const std::string name = "d" + std::to_string(kD) + " " + std::to_string(kBr) + "x" + std::to_string(kBc) + " " +
                           part + (kBarrier ? " bar" : " nobar");
  return {name, smem_warps_kernel<kD, kBr, kBc, kPart, kBarrier>, kernel_smem<kD, kBr, kBc>(), ctas_per_sm, reps,
          kBc, ((kPart & kS) ? s_fma : 0) + ((kPart & kPV) ? pv_fma : 0)};
}

template <int kD, int kBr, int kBc>
void add_shape(std::vector<Case>& cases, int reps) {
  cases.push_back(make<kD, kBr, kBc, kBoth, true>(1, reps));
  cases.push_back(make<kD, kBr, kBc, kBoth, false>(1, reps));
  cases.push_back(make<kD, kBr, kBc, kS, true>(1, reps));
  cases.push_back(make<kD, kBr, kBc, kPV, true>(1, reps));
  cases.push_back(make<kD, kBr, kBc, kBothSeparate, true>(1, reps));
  cases.push_back(make<kD, kBr, kBc, kLoop, true>(1, reps));
  if (2 * (kernel_smem<kD, kBr, kBc>() + 1024) <= 228 * 1024) {
    cases.push_back(make<kD, kBr, kBc, kBoth, true>(2, reps));
    cases.push_back(make<kD, kBr, kBc, kBoth, false>(2, reps));
    cases.push_back(make<kD, kBr, kBc, kLoop, true>(2, reps));
  }
}

// flash1's step taken apart (`smem_warps step`): products, softmax, loop and step, with 1, 2 and up to
// 4 CTAs an SM where the kernel's shared memory lets that many in.
template <int kD, int kBr, int kBc>
void add_step_shape(std::vector<Case>& cases, int reps) {
  constexpr int smem = kernel_smem<kD, kBr, kBc>();
  auto add = [&](int ctas) {
    cases.push_back(make<kD, kBr, kBc, kBoth, true>(ctas, reps));
    cases.push_back(make<kD, kBr, kBc, kSoftmax, true>(ctas, reps));
    cases.push_back(make<kD, kBr, kBc, kLoop, true>(ctas, reps));
    cases.push_back(make<kD, kBr, kBc, kStep, true>(ctas, reps));
  };
  add(1);
  if (2 * (smem + 1024) <= 228 * 1024) add(2);
  if (4 * (smem + 1024) <= 228 * 1024) add(4);
}

}  // namespace

int main(int argc, char** argv) {
  const char* me = "smem_warps";
  const bool once = argc > 1 && std::string(argv[1]) == "once";
  const bool step = argc > 1 && std::string(argv[1]) == "step";
  cudaDeviceProp prop{};
  bench::check(cudaGetDeviceProperties(&prop, 0), me, "cudaGetDeviceProperties");
  const int sms = prop.multiProcessorCount;
  std::vector<Case> cases;
  if (step) {
    add_step_shape<64, 64, 64>(cases, 40);
    add_step_shape<128, 64, 64>(cases, 20);
    add_step_shape<64, 32, 32>(cases, 160);
    add_step_shape<128, 32, 32>(cases, 80);
    add_step_shape<64, 64, 128>(cases, 20);
  } else {
    add_shape<64, 64, 64>(cases, 40);
    add_shape<128, 64, 64>(cases, 20);
    add_shape<64, 32, 32>(cases, 160);
    add_shape<128, 32, 32>(cases, 80);
    add_shape<64, 64, 128>(cases, 20);
  }

  long long* cycles = nullptr;
  float* sink = nullptr;
  __half* O = nullptr;
  bench::check(cudaMalloc(&cycles, 4 * sms * sizeof(long long)), me, "cudaMalloc");
  bench::check(cudaMalloc(&sink, 4 * sms * sizeof(float)), me, "cudaMalloc");
  bench::check(cudaMalloc(&O, 4 * sms * 64 * 128 * sizeof(__half)), me, "cudaMalloc");
  // The step's rows: N = 2048 with one CTA an SM, 1024 with two, 512 with four (hbmlab measure's
  // B·H·N = 262,144: 128, 256 and 512 CTAs), d ≤ 128.
  constexpr int kRowsPerSm = 2048;
  Rows rows;
  const std::size_t row_count = static_cast<std::size_t>(sms) * kRowsPerSm;
  __half* Q_rows = nullptr;
  bench::check(cudaMalloc(&Q_rows, row_count * 128 * sizeof(__half)), me, "cudaMalloc");
  bench::check(cudaMalloc(&rows.O, row_count * 128 * sizeof(__half)), me, "cudaMalloc");
  bench::check(cudaMalloc(&rows.l, row_count * sizeof(float)), me, "cudaMalloc");
  bench::check(cudaMalloc(&rows.m, row_count * sizeof(float)), me, "cudaMalloc");
  bench::check(cudaMemset(Q_rows, 0, row_count * 128 * sizeof(__half)), me, "cudaMemset");
  bench::check(cudaMemset(rows.O, 0, row_count * 128 * sizeof(__half)), me, "cudaMemset");
  bench::check(cudaMemset(rows.l, 0, row_count * sizeof(float)), me, "cudaMemset");
  bench::check(cudaMemset(rows.m, 0, row_count * sizeof(float)), me, "cudaMemset");
  rows.Q = Q_rows;
  std::printf("device %s, %d SMs, %d threads a CTA (flash1's launch), flash1's shared-memory loops on operands already in shared memory\n",
              prop.name, sms, kThreads);
  std::printf("%-24s %4s %9s %9s %10s %12s %6s%s\n", "case", "CTAs", "cycles", "FMA/clk", "plan B/clk", "of 128 B/clk", "MHz",
              step ? "  SM cyc/pair" : "");
  for (const Case& c : cases) {
    // One CTA per SM: ask for more than half the SM's shared memory; two: more than a third; four:
    // more than a fifth.
    const int smem = c.ctas_per_sm == 1   ? std::max(c.smem, 120 * 1024)
                     : c.ctas_per_sm == 2 ? std::max(c.smem, 80 * 1024)
                                          : std::max(c.smem, 48 * 1024);
    bench::check(cudaFuncSetAttribute(c.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), me, "smem attribute");
    int fit = 0;
    bench::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, c.kernel, kThreads, smem), me, "occupancy");
    if (fit != c.ctas_per_sm) {
      std::fprintf(stderr, "%s: %s: %d CTAs fit an SM, not %d\n", me, c.name.c_str(), fit, c.ctas_per_sm);
      return 1;
    }
    const int ctas = sms * c.ctas_per_sm;
    Rows g = rows;
    g.N = kRowsPerSm / c.ctas_per_sm;
    auto launch = [&] { c.kernel<<<ctas, kThreads, smem>>>(c.reps, c.cols, false, O, cycles, sink, g); };
    if (once) {
      launch();
      bench::check(cudaDeviceSynchronize(), me, c.name.c_str());
      std::printf("%-24s %4d (once, for ncu)\n", c.name.c_str(), c.ctas_per_sm);
      continue;
    }
    const auto runs = bench::time_per_sm(launch, ctas, cycles, me, c.name.c_str());
    std::vector<double> cyc, mhz;
    for (const auto& r : runs) { cyc.push_back(r.median_cycles); mhz.push_back(r.mhz); }
    const double cycles_med = bench::median(cyc);
    const double fma_per_clk = c.fmas * c.reps * c.ctas_per_sm / cycles_med;
    const double plan_bytes = 8.0 * fma_per_clk;
    std::printf("%-24s %4d %9.0f %9.2f %10.1f %12.3f %6.0f", c.name.c_str(), c.ctas_per_sm, cycles_med,
                fma_per_clk, plan_bytes, plan_bytes / 128.0, bench::median(mhz));
    if (step) std::printf("  %11.0f", cycles_med / (double(c.reps) * c.ctas_per_sm));
    std::printf("\n");
  }
  bench::check(cudaFree(Q_rows), me, "cudaFree");
  bench::check(cudaFree(rows.O), me, "cudaFree");
  bench::check(cudaFree(rows.l), me, "cudaFree");
  bench::check(cudaFree(rows.m), me, "cudaFree");
  bench::check(cudaFree(cycles), me, "cudaFree");
  bench::check(cudaFree(sink), me, "cudaFree");
  bench::check(cudaFree(O), me, "cudaFree");
  return 0;
}
