// The H100's L2 is two partitions. Which SMs sit by which one, and how much of a footprint read
// over and over stays in the L2 when all SMs read it, when only one side's SMs do, and in which order.
//
// Build: nvcc -O3 -arch=sm_90 -o l2_partition gpu/bench/l2_partition.cu
// Run:   l2_partition map SIDES_FILE [LINES_FILE]
//          For every SM s: the L2 is flushed, SM 0 reads L 128-byte lines, then SM s reads each of
//          them twice, one dependent load at a time, timed with clock64. Prints per SM the mean
//          latency of the first and second read and writes "sm side first second" lines to
//          SIDES_FILE (side 0 is SM 0's); LINES_FILE gets every first-read latency by line.
//        l2_partition sweep SIDES_FILE MODE PASSES MB [MB ...]
//          One launch per footprint (profile it with ncu, -k regex:pass_kernel): one CTA per SM,
//          the footprint split into one slice per reading SM, read PASSES times with a grid-wide
//          barrier after each pass. Loads are ld.global.cg, so every access reaches the L2.
//          MODE: all     every SM reads its own slice each pass, in the same (cyclic) order;
//                cross   as all, but on odd passes an SM reads the slice of an SM of the other
//                        side, so every line is read from both sides in turn;
//                side0 / side1  only the SMs of that side read (the same footprint, larger slices);
//                random  as all, each pass in another order (an affine permutation of the lines).
//          The first pass reads the footprint from DRAM; DRAM bytes beyond that are re-reads that
//          missed, so the share that hit per later pass is 1 − (DRAM − F) / ((PASSES − 1) · F).
//        l2_partition private SIDES_FILE CTAS PASSES read|write MB [MB ...]
//          As flash1 with few (batch, head) pairs: CTAS CTAs of an ordinary launch (the GPU places
//          them), each sweeping its own slice of the footprint PASSES times, no barrier between
//          passes; `write` stores every line back after reading it (flash1 writes O_i, ℓ_i, m_i
//          each sweep). Prints, per footprint, how many CTAs ran by each side (SIDES_FILE).
//
// Sides are told by latency: after SM 0 has read a line, an SM whose near partition holds it
// (SM 0's side, or the line's home) reads it in fewer cycles than one that must cross to the other.
// If the two partitions never held a line twice, every SM would see the same mix of near and far
// lines after SM 0's read, and the sides would come out of which lines are far (the per-line file).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "bench_util.cuh"

