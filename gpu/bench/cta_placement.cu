// Where the GPU's block scheduler puts CTAs: the first wave, each slot that frees, and the last,
// partial wave. Every CTA records its %smid and %globaltimer when it starts and when it ends.
//
// Grids of k·S·c + r CTAs (S SMs, c = 1–3 CTAs per SM held by dynamic shared memory, r = 4, 40,
// 116 CTAs in the last wave), 256 threads a CTA, in five kinds of CTA:
//   equal   each CTA spins a fixed time T from its own start;
//   sync    each CTA spins until the next multiple of T after the grid's first start: every CTA of
//           a wave ends at the same instant (the lock-step of equal CTAs that started together);
//   fma     a fixed loop of dependent FP32 FMAs (8 chains a thread): the CTAs on one SM share its
//           FP32 pipes, so a CTA alone on its SM runs about c times as fast as one of c;
//   smem    a fixed loop of 16-byte shared-memory loads (4 a thread in flight): the CTAs on one SM
//           share its shared-memory bandwidth, as flash1's CTAs do;
//   unequal CTA i spins T·(1 + hash(i) mod 4)/2 from its own start.
// Per launch it prints the kernel's span, how many SMs took 1, 2, 3 of the last r CTAs, when those
// started, the share of them that went where the first wave's CTA of the same rank went, the share
// of the CTAs after the first wave that took the slot freed in that rank (the k-th such CTA on the
// SM where the k-th CTA ended), the wait between a slot freeing and its next CTA starting, and how
// long the first wave took to start.
//
// Build: nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o cta_placement gpu/bench/cta_placement.cu
// Run:   cta_placement JSON_OUT   (prints the summary; writes every CTA's SM, start and end of the
//        last launch of every grid, in ns from the grid's first start)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.cuh"

