// HBM's rate for tiles of short rows: what standard attention's S and P tiles cost.
//
// A matrix far larger than the L2 (2 GiB) is read, or written, once, as tiles of 64 rows of L bytes
// whose rows lie `pitch` bytes apart (a row of S or P: N × 2 bytes), one tile per CTA of 128 threads,
// 16-byte accesses, a thread's loads issued 16 at a time before any is used. The CTAs take the tiles in
// one of two orders:
//   across   tile t covers column block t mod (pitch / L) of row block t / (pitch / L): CTAs that run
//            together cover whole rows of the matrix (as qk_kernel stores S: blockIdx.x over columns);
//   down     tile t covers row block t mod (rows / 64) of column block t / (rows / 64): CTAs that run
//            together cover one column block of many row blocks (as pv_kernel's CTAs, one per row
//            block, load P_ij at about the same j).
// L = pitch is the matrix read or written whole, row after row, for the rate of long runs.
// Each case: the median of 5 timed launches (CUDA events) after one warm-up, bytes over time.
//
// Build: nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o hbm_runs gpu/bench/hbm_runs.cu
// Run:   hbm_runs [PITCH...]   (row pitches in bytes, default 2048 8192; prints one line per case)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.cuh"

namespace {

void check(cudaError_t e, const char* what) { bench::check(e, "hbm_runs", what); }

constexpr std::int64_t kBytes = 2LL << 30;  // the matrix, 40 times the H100's L2
constexpr int kRows = 64, kThreads = 128;

struct Shape {
  std::int64_t pitch = 0, run = 0;  // bytes between rows, and of a tile's row
  bool across = true;
  __host__ __device__ std::int64_t row_blocks() const { return kBytes / pitch / kRows; }
  __host__ __device__ std::int64_t col_blocks() const { return pitch / run; }
};

// The first byte of the tile that CTA `t` covers.
__device__ std::int64_t tile_origin(std::int64_t t, Shape s) {
  const std::int64_t i = s.across ? t / s.col_blocks() : t % s.row_blocks();
  const std::int64_t j = s.across ? t % s.col_blocks() : t / s.row_blocks();
  return i * kRows * s.pitch + j * s.run;
}

// Reads one tile: each thread its 16-byte pieces, all loads issued before any is added.
template <int kPerThread>
__global__ void read_tiles(const uint4* __restrict__ m, Shape s, unsigned* sink) {
  const char* base = reinterpret_cast<const char*>(m) + tile_origin(blockIdx.x, s);
  const std::int64_t per_row = s.run / 16;
  constexpr int kBatch = kPerThread < 16 ? kPerThread : 16;  // 16 loads of 16 B in flight a thread at most
  unsigned x = 0;
  for (int first = 0; first < kPerThread; first += kBatch) {
    uint4 v[kBatch];
#pragma unroll
    for (int n = 0; n < kBatch; ++n) {
      const std::int64_t piece = threadIdx.x + std::int64_t{first + n} * kThreads;
      v[n] = __ldcg(reinterpret_cast<const uint4*>(base + piece / per_row * s.pitch) + piece % per_row);
    }
#pragma unroll
    for (int n = 0; n < kBatch; ++n) x ^= v[n].x ^ v[n].y ^ v[n].z ^ v[n].w;
  }
  if (x == 0x9e3779b9u) sink[blockIdx.x] = x;  // never in practice; keeps the loads
}

template <int kPerThread>
__global__ void write_tiles(uint4* __restrict__ m, Shape s) {
  char* base = reinterpret_cast<char*>(m) + tile_origin(blockIdx.x, s);
  const std::int64_t per_row = s.run / 16;
#pragma unroll
  for (int n = 0; n < kPerThread; ++n) {
    const std::int64_t piece = threadIdx.x + std::int64_t{n} * kThreads;
    const unsigned w = static_cast<unsigned>(piece) ^ blockIdx.x;
    reinterpret_cast<uint4*>(base + piece / per_row * s.pitch)[piece % per_row] = make_uint4(w, w, w, w);
  }
}

// One launch over every tile of the matrix; kPerThread = 64 rows × run bytes / 16 B / 128 threads.
template <int kPerThread>
void launch(bool write, uint4* m, Shape s, unsigned* sink) {
  const auto tiles = static_cast<unsigned>(s.row_blocks() * s.col_blocks());
  if (write) write_tiles<kPerThread><<<tiles, kThreads>>>(m, s);
  else read_tiles<kPerThread><<<tiles, kThreads>>>(m, s, sink);
}

void launch_any(bool write, uint4* m, Shape s, unsigned* sink) {
  switch (s.run) {
    case 128: return launch<4>(write, m, s, sink);
    case 256: return launch<8>(write, m, s, sink);
    case 512: return launch<16>(write, m, s, sink);
    case 1024: return launch<32>(write, m, s, sink);
    case 2048: return launch<64>(write, m, s, sink);
    default: break;
  }
  // Longer runs (the whole row of a wide pitch): tiles of 64 rows of 2 KB, across.
  Shape wide = s;
  wide.run = 2048;
  wide.across = true;
  launch<64>(write, m, wide, sink);
}

double median_ms(bool write, uint4* m, Shape s, unsigned* sink) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  launch_any(write, m, s, sink);  // warm-up
  std::vector<float> ms;
  for (int rep = 0; rep < 5; ++rep) {
    check(cudaEventRecord(a), "record");
    launch_any(write, m, s, sink);
    check(cudaEventRecord(b), "record");
    check(cudaEventSynchronize(b), "launch");
    float t = 0;
    check(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  check(cudaEventDestroy(a), "event");
  check(cudaEventDestroy(b), "event");
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> pitches;
  for (int n = 1; n < argc; ++n) {
    char* end = nullptr;
    const long long p = std::strtoll(argv[n], &end, 10);
    if (*end != '\0' || p < 2048 || p % 2048 != 0 || kBytes % (p * kRows) != 0) {
      std::fprintf(stderr, "hbm_runs: PITCH: '%s' is not a multiple of 2048 bytes that divides 2 GiB in 64-row blocks\n",
                   argv[n]);
      return 2;
    }
    pitches.push_back(p);
  }
  if (pitches.empty()) pitches = {2048, 8192};
  uint4* m = nullptr;
  unsigned* sink = nullptr;
  check(cudaMalloc(&m, kBytes), "cudaMalloc matrix");
  check(cudaMalloc(&sink, (kBytes / 128 / kRows) * sizeof(unsigned)), "cudaMalloc sink");
  check(cudaMemset(m, 1, kBytes), "cudaMemset");
  std::printf("%-6s %7s %6s %-7s %10s %9s\n", "access", "pitch", "run", "order", "GB/s", "ms");
  for (const std::int64_t pitch : pitches)
    for (const bool write : {false, true})
      for (std::int64_t run = 128; run <= pitch; run *= 2)
        for (const bool across : {true, false}) {
          if (run == pitch && !across) continue;  // whole rows: one order
          if (run > 2048 && run < pitch) continue;
          const Shape s{pitch, run, across};
          const double ms = median_ms(write, m, s, sink);
          std::printf("%-6s %7lld %6lld %-7s %10.1f %9.3f\n", write ? "write" : "read", static_cast<long long>(pitch),
                      static_cast<long long>(run), run == pitch ? "rows" : across ? "across" : "down",
                      double(kBytes) / (ms * 1e-3) / 1e9, ms);
        }
  check(cudaFree(m), "cudaFree");
  check(cudaFree(sink), "cudaFree");
  return 0;
}