namespace {

using bench::fill_kernel;
using bench::flush_kernel;
using bench::sm_id;

void check(cudaError_t e, const char* what) { bench::check(e, "l2_partition", what); }

constexpr int kLineWords = 32;  // 128-byte lines of 32-bit words
constexpr int kMaxLines = 2048;

__device__ unsigned int g_ran = 0;  // set by the CTA that found itself on the target SM

// Reads every line once (the CTA on SM `target` only).
__global__ void touch_kernel(const unsigned int* lines, int n_lines, unsigned int target, unsigned int* sink) {
  if (sm_id() != target) return;
  unsigned int acc = 0;
  for (int i = threadIdx.x; i < n_lines; i += blockDim.x) acc ^= __ldcg(lines + std::size_t(i) * kLineWords);
  if (threadIdx.x == 0) g_ran = 1;
  if (acc == 0x9e3779b9u) sink[threadIdx.x] = acc;
}

// One thread on SM `target` follows the chase (each line's first word is the next line's index)
// and times every load: the shared-memory store needs the loaded value, so the second clock read
// comes after the data has arrived.
__global__ void probe_kernel(const unsigned int* lines, int n_lines, unsigned int start, unsigned int target,
                             unsigned int* cycles_by_line) {
  __shared__ unsigned int s_cycles[kMaxLines], s_next[kMaxLines];
  if (sm_id() != target || threadIdx.x != 0) return;
  unsigned int p = start;
  for (int i = 0; i < n_lines; ++i) {
    const long long t0 = clock64();
    const unsigned int next = __ldcg(lines + std::size_t(p) * kLineWords);
    static_cast<volatile unsigned int*>(s_next)[i] = next;  // waits for the load; volatile: kept
    const long long t1 = clock64();
    s_cycles[p] = unsigned(t1 - t0);
    p = next;
  }
  for (int i = 0; i < n_lines; ++i) cycles_by_line[i] = s_cycles[i];
  g_ran = s_next[n_lines - 1] == start ? 1 : 2;  // 2: the chase did not come back to its start
}

// Multipliers of the random order, one per pass: primes above any slice's line count, so that
// j → (a·j + b) mod n is a permutation of the n lines.
__constant__ unsigned long long c_mult[8] = {1000003ull, 1000033ull, 1000037ull, 1000039ull,
                                             1000081ull, 1000099ull, 1000117ull, 1000121ull};

// One CTA per SM; slot_of_sm[s] ≥ 0 names the slice the CTA on SM s reads (−1: it sits out),
// partner_of_sm[s] the slice it reads on odd passes when `cross`.
__global__ void pass_kernel(const uint4* data, const int* slot_of_sm, const int* partner_of_sm, long long lines_per_slot,
                            int passes, int cross, int random_order, unsigned int participants, uint4* sink) {
  const unsigned int s = sm_id();
  const int slot = slot_of_sm[s];
  if (slot < 0) return;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  uint4 acc{0, 0, 0, 0};
  for (int p = 0; p < passes; ++p) {
    const int owner = cross && (p & 1) ? partner_of_sm[s] : slot;
    const uint4* base = data + std::size_t(owner) * lines_per_slot * 8;
    const unsigned long long a = c_mult[p % 8], b = 7919ull * (p + 1);
#pragma unroll 4
    for (long long j = warp * 4 + lane / 8; j < lines_per_slot; j += warps * 4) {
      const long long line = random_order ? (long long)((a * (unsigned long long)j + b) % (unsigned long long)lines_per_slot) : j;
      const uint4 x = __ldcg(base + line * 8 + lane % 8);
      acc.x ^= x.x, acc.y ^= x.y, acc.z ^= x.z, acc.w ^= x.w;
    }
    bench::grid_barrier(participants);
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// CTAS CTAs, each its own slice (blockIdx.x) swept `passes` times; `write`: each line stored back
// (ordinary stores, write-back in the L2) after it is read. Each CTA records the SM it ran on.
__global__ void private_kernel(uint4* data, long long lines_per_cta, int passes, int write, unsigned int* sm_of_cta,
                               uint4* sink) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  uint4* base = data + std::size_t(blockIdx.x) * lines_per_cta * 8;
  uint4 acc{0, 0, 0, 0};
  for (int p = 0; p < passes; ++p) {
#pragma unroll 4
    for (long long j = warp * 4 + lane / 8; j < lines_per_cta; j += warps * 4) {
      uint4* at = base + j * 8 + lane % 8;
      uint4 x = __ldcg(at);
      acc.x ^= x.x, acc.y ^= x.y, acc.z ^= x.z, acc.w ^= x.w;
      if (write) {
        x.w += 1;
        *at = x;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) sm_of_cta[blockIdx.x] = sm_id();
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

int usage() {
  std::fprintf(stderr,
               "usage: l2_partition map SIDES_FILE [LINES_FILE]\n"
               "       l2_partition sweep SIDES_FILE all|cross|side0|side1|random PASSES MB [MB ...]\n"
               "       l2_partition private SIDES_FILE CTAS PASSES read|write MB [MB ...]\n");
  return 2;
}

// Launches `launch` until the CTA on the wanted SM ran (one CTA per SM: it always should).
template <class Launch>
void on_sm(Launch launch, const char* what) {
  for (int tries = 0; tries < 4; ++tries) {
    const unsigned int zero = 0;
    check(cudaMemcpyToSymbol(g_ran, &zero, sizeof zero), "reset");
    launch();
    check(cudaGetLastError(), what);
    check(cudaDeviceSynchronize(), what);
    unsigned int ran = 0;
    check(cudaMemcpyFromSymbol(&ran, g_ran, sizeof ran), "ran");
    if (ran == 2) {
      std::fprintf(stderr, "l2_partition: %s: the chase over the lines did not close\n", what);
      std::exit(1);
    }
    if (ran) return;
  }
  std::fprintf(stderr, "l2_partition: %s: no CTA ran on the target SM\n", what);
  std::exit(1);
}

int run_map(const cudaDeviceProp& prop, const char* sides_path, const char* lines_path) {
  const int sms = prop.multiProcessorCount, n_lines = 1024;
  // A random cyclic chase over n_lines lines (one permutation, fixed seed).
  std::vector<unsigned int> order(n_lines);
  std::iota(order.begin(), order.end(), 0u);
  unsigned long long seed = 88172645463325252ull;
  for (int i = n_lines - 1; i > 0; --i) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    std::swap(order[i], order[seed % unsigned(i + 1)]);
  }
  std::vector<unsigned int> host(std::size_t(n_lines) * kLineWords, 0);
  for (int i = 0; i < n_lines; ++i) host[std::size_t(order[i]) * kLineWords] = order[(i + 1) % n_lines];
  unsigned int *lines = nullptr, *cycles = nullptr;
  uint4 *flush = nullptr, *sink = nullptr;
  const std::size_t flush_bytes = std::size_t(4) * prop.l2CacheSize;
  check(cudaMalloc(&lines, host.size() * 4), "cudaMalloc lines");
  check(cudaMemcpy(lines, host.data(), host.size() * 4, cudaMemcpyHostToDevice), "copy lines");
  check(cudaMalloc(&cycles, std::size_t(n_lines) * 4), "cudaMalloc cycles");
  check(cudaMalloc(&flush, flush_bytes), "cudaMalloc flush");
  check(cudaMalloc(&sink, 4096 * sizeof(uint4)), "cudaMalloc sink");
  fill_kernel<<<1024, 256>>>(flush, flush_bytes / 16);
  check(cudaDeviceSynchronize(), "fill");
  const int smem = int(prop.sharedMemPerBlockOptin) - 16 * 1024;  // one CTA per SM, beside the static arrays
  check(cudaFuncSetAttribute(touch_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem touch");
  check(cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem probe");
  std::vector<std::vector<unsigned int>> first(sms, std::vector<unsigned int>(n_lines)), second = first;
  std::vector<double> mean1(sms), mean2(sms);
  for (int s = 0; s < sms; ++s) {
    flush_kernel<<<4 * sms, 512>>>(flush, flush_bytes / 16, sink);
    check(cudaDeviceSynchronize(), "flush");
    on_sm([&] { touch_kernel<<<sms, 256, smem>>>(lines, n_lines, 0u, reinterpret_cast<unsigned int*>(sink)); }, "touch");
    for (int round = 0; round < 2; ++round) {
      on_sm([&] { probe_kernel<<<sms, 32, smem>>>(lines, n_lines, order[0], unsigned(s), cycles); }, "probe");
      auto& dst = round == 0 ? first[s] : second[s];
      check(cudaMemcpy(dst.data(), cycles, std::size_t(n_lines) * 4, cudaMemcpyDeviceToHost), "copy cycles");
    }
    mean1[s] = std::accumulate(first[s].begin(), first[s].end(), 0.0) / n_lines;
    mean2[s] = std::accumulate(second[s].begin(), second[s].end(), 0.0) / n_lines;
  }
  // Sides by the first read's mean: split at the widest gap between sorted means, if it is wide.
  std::vector<double> sorted = mean1;
  std::sort(sorted.begin(), sorted.end());
  double gap = 0, cut = 0;
  for (int i = 1; i < sms; ++i)
    if (sorted[i] - sorted[i - 1] > gap) gap = sorted[i] - sorted[i - 1], cut = 0.5 * (sorted[i] + sorted[i - 1]);
  std::vector<int> side(sms);
  const char* method = "mean first-read latency";
  if (gap >= 10.0) {
    const bool zero_low = mean1[0] < cut;
    for (int s = 0; s < sms; ++s) side[s] = (mean1[s] < cut) == zero_low ? 0 : 1;
  } else {
    // No gap: the sides come from which lines are slow, correlated with SM 0's own pattern.
    method = "per-line correlation with SM 0";
    auto centred = [&](int s) {
      std::vector<double> v(first[s].begin(), first[s].end());
      const double m = std::accumulate(v.begin(), v.end(), 0.0) / n_lines;
      for (double& x : v) x -= m;
      return v;
    };
    const std::vector<double> ref = centred(0);
    for (int s = 0; s < sms; ++s) {
      const std::vector<double> v = centred(s);
      side[s] = std::inner_product(v.begin(), v.end(), ref.begin(), 0.0) >= 0 ? 0 : 1;
    }
  }
  FILE* f = std::fopen(sides_path, "w");
  if (!f) {
    std::fprintf(stderr, "l2_partition: cannot write %s\n", sides_path);
    return 1;
  }
  int count[2] = {0, 0};
  std::printf("sides by %s (widest gap %.1f cycles)\n   sm side first second\n", method, gap);
  for (int s = 0; s < sms; ++s) {
    ++count[side[s]];
    std::fprintf(f, "%d %d %.1f %.1f\n", s, side[s], mean1[s], mean2[s]);
    std::printf("%5d %4d %5.1f %6.1f\n", s, side[s], mean1[s], mean2[s]);
  }
  std::fclose(f);
  std::printf("side 0: %d SMs, side 1: %d SMs\n", count[0], count[1]);
  if (lines_path) {
    FILE* g = std::fopen(lines_path, "w");
    if (!g) {
      std::fprintf(stderr, "l2_partition: cannot write %s\n", lines_path);
      return 1;
    }
    for (int s = 0; s < sms; ++s) {
      std::fprintf(g, "%d", s);
      for (int i = 0; i < n_lines; ++i) std::fprintf(g, " %u", first[s][i]);
      std::fprintf(g, "\n");
    }
    std::fclose(g);
  }
  cudaFree(sink);
  cudaFree(flush);
  cudaFree(cycles);
  cudaFree(lines);
  return 0;
}

// The side of every SM from SIDES_FILE (`map`'s output); empty, having said so, if it does not name
// one for each.
std::vector<int> read_sides(const char* sides_path, int sms) {
  std::vector<int> side(sms, -1);
  FILE* f = std::fopen(sides_path, "r");
  if (f) {
    int s = 0, sd = 0;
    double m1 = 0, m2 = 0;
    while (std::fscanf(f, "%d %d %lf %lf", &s, &sd, &m1, &m2) == 4)
      if (s >= 0 && s < sms && (sd == 0 || sd == 1)) side[s] = sd;
    std::fclose(f);
  }
  if (std::count(side.begin(), side.end(), -1) == 0) return side;
  std::fprintf(stderr, "l2_partition: %s does not name a side for every SM (run map first)\n", sides_path);
  return {};
}

int run_sweep(const cudaDeviceProp& prop, const char* sides_path, const std::string& mode, int passes,
              const std::vector<double>& footprints_mb) {
  const int sms = prop.multiProcessorCount;
  const std::vector<int> side = read_sides(sides_path, sms);
  if (side.empty()) return 2;
  const bool cross = mode == "cross", random_order = mode == "random";
  const int only = mode == "side0" ? 0 : mode == "side1" ? 1 : -1;
  // Slots: the reading SMs in order; for cross, the i-th SM of side 0 pairs with the i-th of side 1.
  std::vector<int> slot(sms, -1), partner(sms, -1), by_side[2];
  int slots = 0;
  for (int i = 0; i < sms; ++i)
    if (only < 0 || side[i] == only) slot[i] = slots++, by_side[side[i]].push_back(i);
  for (int i = 0; i < sms; ++i) partner[i] = slot[i];
  const std::size_t pairs = std::min(by_side[0].size(), by_side[1].size());
  for (std::size_t i = 0; i < pairs; ++i) {
    partner[by_side[0][i]] = slot[by_side[1][i]];
    partner[by_side[1][i]] = slot[by_side[0][i]];
  }
  int *d_slot = nullptr, *d_partner = nullptr;
  check(cudaMalloc(&d_slot, sms * sizeof(int)), "cudaMalloc slots");
  check(cudaMalloc(&d_partner, sms * sizeof(int)), "cudaMalloc partners");
  check(cudaMemcpy(d_slot, slot.data(), sms * sizeof(int), cudaMemcpyHostToDevice), "copy slots");
  check(cudaMemcpy(d_partner, partner.data(), sms * sizeof(int), cudaMemcpyHostToDevice), "copy partners");
  const double max_mb = *std::max_element(footprints_mb.begin(), footprints_mb.end());
  const std::size_t max_bytes = std::size_t(max_mb * 1e6) + std::size_t(slots) * 128;
  uint4 *data = nullptr, *sink = nullptr;
  check(cudaMalloc(&data, max_bytes), "cudaMalloc data");
  check(cudaMalloc(&sink, std::size_t(sms) * 1024 * sizeof(uint4)), "cudaMalloc sink");
  fill_kernel<<<1024, 256>>>(data, max_bytes / 16);
  check(cudaDeviceSynchronize(), "fill");
  const int smem = int(prop.sharedMemPerBlockOptin);  // one CTA per SM
  check(cudaFuncSetAttribute(pass_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem pass");
  for (double mb : footprints_mb) {
    const long long lines_per_slot = (long long)(mb * 1e6 / 128.0 / slots);
    const double footprint = double(lines_per_slot) * 128.0 * slots;
    pass_kernel<<<sms, 512, smem>>>(data, d_slot, d_partner, lines_per_slot, passes, cross ? 1 : 0, random_order ? 1 : 0,
                                    unsigned(slots), sink);
    check(cudaGetLastError(), "pass_kernel launch");
    check(cudaDeviceSynchronize(), "pass_kernel");
    std::printf("run mode %s passes %d readers %d footprint_bytes %.0f read_bytes %.0f\n", mode.c_str(), passes, slots,
                footprint, footprint * passes);
  }
  cudaFree(sink);
  cudaFree(data);
  cudaFree(d_partner);
  cudaFree(d_slot);
  return 0;
}

int run_private(const cudaDeviceProp& prop, const char* sides_path, int ctas, int passes, bool write,
                const std::vector<double>& footprints_mb) {
  const int sms = prop.multiProcessorCount;
  const std::vector<int> side = read_sides(sides_path, sms);
  if (side.empty()) return 2;
  const double max_mb = *std::max_element(footprints_mb.begin(), footprints_mb.end());
  const std::size_t max_bytes = std::size_t(max_mb * 1e6) + std::size_t(ctas) * 128;
  uint4 *data = nullptr, *sink = nullptr;
  unsigned int* d_sm = nullptr;
  check(cudaMalloc(&data, max_bytes), "cudaMalloc data");
  check(cudaMalloc(&sink, std::size_t(ctas) * 512 * sizeof(uint4)), "cudaMalloc sink");
  check(cudaMalloc(&d_sm, std::size_t(ctas) * sizeof(unsigned int)), "cudaMalloc sm_of_cta");
  fill_kernel<<<1024, 256>>>(data, max_bytes / 16);
  check(cudaDeviceSynchronize(), "fill");
  std::vector<unsigned int> sm_of_cta(ctas);
  for (double mb : footprints_mb) {
    const long long lines_per_cta = (long long)(mb * 1e6 / 128.0 / ctas);
    const double footprint = double(lines_per_cta) * 128.0 * ctas;
    private_kernel<<<ctas, 512>>>(data, lines_per_cta, passes, write ? 1 : 0, d_sm, sink);
    check(cudaGetLastError(), "private_kernel launch");
    check(cudaDeviceSynchronize(), "private_kernel");
    check(cudaMemcpy(sm_of_cta.data(), d_sm, std::size_t(ctas) * sizeof(unsigned int), cudaMemcpyDeviceToHost),
          "copy sm_of_cta");
    int by_side[2] = {0, 0};
    for (unsigned int sm : sm_of_cta) ++by_side[sm < unsigned(sms) ? side[sm] : 0];
    std::printf("run mode private-%s passes %d readers %d footprint_bytes %.0f read_bytes %.0f side0 %d side1 %d sms",
                write ? "write" : "read", passes, ctas, footprint, footprint * passes, by_side[0], by_side[1]);
    for (unsigned int sm : sm_of_cta) std::printf(" %u", sm);
    std::printf("\n");
  }
  cudaFree(d_sm);
  cudaFree(sink);
  cudaFree(data);
  return 0;
}

// The footprints in MB from argv[first] on; exits 2 naming the first that is not one.
std::vector<double> parse_footprints(int argc, char** argv, int first) {
  std::vector<double> mb;
  for (int i = first; i < argc; ++i) {
    const double x = std::atof(argv[i]);
    if (!(x > 0 && x < 4096)) {
      std::fprintf(stderr, "l2_partition: footprint '%s' must be a positive number of MB\n", argv[i]);
      std::exit(2);
    }
    mb.push_back(x);
  }
  return mb;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const std::string verb = argv[1];
  if (verb == "map") return run_map(prop, argv[2], argc > 3 ? argv[3] : nullptr);
  if (verb == "private") {
    if (argc < 7) return usage();
    const int ctas = std::atoi(argv[3]), passes = std::atoi(argv[4]);
    const std::string rw = argv[5];
    if (ctas < 1 || ctas > 1024 || passes < 2 || (rw != "read" && rw != "write")) {
      std::fprintf(stderr, "l2_partition: private wants CTAS 1 to 1024, PASSES at least 2, read or write\n");
      return 2;
    }
    return run_private(prop, argv[2], ctas, passes, rw == "write", parse_footprints(argc, argv, 6));
  }
  if (verb != "sweep" || argc < 6) return usage();
  const std::string mode = argv[3];
  if (mode != "all" && mode != "cross" && mode != "side0" && mode != "side1" && mode != "random") return usage();
  const int passes = std::atoi(argv[4]);
  if (passes < 2) {
    std::fprintf(stderr, "l2_partition: PASSES must be at least 2\n");
    return 2;
  }
  return run_sweep(prop, argv[2], mode, passes, parse_footprints(argc, argv, 5));
}
