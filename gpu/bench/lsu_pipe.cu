// What passes the SM's load/store data pipe (Nsight Compute's l1tex__data_pipe_lsu_wavefronts) besides
// shared-memory loads and stores: one kernel per instruction kind, each a loop of that instruction
// alone on every warp of 4 CTAs of 128 threads per SM, so that the counters per instruction can be
// read off (gpu/bench/lsu_pipe.sh runs them under ncu). The cases:
//   shfl     __shfl_xor_sync, a butterfly step, on a register (no shared memory)
//   bar      __syncthreads alone
//   sts      a 4-byte st.shared a lane, consecutive words (1 wavefront each): the reference
//   ldg      a 16-byte ld.global a lane, from a 4 MiB buffer that stays in the L2 (512 bytes a warp)
//   stg      a 16-byte st.global a lane, to the same buffer
// Each kernel runs kIters iterations; the loop's other instructions are integer arithmetic.
// Run: gpu/bench/lsu_pipe.sh OUTDIR
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 128, kIters = 4096;
constexpr std::size_t kBufferBytes = 4u << 20;

__global__ void shfl_kernel(float* out, float seed) {
  float v = seed + threadIdx.x;
#pragma unroll 16
  for (int i = 0; i < kIters; ++i) v += __shfl_xor_sync(0xffffffffu, v, 1 + (i & 15));
  if (v == 12345.f) out[threadIdx.x] = v;  // keeps the loop; never true for these inputs
}

__global__ void bar_kernel(float* out, float seed) {
  float v = seed;
  for (int i = 0; i < kIters; ++i) {
    __syncthreads();
    v += 1.f;
  }
  if (v == 12345.f) out[threadIdx.x] = v;
}

__global__ void sts_kernel(float* out, float seed) {
  __shared__ float words[kThreads];
  float v = seed + threadIdx.x;
#pragma unroll 16
  for (int i = 0; i < kIters; ++i) {
    v += 1.f;
    *static_cast<volatile float*>(&words[threadIdx.x]) = v;
  }
  if (v == 12345.f) out[threadIdx.x] = words[threadIdx.x];
}

__global__ void ldg_kernel(float* out, const int4* buffer, float seed) {
  const std::size_t vectors = kBufferBytes / sizeof(int4);
  std::size_t at = (blockIdx.x * kThreads + threadIdx.x) % vectors;
  int acc = static_cast<int>(seed);
#pragma unroll 8
  for (int i = 0; i < kIters; ++i) {
    const int4 x = __ldcg(buffer + at);
    acc += x.x ^ x.y ^ x.z ^ x.w;
    at = (at + 4096 + 1) % vectors;
  }
  if (acc == 12345) out[threadIdx.x] = static_cast<float>(acc);
}

__global__ void stg_kernel(int4* buffer, float seed) {
  const std::size_t vectors = kBufferBytes / sizeof(int4);
  std::size_t at = (blockIdx.x * kThreads + threadIdx.x) % vectors;
  const int s = static_cast<int>(seed);
#pragma unroll 8
  for (int i = 0; i < kIters; ++i) {
    __stcg(buffer + at, make_int4(s + i, s, s, s));
    at = (at + 4096 + 1) % vectors;
  }
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "lsu_pipe: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

}  // namespace

int main() {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  const int ctas = 4 * sms;
  float* out = nullptr;
  int4* buffer = nullptr;
  check(cudaMalloc(&out, kThreads * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&buffer, kBufferBytes), "cudaMalloc");
  check(cudaMemset(buffer, 0, kBufferBytes), "cudaMemset");
  const long long warp_instructions = static_cast<long long>(ctas) * (kThreads / 32) * kIters;
  std::printf("lsu_pipe: %d CTAs of %d threads (4 an SM), %d iterations: %lld warp instructions of each kind\n",
              ctas, kThreads, kIters, warp_instructions);
  shfl_kernel<<<ctas, kThreads>>>(out, 1.f);
  bar_kernel<<<ctas, kThreads>>>(out, 1.f);
  sts_kernel<<<ctas, kThreads>>>(out, 1.f);
  ldg_kernel<<<ctas, kThreads>>>(out, buffer, 1.f);
  stg_kernel<<<ctas, kThreads>>>(buffer, 1.f);
  check(cudaDeviceSynchronize(), "the kernels");
  std::printf("lsu_pipe: shfl, bar, sts, ldg, stg ran\n");
  return 0;
}
