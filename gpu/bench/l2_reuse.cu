// L2 survival microbenchmark: how much of a line survives in the L2 after D bytes of other
// traffic, measured from the DRAM read bytes that Nsight Compute counts.
//
// Every CTA of a grid that fills the GPU (all CTAs resident, a grid-wide barrier after each
// iteration) reads, at iteration k, one new chunk of `chunk` bytes and re-reads the chunks that
// were new `lag`, 2·lag, … `reuses`·lag iterations ago. The re-read chunk was first read by
// another CTA (`shift` CTAs along, so on another SM) or by the same CTA (shift 0). Loads are
// ld.global.cg, so they bypass L1 and every access reaches the L2.
//
// Between two touches of a chunk the other CTAs touch (1 + reuses) · lag · grid · chunk distinct
// bytes: the LRU reuse distance D. New bytes are read once from DRAM; the rest of the DRAM reads
// are re-reads that missed, so the surviving fraction at D is 1 − (DRAM − new) / re-read bytes.
// With WRITE_BYTES, every CTA also stores that many new bytes per iteration (as an attention
// kernel stores O); with STREAM_BYTES it also reads that many new bytes that nobody reads again
// (as it reads Q). Either way D grows by lag · grid · those bytes, and in an LRU the survival at D
// does not change: a change tells that the L2 treats dirty lines, or lines read only once,
// differently from lines that are read again.
//
// Build: nvcc -O3 -arch=sm_90 -o l2_reuse gpu/bench/l2_reuse.cu
// Run:   l2_reuse CHUNK_BYTES LAG REUSES SHIFT ITERATIONS [WRITE_BYTES [STREAM_BYTES]]
//        (one launch; profile it with ncu)
//        SHIFT = -1 re-reads the chunk of the CTA half the grid along (another SM, but as the H100
//        hands CTAs to its GPCs in turn, likely in the same GPC and L2 half);
//        SHIFT = -2 the chunk of a CTA on SM (s + 64) mod 128 by %smid, SM 128+ on SM s − 8: on the
//        H100 SMs 0–63 sit in four GPCs and 64–119 in four others, so the other L2 half;
//        SHIFT = -3 the chunk of a CTA on SM s xor 2: another SM of the same GPC, so the same half;
//        SHIFT = -4 alternates: re-read r comes from the -2 partner when r is odd, the -3 one when
//        even, so a chunk re-read REUSES times is read from both L2 halves in turn.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "bench_util.cuh"

namespace {

using bench::fill_kernel;
using bench::sm_id;

void check(cudaError_t e, const char* what) { bench::check(e, "l2_reuse", what); }

__device__ unsigned int g_smid[4096];
__device__ unsigned int g_unpaired = 0;  // CTAs that found no CTA on the partner SM (SHIFT -2 to -4)

// The SM whose CTA a CTA on SM `s` re-reads from, for SHIFT -2 and -3.
__device__ unsigned int partner_sm(unsigned int s, int shift) {
  if (shift == -3) return s ^ 2u;
  return s < 128 ? (s + 64) % 128 : s - 8;
}

// For SHIFT -2 and -3: the CTA with the same rank among the CTAs on the partner SM as this one has
// on its own (every CTA's %smid is in g_smid); the CTA half the grid along if there is none.
__device__ unsigned int partner_cta(unsigned int cta, unsigned int ctas, int shift) {
  const unsigned int mine = g_smid[cta], want = partner_sm(mine, shift);
  unsigned int rank = 0;
  for (unsigned int c = 0; c < cta; ++c) rank += g_smid[c] == mine;
  for (unsigned int c = 0, seen = 0; c < ctas; ++c) {
    if (g_smid[c] != want) continue;
    if (seen++ == rank) return c;
  }
  atomicAdd(&g_unpaired, 1u);
  return (cta + ctas / 2) % ctas;
}

__device__ uint4 load_chunk(const uint4* base, int vectors) {
  uint4 acc{0, 0, 0, 0};
  for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
    const uint4 x = __ldcg(base + v);
    acc.x ^= x.x, acc.y ^= x.y, acc.z ^= x.z, acc.w ^= x.w;
  }
  return acc;
}

__device__ void store_chunk(uint4* base, int vectors, uint4 value) {
  for (int v = threadIdx.x; v < vectors; v += blockDim.x) base[v] = value;
}

