// How HBM bandwidth is shared among the CTAs in flight: streaming reads far beyond the L2.
//
// Every CTA reads its own contiguous slice of a 4 GiB buffer with 16-byte loads (cp.async.cg into
// shared memory), U loads per thread issued back to back and then waited for together (at most
// U × 16 B × threads in flight per CTA),
// and records its %smid, and %globaltimer when it starts, after each eighth of its slice (thread
// 0's progress) and when its last load is in. Each run reads a fresh part of the buffer (a cursor
// walks it), so nothing it reads is still in the 50 MB L2.
//
//   sweep  all 132 SMs busy with c = 1–4 CTAs each (occupancy held at c by dynamic shared memory,
//          every CTA resident before any reads: a grid barrier), and then one SM alone (the same
//          grid, every CTA off SM 0 leaves after the barrier): per-SM bandwidth against the bytes
//          in flight per SM, and HBM's total.
//   tail   grids of 132, 136, 264 and 268 CTAs (the decode shapes: 17 splits × 8 heads = 136,
//          33 × 8 = 264) at 2 CTAs per SM at most, every CTA reading the same bytes: do the SMs
//          that hold two CTAs finish them in about the time of one (each CTA its 1/136 of HBM)
//          or twice (each SM its 1/132)?
//   uneven the same with slices of 1–4 units (CTA i reads 1 + i mod 4 units).
//   deep   the sweep's 'all' and 'one' at 128 threads with U = 24, 32, 48, 64 and c = 1, 2: the
//          decode's split CTA (128 threads, up to 32 loads a thread in flight) lies beyond U = 16.
//   partial k = 1–132 SMs holding one CTA each (16 and 64 KiB in flight, 128 and 256 threads): one
//          CTA's rate against the CTAs in flight, for grids that leave SMs idle.
//   mixed  CTAs with 16 and with 64 KiB in flight side by side: shared by CTAs or by bytes in flight?
//
// Build: nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o hbm_share gpu/bench/hbm_share.cu
// Run:   hbm_share JSON_OUT [MODE...]   (prints the summary; writes every CTA's record of every median
//        run; modes: sweep tail uneven mixed (the default: all four), deep, partial)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.cuh"

