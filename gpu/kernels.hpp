// hbmlab's CUDA attention kernels, seen from the host: which (algorithm, d, Br, Bc) shapes are
// compiled, the device tensors one launch uses, and launch(). Tensors are [B·H][N][d] row-major,
// Q, K, V, O in the problem dtype (fp16/bf16); S, P (standard) in the dtype; ℓ, m, L in fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "sim/workload/problem.hpp"

namespace hbmlab::gpu {

struct DeviceTensors {
  const void* Q = nullptr;
  const void* K = nullptr;
  const void* V = nullptr;
  void* O = nullptr;
  float* L = nullptr;   // flash2: log-sum-exp per row, [B·H][N]
  void* S = nullptr;    // standard: [B·H][N][N]
  void* P = nullptr;    // standard: [B·H][N][N]
  float* l = nullptr;   // flash1: running row sums in HBM, [B·H][N]
  float* m = nullptr;   // flash1: running row maxima in HBM, [B·H][N]
  unsigned long long* trace = nullptr;  // flash2, optional: start ns, end ns, SM of each CTA, [B·H][Tr][3]
};

struct KernelShape {
  Algo algo = Algo::flash2;
  Dtype dtype = Dtype::fp16;
  int d = 64;
  Blocks blocks;
};

// Shapes compiled into this build (a few per algorithm and d; see gpu/dispatch.cu).
std::vector<KernelShape> compiled_shapes();
bool is_compiled(const KernelShape& shape);
// The default blocks for an algorithm, dtype and d (the first compiled shape).
Blocks default_blocks(Algo algo, Dtype dtype, int d);

// Extra bytes the algorithm needs beyond Q, K, V, O (S and P, ℓ and m, L).
std::int64_t scratch_bytes(Algo algo, const AttentionProblem& problem);

// Enqueues the whole forward pass (three kernels for standard) on the stream; throws CudaError
// or std::invalid_argument for a shape that is not compiled. kv_descending (flash2 only): each CTA
// visits K_j, V_j from its last block down, as PyTorch's FlashAttention-2 does.
void launch(Algo algo, const AttentionProblem& problem, Blocks blocks, const DeviceTensors& t, cudaStream_t stream,
            bool kv_descending = false);

// How one configuration is launched (standard: its S = QKᵀ kernel), read from the compiled kernel.
struct LaunchInfo {
  int threads_per_cta = 0;
  int registers_per_thread = 0;
  int smem_bytes_per_cta = 0;  // dynamic + static
  long long ctas = 0;          // grid size
  int ctas_per_sm = 0;         // cudaOccupancyMaxActiveBlocksPerMultiprocessor
  bool kv_descending = false;  // flash2: K/V blocks visited from the last one down
};
LaunchInfo launch_info(Algo algo, const AttentionProblem& problem, Blocks blocks, bool kv_descending = false);

// Kernel names as the profiler shows them (regex fragments), for ncu filters.
const char* kernel_name_pattern(Algo algo);

}  // namespace hbmlab::gpu
