// Which lines the L2 keeps when a stream overflows it: does a line read twice outlast one read once?
//
// Build: nvcc -O3 -arch=sm_90 -o l2_policy gpu/bench/l2_policy.cu
// Run:   l2_policy [--sequences LIST] A_MB B_MB [B_MB ...]
//        (profile it with ncu --cache-control none, -k regex:policy_)
//
// One CTA per SM (each asks for more than half the SM's shared memory), each reading the slice of a
// region that belongs to its SM (%smid), so that every line is read from one side of the L2 only.
// For every B, three sequences, each after a flush (a 256 MB read of other memory):
//   cold   A, B, A       A read once before B streams through
//   hot    A, A, B, A    A read twice (the second read hits) before B
//   hot3   A, A, A, B, A A read three times before B
//   hot-b  A, B, B, A    B read twice: its second read re-references B's lines
// and, named in --sequences (a comma list; the default is the four above):
//   store       A stored (no read: whole lines written), B, A read
//   read-store  A read, then stored, B, A read
// A line homed across is held by the reading SM's partition and by its home; whether a store leaves
// such a copy too (or only the home line, dirty) shows in how much of A survives B, beside cold (a
// copy on both sides) and hot (the second read refreshes only the copy).
// Under an LRU, A's last read is equally far back in cold and hot, so as much of A survives B in
// both; a policy that keeps re-referenced lines (or inserts streamed lines where they leave first)
// keeps more of A in hot. The last read of A's DRAM bytes says what was lost. Each line printed
// ("run SEQUENCE A_MB B_MB launches N") is followed, in ncu's log, by its N launches in order; the
// first, "warm-up", is a cold sequence not reported.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.cuh"

namespace {

using bench::fill_kernel;
using bench::flush_kernel;
using bench::sm_id;

void check(cudaError_t e, const char* what) { bench::check(e, "l2_policy", what); }

// The CTA on SM s reads the s-th of `sms` slices of lines [first, first + lines) once (128-byte lines,
// 8 uint4 each, ld.global.cg so every load reaches the L2) and counts itself in seen[s].
__global__ void policy_read(const uint4* data, long long first, long long lines, int sms, unsigned int* seen,
                            uint4* sink) {
  const unsigned int s = sm_id();
  if (s >= unsigned(sms)) return;
  const long long per = lines / sms, begin = first + per * s, end = s + 1 == unsigned(sms) ? first + lines : begin + per;
  uint4 acc{0, 0, 0, 0};
  for (long long v = begin * 8 + threadIdx.x; v < end * 8; v += blockDim.x) {
    const uint4 x = __ldcg(data + v);
    acc.x ^= x.x, acc.y ^= x.y, acc.z ^= x.z, acc.w ^= x.w;
  }
  if (threadIdx.x == 0) atomicAdd(seen + s, 1u);
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) sink[threadIdx.x] = acc;
}

// The same slices stored: every line written whole (st.global.cg), no read.
__global__ void policy_store(uint4* data, long long first, long long lines, int sms, unsigned int* seen) {
  const unsigned int s = sm_id();
  if (s >= unsigned(sms)) return;
  const long long per = lines / sms, begin = first + per * s, end = s + 1 == unsigned(sms) ? first + lines : begin + per;
  for (long long v = begin * 8 + threadIdx.x; v < end * 8; v += blockDim.x)
    __stcg(data + v, make_uint4(unsigned(v), unsigned(v >> 32), s, 0x5eed));
  if (threadIdx.x == 0) atomicAdd(seen + s, 1u);
}