__global__ void reuse_kernel(const uint4* data, uint4* sink, uint4* out, const uint4* stream, int chunk_vectors,
                             int lag, int reuses, int shift, int iterations, int write_vectors, int stream_vectors) {
  const unsigned int ctas = gridDim.x;
  const unsigned int cta = blockIdx.x;
  __shared__ unsigned int owner_shared, second_owner_shared;
  if (shift < 0) {  // the partner by SM: every CTA's %smid first, then the same-rank CTA on the partner SM
    if (threadIdx.x == 0) g_smid[cta] = sm_id();
    bench::grid_barrier(ctas);
    if (threadIdx.x == 0) {
      owner_shared = partner_cta(cta, ctas, shift == -4 ? -2 : shift);
      second_owner_shared = shift == -4 ? partner_cta(cta, ctas, -3) : owner_shared;
    }
  } else if (threadIdx.x == 0) {
    owner_shared = second_owner_shared = (cta + unsigned(shift)) % ctas;
  }
  __syncthreads();
  // SHIFT -4 alternates: odd re-reads come from the other L2 half, even ones from the same half, so
  // that every chunk is read from both halves in turn.
  const unsigned int owner = owner_shared, second_owner = second_owner_shared;
  uint4 acc{0, 0, 0, 0};
  for (int k = 0; k < iterations; ++k) {
    const uint4 fresh = load_chunk(data + (std::size_t(k) * ctas + cta) * chunk_vectors, chunk_vectors);
    acc.x ^= fresh.x, acc.y ^= fresh.y, acc.z ^= fresh.z, acc.w ^= fresh.w;
    for (int r = 1; r <= reuses; ++r) {
      const int old = k - r * lag;
      if (old < 0) break;
      const unsigned int from = r % 2 == 1 ? owner : second_owner;
      const uint4 again = load_chunk(data + (std::size_t(old) * ctas + from) * chunk_vectors, chunk_vectors);
      acc.x ^= again.x, acc.y ^= again.y, acc.z ^= again.z, acc.w ^= again.w;
    }
    if (stream_vectors > 0) {
      const uint4 once = load_chunk(stream + (std::size_t(k) * ctas + cta) * stream_vectors, stream_vectors);
      acc.x ^= once.x, acc.y ^= once.y, acc.z ^= once.z, acc.w ^= once.w;
    }
    if (write_vectors > 0) store_chunk(out + (std::size_t(k) * ctas + cta) * write_vectors, write_vectors, acc);
    bench::grid_barrier(ctas);
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) sink[cta * blockDim.x + threadIdx.x] = acc;  // keeps the loads
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || argc > 8) {
    std::fprintf(stderr, "usage: l2_reuse CHUNK_BYTES LAG REUSES SHIFT ITERATIONS [WRITE_BYTES [STREAM_BYTES]]\n");
    return 2;
  }
  const int chunk = std::atoi(argv[1]), lag = std::atoi(argv[2]), reuses = std::atoi(argv[3]);
  const int shift_arg = std::atoi(argv[4]), iterations = std::atoi(argv[5]);
  const int write = argc > 6 ? std::atoi(argv[6]) : 0, streamed = argc > 7 ? std::atoi(argv[7]) : 0;
  if (chunk <= 0 || chunk % 16 || lag <= 0 || reuses < 0 || iterations <= 0 || write < 0 || write % 16 ||
      streamed < 0 || streamed % 16) {
    std::fprintf(stderr, "l2_reuse: CHUNK_BYTES must be a positive multiple of 16, WRITE_BYTES and STREAM_BYTES "
                         "multiples of 16, LAG and ITERATIONS positive\n");
    return 2;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const int threads = 128;
  // Two CTAs per SM, like the attention kernels: a large shared-memory request spreads them out.
  const int smem = int(prop.sharedMemPerMultiprocessor / 2 - 2048);
  check(cudaFuncSetAttribute(reuse_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem attribute");
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reuse_kernel, threads, smem), "occupancy");
  const int ctas = per_sm * prop.multiProcessorCount;
  if (ctas > 4096 || shift_arg < -4) {
    std::fprintf(stderr, "l2_reuse: SHIFT must be -4, -3, -2, -1 or at least 0 (and at most 4096 CTAs)\n");
    return 2;
  }
  const int shift = shift_arg == -1 ? ctas / 2 : shift_arg;
  const std::size_t bytes = std::size_t(iterations) * ctas * chunk;
  uint4 *data = nullptr, *sink = nullptr, *out = nullptr, *stream = nullptr;
  check(cudaMalloc(&data, bytes), "cudaMalloc data");
  if (write > 0) check(cudaMalloc(&out, std::size_t(iterations) * ctas * write), "cudaMalloc out");
  if (streamed > 0) {
    check(cudaMalloc(&stream, std::size_t(iterations) * ctas * streamed), "cudaMalloc stream");
    fill_kernel<<<1024, 256>>>(stream, std::size_t(iterations) * ctas * streamed / 16);
  }
  check(cudaMalloc(&sink, std::size_t(ctas) * threads * sizeof(uint4)), "cudaMalloc sink");
  fill_kernel<<<1024, 256>>>(data, bytes / 16);
  check(cudaGetLastError(), "fill_kernel");
  reuse_kernel<<<ctas, threads, smem>>>(data, sink, out, stream, chunk / 16, lag, reuses, shift, iterations, write / 16,
                                        streamed / 16);
  check(cudaGetLastError(), "reuse_kernel launch");
  check(cudaDeviceSynchronize(), "reuse_kernel");
  const double distance = (double(1 + reuses) * chunk + write + streamed) * lag * ctas;
  const double fresh = double(bytes) + double(iterations) * ctas * streamed;
  double reread = 0;
  for (int r = 1; r <= reuses; ++r) reread += double(std::max(0, iterations - r * lag)) * ctas * chunk;
  unsigned int unpaired = 0;
  check(cudaMemcpyFromSymbol(&unpaired, g_unpaired, sizeof unpaired), "cudaMemcpyFromSymbol");
  std::printf("ctas %d per_sm %d chunk %d lag %d reuses %d shift %d iterations %d write %d stream %d distance_bytes %.0f new_bytes %.0f reread_bytes %.0f unpaired %u\n",
              ctas, per_sm, chunk, lag, reuses, shift, iterations, write, streamed, distance, fresh, reread, unpaired);
  cudaFree(stream);
  cudaFree(out);
  cudaFree(data);
  cudaFree(sink);
  return 0;
}