namespace {

void check(cudaError_t e, const char* what) { bench::check(e, "hbm_share", what); }

// Progress marks per CTA: thread 0's, not the CTA's. Measured on the H100, warp 0 falls behind the
// CTA's other warps while they all read and catches up once they are done, so a mark tells when
// thread 0 got there; starts and ends (after a barrier) are the CTA's.
constexpr int kMarks = 8;
constexpr int kRecord = kMarks + 3;       // smid, start, the marks (the last is the end), reads (1: read)
constexpr std::int64_t kBuffer = 4LL << 30;  // bytes

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One CTA: chunks of U × blockDim.x loads of 16 B from data + first[cta] (live[cta] in place of U
// where live is given). With only_sm ≠ -1 every
// CTA waits at a grid barrier (the whole grid is resident); with only_sm ≥ 0 those off SM only_sm
// then leave.
template <int U>
__global__ void stream(const uint4* __restrict__ data, const long long* first, const int* chunks,
                       unsigned long long* rec, int only_sm, unsigned int grid, unsigned int smem_bytes, const int* live) {
  // Sized to hold the occupancy at the asked CTAs per SM; the loads' landing place.
  extern __shared__ __align__(16) unsigned char hold[];
  unsigned int smid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  unsigned long long* my = rec + std::size_t(blockIdx.x) * kRecord;
  if (only_sm != -1) bench::grid_barrier(grid);
  if (only_sm >= 0) {
    if (smid != unsigned(only_sm)) {
      if (threadIdx.x == 0) {
        my[0] = smid;
        my[kRecord - 1] = 0;
      }
      return;
    }
  }
  __syncthreads();
  const unsigned long long t0 = global_ns();
  const uint4* p = data + first[blockIdx.x] + threadIdx.x;
  const int n = chunks[blockIdx.x];
  const int loads = live ? live[blockIdx.x] : U;  // this CTA's loads per thread per chunk, ≤ U
  const unsigned int step = blockDim.x;
  // Each load lands in shared memory (its 16-byte slot wraps around what the CTA holds: the bytes
  // are never read, only waited for), so its destination holds no register and the compiler cannot
  // hold back the U loads of a chunk to spare registers.
  const unsigned int base = static_cast<unsigned int>(__cvta_generic_to_shared(hold));
  const unsigned int slots = smem_bytes / 16;
  int mark = 1;
  for (int c = 0; c < n; ++c) {
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (u < loads)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(base + (u * step + threadIdx.x) % slots * 16),
                   "l"(p + u * step)
                   : "memory");
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
    p += loads * step;
    if (threadIdx.x == 0 && mark < kMarks && (c + 1) * kMarks >= mark * n) my[1 + mark++] = global_ns();
  }
  __syncthreads();
  const unsigned long long t1 = global_ns();
  if (threadIdx.x == 0) {
    my[0] = smid;
    my[1] = t0;
    my[1 + kMarks] = t1;
    my[kRecord - 1] = 1;
  }
}

struct Config {
  const char* mode;
  int threads = 256, loads = 4, per_sm = 1;  // per_sm: the occupancy the shared memory allows
  int only_sm = -1;                          // -1: no barrier; -2: a barrier, every CTA reads; ≥ 0: see stream
  std::vector<std::int64_t> units;           // per CTA, in its chunks
  std::vector<int> live;                     // per CTA, its loads per thread per chunk; empty: `loads`
  // One chunk of CTA i, in 16-byte loads.
  std::int64_t chunk(std::size_t i) const { return std::int64_t(threads) * (live.empty() ? loads : live[i]); }
};

struct Result {
  double kernel_us = 0, event_us = 0, gbps = 0;
  std::vector<unsigned long long> rec;
};

template <int U>
void launch_u(const Config& c, const uint4* data, const long long* first, const int* chunks, unsigned long long* rec,
              const int* live, int smem) {
  check(cudaFuncSetAttribute(stream<U>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem attribute");
  const unsigned int grid = unsigned(c.units.size());
  stream<U><<<grid, c.threads, smem>>>(data, first, chunks, rec, c.only_sm, grid, unsigned(smem), c.live.empty() ? nullptr : live);
}

// Dynamic shared memory that lets exactly `per_sm` CTAs on an SM.
int smem_for(int per_sm, const cudaDeviceProp& p) {
  return int(p.sharedMemPerMultiprocessor / per_sm) - 2048;
}

template <int U>
int occupancy_u(int threads, int smem) {
  // The attribute first: without it a launch (and the query) allows 48 KiB of dynamic shared memory.
  check(cudaFuncSetAttribute(stream<U>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem attribute");
  int blocks = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, stream<U>, threads, smem), "occupancy");
  return blocks;
}

int occupancy_of(const Config& c, int smem) {
  switch (c.loads) {
    case 1: return occupancy_u<1>(c.threads, smem);
    case 2: return occupancy_u<2>(c.threads, smem);
    case 4: return occupancy_u<4>(c.threads, smem);
    case 8: return occupancy_u<8>(c.threads, smem);
    case 16: return occupancy_u<16>(c.threads, smem);
    case 24: return occupancy_u<24>(c.threads, smem);
    case 32: return occupancy_u<32>(c.threads, smem);
    case 48: return occupancy_u<48>(c.threads, smem);
    default: return occupancy_u<64>(c.threads, smem);
  }
}

struct Buffers {
  uint4* data = nullptr;
  long long* first = nullptr;
  int* chunks = nullptr;
  int* live = nullptr;
  unsigned long long* rec = nullptr;
  std::int64_t cursor = 0;  // in uint4
};

Result run_once(const Config& c, Buffers& b, const cudaDeviceProp& prop) {
  const int ctas = int(c.units.size());
  std::int64_t total = 0;
  for (std::size_t i = 0; i < c.units.size(); ++i) total += c.units[i] * c.chunk(i);
  if (b.cursor + total > kBuffer / 16) b.cursor = 0;
  std::vector<long long> first(ctas);
  std::vector<int> chunks(ctas);
  std::int64_t at = b.cursor;
  for (int i = 0; i < ctas; ++i) {
    first[i] = at;
    chunks[i] = int(c.units[i]);
    at += c.units[i] * c.chunk(i);
  }
  b.cursor = at;
  check(cudaMemcpy(b.first, first.data(), ctas * sizeof(long long), cudaMemcpyHostToDevice), "copy");
  check(cudaMemcpy(b.chunks, chunks.data(), ctas * sizeof(int), cudaMemcpyHostToDevice), "copy");
  if (!c.live.empty()) check(cudaMemcpy(b.live, c.live.data(), ctas * sizeof(int), cudaMemcpyHostToDevice), "copy");
  check(cudaMemset(b.rec, 0, std::size_t(ctas) * kRecord * 8), "memset");
  const int smem = smem_for(c.per_sm, prop);
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "event");
  check(cudaEventCreate(&e1), "event");
  check(cudaEventRecord(e0), "record");
  switch (c.loads) {
    case 1: launch_u<1>(c, b.data, b.first, b.chunks, b.rec, b.live, smem); break;
    case 2: launch_u<2>(c, b.data, b.first, b.chunks, b.rec, b.live, smem); break;
    case 4: launch_u<4>(c, b.data, b.first, b.chunks, b.rec, b.live, smem); break;
    case 8: launch_u<8>(c, b.data, b.first, b.chunks, b.rec, b.live, smem); break;
    case 16: launch_u<16>(c, b.data, b.first, b.chunks, b.rec, b.live, smem); break;
    case 24: launch_u<24>(c, b.data, b.first, b.chunks, b.rec, b.live, smem); break;
    case 32: launch_u<32>(c, b.data, b.first, b.chunks, b.rec, b.live, smem); break;
    case 48: launch_u<48>(c, b.data, b.first, b.chunks, b.rec, b.live, smem); break;
    default: launch_u<64>(c, b.data, b.first, b.chunks, b.rec, b.live, smem); break;
  }
  check(cudaGetLastError(), "launch");
  check(cudaEventRecord(e1), "record");
  check(cudaDeviceSynchronize(), "kernel");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
  check(cudaEventDestroy(e0), "event");
  check(cudaEventDestroy(e1), "event");
  Result r;
  r.event_us = ms * 1e3;
  r.rec.resize(std::size_t(ctas) * kRecord);
  check(cudaMemcpy(r.rec.data(), b.rec, r.rec.size() * 8, cudaMemcpyDeviceToHost), "copy");
  unsigned long long lo = ~0ULL, hi = 0;
  std::int64_t bytes = 0;
  for (int i = 0; i < ctas; ++i) {
    const unsigned long long* m = &r.rec[std::size_t(i) * kRecord];
    if (!m[kRecord - 1]) continue;
    lo = std::min(lo, m[1]);
    hi = std::max(hi, m[kMarks + 1]);
    bytes += c.units[i] * c.chunk(i) * 16;
  }
  r.kernel_us = double(hi - lo) * 1e-3;
  r.gbps = double(bytes) / (double(hi - lo) * 1e-9) / 1e9;
  // Times relative to the first CTA's start.
  for (int i = 0; i < ctas; ++i) {
    unsigned long long* m = &r.rec[std::size_t(i) * kRecord];
    if (!m[kRecord - 1]) continue;
    for (int k = 1; k <= kMarks + 1; ++k) m[k] = m[k] ? m[k] - lo : 0;
  }
  return r;
}

// Five launches after a warm-up; the one with the median kernel time.
Result run(const Config& c, Buffers& b, const cudaDeviceProp& prop) {
  run_once(c, b, prop);
  std::vector<Result> rs;
  for (int i = 0; i < 5; ++i) rs.push_back(run_once(c, b, prop));
  std::sort(rs.begin(), rs.end(), [](const Result& x, const Result& y) { return x.kernel_us < y.kernel_us; });
  return rs[2];
}

struct Sm {
  int ctas = 0;
  double first_start = 1e300, last_end = 0, busy_bytes = 0;
};

// Per SM: its CTAs, when its first started and its last ended.
std::vector<Sm> sms_of(const Config& c, const Result& r, int sms) {
  std::vector<Sm> s(sms);
  for (std::size_t i = 0; i < c.units.size(); ++i) {
    const unsigned long long* m = &r.rec[i * kRecord];
    if (!m[kRecord - 1] || m[0] >= unsigned(sms)) continue;
    Sm& x = s[m[0]];
    ++x.ctas;
    x.first_start = std::min(x.first_start, double(m[1]) * 1e-3);
    x.last_end = std::max(x.last_end, double(m[kMarks + 1]) * 1e-3);
    x.busy_bytes += double(c.units[i] * c.chunk(i) * 16);
  }
  return s;
}

FILE* g_json = nullptr;
bool g_first_run = true;

void record_json(const Config& c, const Result& r, const char* label) {
  std::fprintf(g_json, "%s\n  {\"mode\": \"%s\", \"case\": \"%s\", \"threads\": %d, \"loads\": %d, \"ctas_per_sm\": %d, "
                       "\"only_sm\": %d, \"chunk_bytes\": %lld, \"kernel_us\": %.3f, \"event_us\": %.3f, \"gbps\": %.1f,\n"
                       "   \"ctas\": [",
               g_first_run ? "" : ",", c.mode, label, c.threads, c.loads, c.per_sm, c.only_sm,
               (long long)c.threads * c.loads * 16, r.kernel_us, r.event_us, r.gbps);
  g_first_run = false;
  if (c.only_sm == -2) {  // the 1 GiB sweeps: the summary alone
    std::fprintf(g_json, "]}");
    return;
  }
  bool first = true;
  for (std::size_t i = 0; i < c.units.size(); ++i) {
    const unsigned long long* m = &r.rec[i * kRecord];
    if (!m[kRecord - 1]) continue;
    std::fprintf(g_json, "%s[%llu, %lld", first ? "" : ", ", m[0], (long long)c.units[i]);
    for (int k = 1; k <= kMarks + 1; ++k) std::fprintf(g_json, ", %llu", m[k]);
    std::fprintf(g_json, "]");
    first = false;
  }
  std::fprintf(g_json, "]}");
}

// deep = false: 128 and 256 threads, U = 1–16, c = 1–4; deep = true: 128 threads (the decode's split
// CTA), U = 24–64, c = 1–2.
void sweep(Buffers& b, const cudaDeviceProp& prop, bool deep) {
  const int S = prop.multiProcessorCount;
  const std::vector<int> thread_counts = deep ? std::vector<int>{128} : std::vector<int>{128, 256};
  const std::vector<int> load_counts = deep ? std::vector<int>{24, 32, 48, 64} : std::vector<int>{1, 2, 4, 8, 16};
  const int most_per_sm = deep ? 2 : 4;
  std::printf("\n# %s: every CTA reads its own slice; 'all' = every SM holds c CTAs (%d × c CTAs, 1 GiB in all), "
              "'one' = SM 0 alone holds c CTAs (the rest leave after a grid barrier), 4 MiB per CTA.\n", deep ? "deep" : "sweep", S);
  std::printf("# in flight/SM = c × threads × U × 16 B; GB/s/SM = the SM's bytes over its first start to its last end, "
              "median over SMs; total = all bytes over the first start to the last end; median of 5 launches\n");
  std::printf("%-4s %4s %3s %2s %9s %6s %10s %10s %10s %9s\n", "mode", "thr", "U", "c", "KiB/SM", "occ", "GB/s/SM",
              "total GB/s", "kernel us", "event us");
  for (const char* mode : {"all", "one"})
    for (int threads : thread_counts)
      for (int per_sm = 1; per_sm <= most_per_sm; ++per_sm)
        for (int loads : load_counts) {
          Config c;
          c.mode = deep ? "deep" : "sweep";
          c.threads = threads;
          c.loads = loads;
          c.per_sm = per_sm;
          const std::int64_t chunk_bytes = std::int64_t(threads) * loads * 16;
          const int ctas = S * per_sm;
          const std::int64_t per_cta = mode[0] == 'a' ? (1LL << 30) / ctas : (4LL << 20);
          c.units.assign(ctas, std::max<std::int64_t>(1, per_cta / chunk_bytes));
          c.only_sm = mode[0] == 'o' ? 0 : -2;
          const int occ = occupancy_of(c, smem_for(per_sm, prop));
          if (occ < per_sm) {  // the grid would not fit at once: its barrier would wait for ever
            std::printf("%-4s %4d %3d %2d skipped: %d CTAs per SM fit\n", mode, threads, loads, per_sm, occ);
            continue;
          }
          const Result r = run(c, b, prop);
          std::vector<double> rates;
          for (const Sm& s : sms_of(c, r, S))
            if (s.ctas > 0) rates.push_back(s.busy_bytes / ((s.last_end - s.first_start) * 1e-6) / 1e9);
          int on0 = 0;
          for (const Sm& s : sms_of(c, r, S)) on0 = std::max(on0, s.ctas);
          std::printf("%-4s %4d %3d %2d %9.1f %6d %10.2f %10.1f %10.1f %9.1f%s\n", mode, threads, loads, per_sm,
                      double(per_sm) * chunk_bytes / 1024.0, occ, bench::median(rates), r.gbps, r.kernel_us,
                      r.event_us, occ != per_sm || on0 != per_sm ? "  (!) CTAs per SM differ from c" : "");
          char label[64];
          std::snprintf(label, sizeof label, "%s", mode);
          record_json(c, r, label);
        }
}

// The grids where some SMs hold more CTAs than others, each CTA reading its units.
void tail(Buffers& b, const cudaDeviceProp& prop, bool uneven) {
  const int S = prop.multiProcessorCount;
  const char* mode = uneven ? "uneven" : "tail";
  const std::int64_t unit_bytes = 2LL << 20;
  std::printf("\n# %s: %s, at most 2 CTAs per SM; per SM group (SMs holding n CTAs): its SMs' last CTA's end, mean "
              "(min–max), and one CTA's GB/s while it ran, mean\n",
              mode, uneven ? "CTA i reads (1 + i mod 4) × 2 MiB" : "every CTA reads 4 MiB");
  std::printf("%-6s %5s %4s %3s %9s %10s %10s  %s\n", "mode", "ctas", "thr", "U", "KiB/CTA", "kernel us", "total GB/s",
              "SM groups: n CTAs × SMs: end us mean (min-max), GB/s per CTA");
  for (int ctas : {132, 136, 264, 268})
    for (int loads : {4, 16}) {
      Config c;
      c.mode = mode;
      c.threads = 256;
      c.loads = loads;
      c.per_sm = 2;
      const std::int64_t chunk_bytes = std::int64_t(c.threads) * loads * 16;
      for (int i = 0; i < ctas; ++i)
        c.units.push_back((uneven ? 1 + i % 4 : 2) * unit_bytes / chunk_bytes);
      const Result r = run(c, b, prop);
      std::printf("%-6s %5d %4d %3d %9.1f %10.1f %10.1f ", mode, ctas, c.threads, loads, chunk_bytes / 1024.0,
                  r.kernel_us, r.gbps);
      const std::vector<Sm> sms = sms_of(c, r, S);
      for (int n = 1; n <= 4; ++n) {
        double sum = 0, lo = 1e300, hi = 0, rate = 0;
        int count = 0, members = 0;
        for (const Sm& s : sms)
          if (s.ctas == n) {
            sum += s.last_end;
            lo = std::min(lo, s.last_end);
            hi = std::max(hi, s.last_end);
            ++count;
          }
        for (std::size_t i = 0; i < c.units.size(); ++i) {
          const unsigned long long* m = &r.rec[i * kRecord];
          if (!m[kRecord - 1] || sms[m[0]].ctas != n) continue;
          rate += double(c.units[i] * c.chunk(i) * 16) / (double(m[kMarks + 1] - m[1]) * 1e-9) / 1e9;
          ++members;
        }
        if (count)
          std::printf(" | %d×%d: %.1f (%.1f-%.1f), %.2f", n, count, sum / count, lo, hi, rate / members);
      }
      std::printf("\n");
      char label[64];
      std::snprintf(label, sizeof label, "%d ctas", ctas);
      record_json(c, r, label);
    }
}

// CTAs with unequal bytes in flight side by side: CTA i issues 4 loads per thread per chunk when
// i is even, 16 when odd (16 or 64 KiB in flight), each reading 4 MiB. Shared by the CTAs, both
// kinds read at one rate while HBM is the limit; shared by the bytes in flight, the 64 KiB CTAs
// read 4 times as fast. The rates are over each CTA's first half (every CTA still reading).
void mixed(Buffers& b, const cudaDeviceProp& prop) {
  std::printf("\n# mixed: CTA i keeps 16 KiB in flight (4 loads per thread) when i is even, 64 KiB (16) when odd, "
              "each reads 4 MiB, at most 2 CTAs per SM; per kind: GB/s per CTA over its first half, mean "
              "(min-max), and its end, mean\n");
  std::printf("%-6s %5s %10s %10s  %s\n", "mode", "ctas", "kernel us", "total GB/s",
              "16 KiB CTAs: GB/s (min-max), end us | 64 KiB CTAs: GB/s (min-max), end us");
  for (int ctas : {132, 136, 264}) {
    Config c;
    c.mode = "mixed";
    c.threads = 256;
    c.loads = 16;
    c.per_sm = 2;
    for (int i = 0; i < ctas; ++i) {
      c.live.push_back(i % 2 ? 16 : 4);
      c.units.push_back((4LL << 20) / (c.chunk(i) * 16));
    }
    const Result r = run(c, b, prop);
    std::printf("%-6s %5d %10.1f %10.1f ", "mixed", ctas, r.kernel_us, r.gbps);
    for (int kind : {4, 16}) {
      double sum = 0, lo = 1e300, hi = 0, end = 0;
      int count = 0;
      for (std::size_t i = 0; i < c.units.size(); ++i) {
        const unsigned long long* m = &r.rec[i * kRecord];
        if (c.live[i] != kind || !m[kRecord - 1]) continue;
        const double half = double(c.units[i] * c.chunk(i) * 16) / 2;
        const double rate = half / (double(m[1 + kMarks / 2] - m[1]) * 1e-9) / 1e9;
        sum += rate;
        lo = std::min(lo, rate);
        hi = std::max(hi, rate);
        end += double(m[1 + kMarks]) * 1e-3;
        ++count;
      }
      std::printf(" %s %.2f (%.2f-%.2f), %.1f", kind == 4 ? "" : "|", sum / count, lo, hi, end / count);
    }
    std::printf("\n");
    char label[64];
    std::snprintf(label, sizeof label, "%d ctas", ctas);
    record_json(c, r, label);
  }
}

// Partly filled grids: k CTAs, one per SM (the shared memory lets no second one on), every CTA
// reading 8 MiB after a grid barrier: one CTA's rate against the CTAs in flight, and HBM's total.
void partial(Buffers& b, const cudaDeviceProp& prop) {
  const int S = prop.multiProcessorCount;
  std::printf("\n# partial: k CTAs on k SMs (one each), 8 MiB per CTA, all start after a grid barrier; GB/s per CTA = "
              "its bytes over its start to its end, mean (min-max); total = all bytes over the first start to the last end\n");
  std::printf("%-7s %4s %3s %8s %4s %10s %10s %10s  %s\n", "mode", "thr", "U", "KiB/CTA", "k", "kernel us", "total GB/s",
              "GB/s/CTA", "(min-max)");
  for (int threads : {128, 256})
    for (int kib : {16, 64})
      for (int k : {1, 2, 4, 8, 16, 33, 66, 99, 132}) {
        if (k > S) continue;
        Config c;
        c.mode = "partial";
        c.threads = threads;
        c.loads = kib * 1024 / (threads * 16);
        c.per_sm = 1;
        c.only_sm = -2;
        const std::int64_t chunk_bytes = std::int64_t(threads) * c.loads * 16;
        c.units.assign(k, (8LL << 20) / chunk_bytes);
        const Result r = run(c, b, prop);
        double sum = 0, lo = 1e300, hi = 0;
        int n = 0;
        for (int i = 0; i < k; ++i) {
          const unsigned long long* m = &r.rec[std::size_t(i) * kRecord];
          if (!m[kRecord - 1]) continue;
          const double rate = double(c.units[i] * chunk_bytes) / (double(m[kMarks + 1] - m[1]) * 1e-9) / 1e9;
          sum += rate;
          lo = std::min(lo, rate);
          hi = std::max(hi, rate);
          ++n;
        }
        std::printf("%-7s %4d %3d %8d %4d %10.1f %10.1f %10.2f  (%.2f-%.2f)\n", "partial", threads, c.loads, kib, k,
                    r.kernel_us, r.gbps, sum / n, lo, hi);
        char label[64];
        std::snprintf(label, sizeof label, "%d ctas", k);
        record_json(c, r, label);
      }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> modes;
  for (int i = 2; i < argc; ++i) modes.push_back(argv[i]);
  if (modes.empty()) modes = {"sweep", "tail", "uneven", "mixed"};
  for (const std::string& m : modes)
    if (m != "sweep" && m != "deep" && m != "tail" && m != "uneven" && m != "mixed" && m != "partial") {
      std::fprintf(stderr, "hbm_share: unknown mode '%s' (sweep, deep, tail, uneven, mixed, partial)\n", m.c_str());
      return 2;
    }
  if (argc < 2) {
    std::fprintf(stderr, "usage: hbm_share JSON_OUT [MODE...]\n");
    return 2;
  }
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  Buffers b;
  check(cudaMalloc(&b.data, kBuffer), "malloc");
  check(cudaMemset(b.data, 0x5a, kBuffer), "memset");
  check(cudaMalloc(&b.first, 4096 * sizeof(long long)), "malloc");
  check(cudaMalloc(&b.chunks, 4096 * sizeof(int)), "malloc");
  check(cudaMalloc(&b.rec, 4096 * kRecord * 8), "malloc");
  check(cudaMalloc(&b.live, 4096 * sizeof(int)), "malloc");
  g_json = std::fopen(argv[1], "w");
  if (!g_json) {
    std::fprintf(stderr, "hbm_share: cannot write %s\n", argv[1]);
    return 1;
  }
  std::printf("device %s, %d SMs, %d-bit memory bus, L2 %d MB, %zu B shared memory per SM\n", prop.name,
              prop.multiProcessorCount, prop.memoryBusWidth, prop.l2CacheSize >> 20, prop.sharedMemPerMultiprocessor);
  std::fprintf(g_json, "{\"device\": \"%s\", \"sms\": %d,\n \"record\": \"per CTA: smid, chunks, start ns, "
                       "marks after each eighth ns (the last: end), read (1)\",\n \"runs\": [",
               prop.name, prop.multiProcessorCount);
  for (const std::string& m : modes) {
    if (m == "sweep") sweep(b, prop, false);
    if (m == "deep") sweep(b, prop, true);
    if (m == "tail") tail(b, prop, false);
    if (m == "uneven") tail(b, prop, true);
    if (m == "mixed") mixed(b, prop);
    if (m == "partial") partial(b, prop);
  }
  std::fprintf(g_json, "\n]}\n");
  std::fclose(g_json);
  return 0;
}