constexpr double kMB = 1e6;
constexpr std::size_t kFlushBytes = std::size_t(256) << 20;

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> chosen = {"cold", "hot", "hot3", "hot-b"};
  int arg = 1;
  if (argc > 2 && std::string(argv[1]) == "--sequences") {
    chosen.clear();
    const std::string list = argv[2];
    for (std::size_t at = 0; at <= list.size();) {
      const std::size_t comma = std::min(list.find(',', at), list.size());
      const std::string name = list.substr(at, comma - at);
      if (name != "cold" && name != "hot" && name != "hot3" && name != "hot-b" && name != "store" && name != "read-store") {
        std::fprintf(stderr, "l2_policy: --sequences: unknown sequence '%s' (cold, hot, hot3, hot-b, store, read-store)\n",
                     name.c_str());
        return 2;
      }
      chosen.push_back(name);
      at = comma + 1;
    }
    arg = 3;
  }
  if (argc < arg + 2) {
    std::fprintf(stderr, "usage: l2_policy [--sequences LIST] A_MB B_MB [B_MB ...]\n");
    return 2;
  }
  std::vector<double> b_mb;
  const double a_mb = std::atof(argv[arg]);
  double max_b = 0;
  for (int i = arg + 1; i < argc; ++i) {
    b_mb.push_back(std::atof(argv[i]));
    max_b = std::max(max_b, b_mb.back());
  }
  if (!(a_mb > 0) || !(max_b > 0)) {
    std::fprintf(stderr, "l2_policy: sizes must be positive numbers of MB\n");
    return 2;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  const int sms = prop.multiProcessorCount;
  const long long a_lines = static_cast<long long>(a_mb * kMB / 128), max_b_lines = static_cast<long long>(max_b * kMB / 128);
  const std::size_t data_bytes = std::size_t(a_lines + max_b_lines) * 128;
  uint4 *data = nullptr, *flush = nullptr, *sink = nullptr;
  unsigned int* seen = nullptr;
  check(cudaMalloc(&data, data_bytes), "malloc data");
  check(cudaMalloc(&flush, kFlushBytes), "malloc flush");
  check(cudaMalloc(&sink, 4096), "malloc sink");
  check(cudaMalloc(&seen, sizeof(unsigned int) * sms), "malloc seen");
  fill_kernel<<<1024, 256>>>(data, data_bytes / 16);
  fill_kernel<<<1024, 256>>>(flush, kFlushBytes / 16);
  check(cudaDeviceSynchronize(), "fill");
  // More than half of an SM's shared memory: one CTA an SM.
  const int smem = static_cast<int>(prop.sharedMemPerMultiprocessor / 2 + 1024);
  check(cudaFuncSetAttribute(policy_read, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem");
  check(cudaFuncSetAttribute(policy_store, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem");
  std::vector<unsigned int> host(sms);
  auto launch = [&](long long first, long long lines, bool store) {
    check(cudaMemset(seen, 0, sizeof(unsigned int) * sms), "memset seen");
    if (store)
      policy_store<<<sms, 512, smem>>>(data, first, lines, sms, seen);
    else
      policy_read<<<sms, 512, smem>>>(data, first, lines, sms, seen, sink);
    check(cudaGetLastError(), "policy launch");
    check(cudaMemcpy(host.data(), seen, sizeof(unsigned int) * sms, cudaMemcpyDeviceToHost), "seen");
    for (int s = 0; s < sms; ++s)
      if (host[s] != 1) {
        std::fprintf(stderr, "l2_policy: SM %d ran %u CTAs of one launch (expected 1)\n", s, host[s]);
        std::exit(1);
      }
  };
  auto read = [&](long long first, long long lines) { launch(first, lines, false); };
  auto store = [&](long long first, long long lines) { launch(first, lines, true); };
  std::printf("device %s, %d SMs, L2 %d bytes\n", prop.name, sms, prop.l2CacheSize);
  // The first sequence of a process can lose more of A than the same one later (cold, A = 8 MB, B = 24
  // MB: 38.5 % kept first, 81.6–82.6 % in three later runs): a cold sequence on the first B, not
  // reported ("run warm-up"), goes before the rest.
  for (std::size_t k = 0; k <= b_mb.size(); ++k) {
    const double b = b_mb[k == 0 ? 0 : k - 1];
    const long long b_lines = static_cast<long long>(b * kMB / 128);
    const std::vector<std::string> sequences =
        k == 0 ? std::vector<std::string>{"warm-up"} : chosen;
    for (const std::string& sequence : sequences) {
      flush_kernel<<<4 * sms, 512>>>(flush, kFlushBytes / 16, sink);
      check(cudaDeviceSynchronize(), "flush");
      const int launches =
          sequence == "cold" || sequence == "warm-up" || sequence == "store" ? 3 : sequence == "hot3" ? 5 : 4;
      std::printf("run %s %.1f %.1f launches %d\n", sequence.c_str(), a_mb, b, launches);
      std::fflush(stdout);
      if (sequence == "store")
        store(0, a_lines);
      else
        read(0, a_lines);
      if (sequence == "read-store") store(0, a_lines);
      if (sequence == "hot" || sequence == "hot3") read(0, a_lines);
      if (sequence == "hot3") read(0, a_lines);
      read(a_lines, b_lines);
      if (sequence == "hot-b") read(a_lines, b_lines);
      read(0, a_lines);
    }
  }
  return 0;
}
