// Running one kernel configuration on the GPU: buffers for a problem, fresh random inputs, the
// check against sim/numerics' fp64 reference (with written tolerances), and CUDA-event timing.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "gpu/cuda_util.hpp"
#include "gpu/kernels.hpp"
#include "sim/numerics/attention.hpp"

namespace hbmlab::gpu {

struct DeviceInfo {
  std::string name;
  int sm_count = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t smem_per_block_optin = 0;
  std::string driver, runtime;
};
DeviceInfo device_info();
// Number of CUDA devices; 0 (not an error) when there is no GPU or no driver.
int device_count();

// Q, K, V, O and whatever scratch the algorithm's kernel family needs, for one problem; with a
// block mask, the K/V block lists of its grid at `blocks`.
class AttentionBuffers {
 public:
  AttentionBuffers(const AttentionProblem& problem, Algo algo, Blocks blocks);
  DeviceTensors tensors() const;
  Algo algo() const { return algo_; }
  std::int64_t q_elems() const { return q_elems_; }    // B·H·NQ·d (Q and O)
  std::int64_t kv_elems() const { return kv_elems_; }  // B·HKV·N·d (K and V)

 private:
  Algo algo_;
  std::int64_t q_elems_ = 0, kv_elems_ = 0;
  std::array<DeviceBuffer, kTensorCount> buffers_;  // by Tensor
  DeviceBuffer kv_offsets_, kv_blocks_, fallback_, dQ_accum_;
};

// |O − O_ref| ≤ atol + rtol·|O_ref| elementwise: the kernel family's figures and why
// (KernelFamily::tolerance).
inline Tolerance tolerance(Algo algo, Dtype dtype) { return family_of(algo).tolerance(dtype); }

struct CheckResult {
  double max_abs_error = 0;   // max |O − O_ref| over the rows checked
  double worst_ratio = 0;     // max |O − O_ref| / (atol + rtol·|O_ref|): pass when ≤ 1
  bool all_written = true;    // no NaN left from the poisoned output, no infinity
  bool pass = false;
  std::int64_t rows_checked = 0;
  std::int64_t instances_checked = 0;
  std::string note;
};

// Fresh inputs: query heads 0 and B·H−1 (with their K/V heads) from make_inputs(kind, seed), the rest
// uniform random; O poisoned with NaN; one launch; the NQ rows of the two heads compared with
// reference_attention (all rows when NQ ≤ full_rows_max_n, else sample_rows). Inputs are rounded to the dtype first,
// so the reference sees exactly what the kernel sees. kv_descending: see launch().
// A backward room: Q, K, V and dO drawn the same way, the forward's O and L from hbmlab's forward
// kernel of the same algorithm, dQ, dK, dV (and the fp32 dQ accumulator) poisoned with NaN, one
// launch of the backward; dQ, dK and dV of the two heads compared with reference_backward (all rows
// when N ≤ full_rows_max_n; else dQ on sample_rows, and dK, dV on as many sampled keys, summed in
// fp64 over every query with the L and O the forward kernel left).
CheckResult check_kernel(const AttentionProblem& problem, Blocks blocks, bool kv_descending, InputKind kind, std::uint64_t seed,
                         AttentionBuffers& buffers, std::int64_t full_rows_max_n = 1024);

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int reps = 0;
};
// CUDA events around each launch; warm-ups first; with flush_l2 a 256 MiB read (flush_l2())
// between reps, outside the timed region, evicts the 50 MB L2.
Timing time_kernel(const AttentionProblem& problem, Blocks blocks, bool kv_descending, AttentionBuffers& buffers, int reps,
                   int warmup, bool flush_l2);

// Evicts the L2 by reading `scratch` (make it several times the L2): reading leaves only clean
// lines behind, so no write-back of the flush itself lands in the next kernel's DRAM counters
// (a memset would leave ~L2-size of dirty lines to be written back during it).
void flush_l2(const DeviceBuffer& scratch);

// A do-nothing kernel named hbmlab_marker whose grid size tags the profiler's rows (ncu).
void launch_marker(int grid, int block);

// FlashAttention's convention: 4·N²·d·B·H forward, halved when causal; with NQ < N, 4·d·B·H times the
// keys each query row sees. With a block mask, the
// matmul FLOPs of the block pairs the grid at `blocks` keeps (4·rows·cols·d each). The backward:
// 2.5 times the forward's (five N²d products to the forward's two, not counting the recomputed S).
double attention_flops(const AttentionProblem& problem, Blocks blocks = {}, Pass pass = Pass::forward);

}  // namespace hbmlab::gpu