namespace {

void check(cudaError_t e, const char* what) { bench::check(e, "cta_placement", what); }

enum Kind : int { kEqual, kSync, kFma, kSmem, kUnequal };
const char* const kKindNames[] = {"equal", "sync", "fma", "smem", "unequal"};

constexpr unsigned long long kPeriodNs = 20000;  // T
constexpr int kThreads = 256;

__device__ unsigned long long g_base = 0;  // sync: the grid's first start (set by the first CTA)

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One CTA of kind `kind`; rec[3·cta] = smid, start, end. `sink` keeps the loops' results alive.
__global__ void placed(unsigned long long* rec, int kind, int iters, unsigned int smem_bytes, float* sink) {
  extern __shared__ __align__(16) unsigned char hold[];  // sized to hold the occupancy at c
  __shared__ unsigned long long start;
  if (threadIdx.x == 0) start = global_ns();
  __syncthreads();
  const unsigned long long t0 = start;
  float acc = 0;
  if (kind == kFma) {
    float a[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = float(threadIdx.x + j);
    for (int i = 0; i < iters; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) a[j] = fmaf(a[j], 0.9999f, 0.5f);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc += a[j];
  } else if (kind == kSmem) {
    unsigned int words = 1;  // a power of two within what the CTA holds
    while (2 * words * 16 <= smem_bytes) words *= 2;
    const uint4* h = reinterpret_cast<const uint4*>(hold);
    unsigned int x = 0;
    for (int i = 0; i < iters; ++i) {
      uint4 v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = h[(threadIdx.x + (i * 4 + j) * kThreads) & (words - 1)];
#pragma unroll
      for (int j = 0; j < 4; ++j) x += v[j].x ^ v[j].w;
    }
    acc = float(x);
  } else if (threadIdx.x == 0) {
    unsigned long long until = t0 + kPeriodNs;
    if (kind == kUnequal) until = t0 + kPeriodNs * (1 + bench::hash(blockIdx.x) % 4) / 2;
    if (kind == kSync) {
      const unsigned long long was = atomicCAS(&g_base, 0ULL, t0);
      const unsigned long long base = was ? was : t0;
      until = base + ((t0 - base) / kPeriodNs + 1) * kPeriodNs;
    }
    while (global_ns() < until) {
    }
  }
  __syncthreads();
  if (acc == 1.2345f) sink[threadIdx.x] = acc;
  if (threadIdx.x == 0) {
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    unsigned long long* my = rec + 3 * std::size_t(blockIdx.x);
    my[0] = smid;
    my[1] = t0;
    my[2] = global_ns();
  }
}

struct Cta {
  int sm = 0;
  long long start = 0, end = 0;  // ns from the grid's first start
};

// Dynamic shared memory that lets exactly `per_sm` CTAs on an SM (hbm_share.cu's rule).
int smem_for(int per_sm, const cudaDeviceProp& p) { return int(p.sharedMemPerMultiprocessor / per_sm) - 2048; }

std::vector<Cta> launch(int kind, int ctas, int per_sm, int iters, unsigned long long* rec, float* sink,
                        const cudaDeviceProp& prop) {
  const int smem = smem_for(per_sm, prop);
  const unsigned long long zero = 0;
  check(cudaMemcpyToSymbol(g_base, &zero, sizeof zero), "reset base");
  check(cudaMemset(rec, 0, std::size_t(ctas) * 3 * 8), "memset");
  placed<<<ctas, kThreads, smem>>>(rec, kind, iters, unsigned(smem), sink);
  check(cudaGetLastError(), "launch");
  check(cudaDeviceSynchronize(), "kernel");
  std::vector<unsigned long long> r(std::size_t(ctas) * 3);
  check(cudaMemcpy(r.data(), rec, r.size() * 8, cudaMemcpyDeviceToHost), "copy");
  unsigned long long lo = ~0ULL;
  for (int i = 0; i < ctas; ++i) lo = std::min(lo, r[3 * i + 1]);
  std::vector<Cta> v(ctas);
  for (int i = 0; i < ctas; ++i)
    v[i] = {int(r[3 * i]), (long long)(r[3 * i + 1] - lo), (long long)(r[3 * i + 2] - lo)};
  return v;
}

FILE* g_json = nullptr;
bool g_first_run = true;

void write_json(int kind, int per_sm, int k, int r, const std::vector<Cta>& v) {
  std::fprintf(g_json, "%s\n  {\"kind\": \"%s\", \"ctas_per_sm\": %d, \"full_waves\": %d, \"last_wave\": %d, \"ctas\": [",
               g_first_run ? "" : ",", kKindNames[kind], per_sm, k, r);
  g_first_run = false;
  for (std::size_t i = 0; i < v.size(); ++i)
    std::fprintf(g_json, "%s[%d, %lld, %lld]", i ? ", " : "", v[i].sm, v[i].start, v[i].end);
  std::fprintf(g_json, "]}");
}

double median_of(std::vector<long long> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return double(v[v.size() / 2]);
}

// One launch's line (see the header).
void report(int kind, int per_sm, int k, int r, int rep, const std::vector<Cta>& v, int sms) {
  const int ctas = int(v.size());
  const int wave = sms * per_sm;
  long long span = 0, first_wave_start = 0;
  for (const Cta& c : v) span = std::max(span, c.end);
  for (int i = 0; i < std::min(wave, ctas); ++i) first_wave_start = std::max(first_wave_start, v[i].start);
  // The last r CTAs: how many each SM took, when they started, and whether the j-th of them went
  // to the SM of the first wave's j-th CTA.
  std::vector<int> last_on(sms + 1, 0);
  long long last_lo = 1LL << 62, last_hi = 0;
  int as_first = 0;
  for (int j = 0; j < r; ++j) {
    const Cta& c = v[ctas - r + j];
    if (c.sm >= 0 && c.sm < sms) ++last_on[c.sm];
    last_lo = std::min(last_lo, c.start);
    last_hi = std::max(last_hi, c.start);
    as_first += c.sm == v[j].sm;
  }
  int took[4] = {0, 0, 0, 0};
  for (int s = 0; s < sms; ++s) took[std::min(last_on[s], 3)] += last_on[s] > 0;
  // Every CTA after the first wave: the slot freed in its rank (CTAs by end, ties by index), and
  // its wait after the latest end on its SM before its start.
  std::vector<int> by_end(ctas);
  for (int i = 0; i < ctas; ++i) by_end[i] = i;
  std::stable_sort(by_end.begin(), by_end.end(), [&](int a, int b) { return v[a].end < v[b].end; });
  int freed_rank = 0;
  std::vector<long long> waits;
  for (int i = wave; i < ctas; ++i) {
    freed_rank += v[i].sm == v[by_end[i - wave]].sm;
    long long latest = -1;
    for (int j = 0; j < i; ++j)
      if (v[j].sm == v[i].sm && v[j].end <= v[i].start) latest = std::max(latest, v[j].end);
    if (latest >= 0) waits.push_back(v[i].start - latest);
  }
  const int refills = std::max(0, ctas - wave);
  long long wait_max = 0;
  for (long long w : waits) wait_max = std::max(wait_max, w);
  std::printf("%-7s %2d %2d %4d %5d %3d %9.2f %6.2f | %4d %4d %4d %8.2f %8.2f %6.1f | %6.1f %7.0f %7.0f\n",
              kKindNames[kind], per_sm, k, r, ctas, rep, double(span) * 1e-3, double(first_wave_start) * 1e-3,
              took[1], took[2], took[3], r ? double(last_lo) * 1e-3 : 0.0, r ? double(last_hi) * 1e-3 : 0.0,
              r ? 100.0 * as_first / r : 0.0, refills ? 100.0 * freed_rank / refills : 0.0, median_of(waits),
              double(wait_max));
}

// The globaltimer's step: the least positive difference between two starts of a launch.
long long timer_step(const std::vector<Cta>& v) {
  std::vector<long long> t;
  for (const Cta& c : v) t.push_back(c.start);
  std::sort(t.begin(), t.end());
  long long step = 1LL << 62;
  for (std::size_t i = 1; i < t.size(); ++i)
    if (t[i] > t[i - 1]) step = std::min(step, t[i] - t[i - 1]);
  return step;
}

// The SMs of the first `n` CTAs of a launch, in CTA order: the scheduler's SM order.
void print_order(const char* what, const std::vector<Cta>& v, int from, int n) {
  std::printf("# %s:", what);
  for (int i = from; i < from + n && i < int(v.size()); ++i) std::printf(" %d", v[i].sm);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cta_placement JSON_OUT\n");
    return 2;
  }
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  const int sms = prop.multiProcessorCount;
  unsigned long long* rec = nullptr;
  float* sink = nullptr;
  check(cudaMalloc(&rec, std::size_t(4 * sms * 3 + 256) * 3 * 8), "malloc");
  check(cudaMalloc(&sink, kThreads * sizeof(float)), "malloc");
  for (int c = 1; c <= 3; ++c) {
    const int smem = smem_for(c, prop);
    check(cudaFuncSetAttribute(placed, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem attribute");
    int blocks = 0;
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, placed, kThreads, smem), "occupancy");
    if (blocks != c) {
      std::fprintf(stderr, "cta_placement: %d B of shared memory lets %d CTAs per SM, not %d\n", smem, blocks, c);
      return 1;
    }
  }
  // The attribute allows the largest of the three (c = 1) for every launch.
  check(cudaFuncSetAttribute(placed, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_for(1, prop)), "smem attribute");
  g_json = std::fopen(argv[1], "w");
  if (!g_json) {
    std::fprintf(stderr, "cta_placement: cannot write %s\n", argv[1]);
    return 1;
  }
  std::printf("device %s, %d SMs, %zu B shared memory per SM; %d threads a CTA, T = %.0f us\n", prop.name, sms,
              prop.sharedMemPerMultiprocessor, kThreads, kPeriodNs * 1e-3);
  std::fprintf(g_json, "{\"device\": \"%s\", \"sms\": %d, \"record\": \"per CTA: smid, start ns, end ns\",\n \"runs\": [",
               prop.name, sms);
  std::printf("# grids of k*%d*c + r CTAs, c per SM; a warm-up, then 3 launches each. span: the kernel's first start to "
              "last end (us);\n# wave0: when the last CTA of the first wave started (us). last r CTAs: SMs that took 1, "
              "2, 3 of them, their first and last start (us),\n# %% that went to the SM of the first wave's CTA of the "
              "same rank; after the first wave: %% of CTAs on the SM of the slot freed\n# in their rank (CTAs by end), "
              "median and max wait from the slot's freeing to the CTA's start (ns).\n",
              sms);
  std::printf("%-7s %2s %2s %4s %5s %3s %9s %6s | %4s %4s %4s %8s %8s %6s | %6s %7s %7s\n", "kind", "c", "k", "r",
              "ctas", "rep", "span", "wave0", "x1", "x2", "x3", "first", "last", "as-1st", "freed", "wait", "max");
  // Loop lengths that take about T for a CTA alone on its SM (measured below, printed).
  const int fma_iters = 2500, smem_iters = 300;
  auto grid = [&](int kind, int c, int k, int r) {
    const int ctas = k * sms * c + r;
    const int iters = kind == kFma ? fma_iters : kind == kSmem ? smem_iters : 0;
    launch(kind, ctas, c, iters, rec, sink, prop);  // warm-up
    std::vector<Cta> v;
    for (int rep = 0; rep < 3; ++rep) {
      v = launch(kind, ctas, c, iters, rec, sink, prop);
      report(kind, c, k, r, rep, v, sms);
    }
    write_json(kind, c, k, r, v);
    return v;
  };
  for (int kind : {kEqual, kSync})
    for (int c = 1; c <= 3; ++c)
      for (int k = 1; k <= 2; ++k)
        for (int r : {4, 40, 116}) {
          const std::vector<Cta> v = grid(kind, c, k, r);
          if (kind == kEqual && c == 3 && k == 1 && r == 116)
            std::printf("# globaltimer step: %lld ns\n", timer_step(v));
          if (k == 1 && r == 116) {
            print_order("first wave, CTAs 0-31 on SMs", v, 0, 32);
            print_order("last wave, its first 32 CTAs on SMs", v, int(v.size()) - r, 32);
          }
        }
  // CTAs that share their SM: the last wave's CTAs run alone on theirs (or not).
  for (int kind : {kFma, kSmem})
    for (int c : {1, 3})
      for (int r : {0, 4, 40, 116, 132}) grid(kind, c, 1, r);
  for (int c : {1, 3}) grid(kUnequal, c, 2, 116);
  std::fprintf(g_json, "\n]}\n");
  std::fclose(g_json);
  return 0;
}
