// hbmlab's CUDA attention kernels, seen from the host. Each kernel family is one .cu file
// (standard.cu, flash1.cu, flash2.cu, flash3.cu, flash_decoding.cu, flash2_backward.cu, flash3_backward.cu) that runs one room of sim/algo: it implements KernelFamily
// with its table of compiled (d, Br, Bc) shapes, the HBM tensors it needs beyond Q, K, V and O, its
// tolerance against the fp64 reference, and what the profiler calls it. One line of dispatch.cu
// lists it. Tensors are row-major, Q and O [B·H][NQ][d], K and V [B·HKV][N][d], in the problem dtype
// (fp16/bf16); S, P (standard) in the dtype; ℓ, m, L, O_part, lse_part in fp32. The backward's dO,
// dQ, dK, dV are [B·H][N][d] in the dtype, D is fp32 like L.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sim/algo/algorithm.hpp"
#include "sim/algo/kernel_tiles.hpp"
#include "sim/numerics/attention.hpp"

namespace hbmlab::gpu {

// The device buffers of one launch, by tensor (null where the family needs none).
struct DeviceTensors {
  std::array<void*, kTensorCount> hbm{};
  unsigned long long* trace = nullptr;  // flash2, optional: start ns, end ns, SM of each CTA, [B·H][Tr][3]
  // With a block mask: the K/V blocks each row block keeps, ascending, as offsets [Tr + 1] into a list
  // (the same for every (batch, head); built from the simulator's BlockGrid, so kernel and model agree).
  const int* kv_offsets = nullptr;
  const int* kv_blocks = nullptr;
  // FlashDecoding++: one flag per (instance, row block) whose splits left the unified max's safe range.
  int* fallback = nullptr;
  // FlashAttention-2's backward: dQ summed over the K/V blocks in fp32, [B·H][N][d], before it is
  // converted to the dtype into Tensor::dQ (the room keys both as dQ; only the kernel needs two buffers).
  float* dQ_accum = nullptr;

  template <class T = void>
  T* at(Tensor t) const { return static_cast<T*>(hbm[static_cast<int>(t)]); }
  void set(Tensor t, void* p) { hbm[static_cast<int>(t)] = p; }
};

// How one configuration is launched (standard: its S = QKᵀ kernel), read from the compiled kernel.
struct LaunchInfo {
  int threads_per_cta = 0;
  int registers_per_thread = 0;
  int smem_bytes_per_cta = 0;  // dynamic + static
  long long ctas = 0;          // grid size
  int ctas_per_sm = 0;         // cudaOccupancyMaxActiveBlocksPerMultiprocessor
  bool kv_descending = false;  // K/V blocks visited from the last one down
};

// Launches one compiled shape in one dtype, or, with `info`, only describes the launch.
using LaunchFn = void (*)(const AttentionProblem& problem, bool kv_descending, const DeviceTensors& t,
                          cudaStream_t stream, LaunchInfo* info);

// A row of a family's shape table: (d, Br, Bc) and its launch in fp16 and bf16. The first row for
// a d is that d's default (`measure --blocks default`).
struct CompiledShape {
  int d = 0, Br = 0, Bc = 0;
  LaunchFn fp16 = nullptr, bf16 = nullptr;
};

// A family's shape table, one row for each tile of its table in sim/algo/kernel_tiles.hpp (the one
// table of compiled shapes, which the rooms read too), in its order: Row::template row<d, Br, Bc>()
// instantiates that tile's kernels. So the shapes `measure` runs are the shapes `simulate
// --hbmlab-kernels` models, with no second list to keep in step.
template <const auto& kTiles, class Row, std::size_t... I>
constexpr std::array<CompiledShape, sizeof...(I)> shape_table(std::index_sequence<I...>) {
  return {Row::template row<kTiles[I].d, kTiles[I].Br, kTiles[I].Bc>()...};
}
template <const auto& kTiles, class Row>
constexpr auto shape_table() {
  return shape_table<kTiles, Row>(std::make_index_sequence<std::size(kTiles)>{});
}

// An HBM tensor a family needs beyond Q, K, V and O.
struct ScratchTensor {
  Tensor tensor = Tensor::lse;
  std::int64_t bytes = 0;
};

// |O − O_ref| ≤ atol + rtol·|O_ref| elementwise.
struct Tolerance {
  double atol = 0, rtol = 0;
};

class KernelFamily {
public:
  virtual ~KernelFamily() = default;
  virtual Algo algo() const = 0;  // the room these kernels run
  virtual std::span<const CompiledShape> shapes() const = 0;
  virtual std::vector<ScratchTensor> scratch(const AttentionProblem& problem) const = 0;
  // fp16 keeps 11 significant bits (unit roundoff u = 4.9e-4), bf16 8 (3.9e-3). The output is a
  // convex combination of V rows (|O| ≲ 1.7 for the test inputs); the kernels round P̃ to the dtype
  // before the P·V product and round O once at the end: a few unit roundoffs, 8u by default.
  virtual Tolerance tolerance(Dtype dtype) const;
  // A known, intended difference from the fp64 reference on an input kind ("" for none): the check
  // still runs and reports, but does not fail.
  virtual std::string intended_difference(InputKind) const { return {}; }
  virtual const char* profiler_names() const = 0;  // kernel names as ncu shows them (a regex)
  virtual std::int64_t default_max_n() const = 0;  // `hbmlab measure --max-n-NAME`
  virtual const char* launch_note() const { return nullptr; }  // what the recorded launch shape describes
  virtual bool takes_block_mask() const { return false; }     // --block-mask (DeviceTensors::kv_offsets)
  virtual bool takes_query_len() const { return false; }      // --query-len: NQ < N (decoding)
  virtual bool takes_kv_heads() const { return false; }       // --kv-heads: HKV < H (GQA, MQA)
  virtual std::int64_t fallback_flags(const AttentionProblem&) const { return 0; }  // DeviceTensors::fallback
  virtual std::int64_t dq_accumulator_bytes(const AttentionProblem&) const { return 0; }  // DeviceTensors::dQ_accum

  // Enqueues the shape's kernels on the stream, or fills `info` (nothing launched); false when the
  // shape is not compiled.
  bool launch(const AttentionProblem& problem, Blocks blocks, bool kv_descending, const DeviceTensors& t,
              cudaStream_t stream, LaunchInfo* info = nullptr) const;
};

// Every family, in the registry's order (gpu/dispatch.cu), and the one running a room.
std::span<const KernelFamily* const> kernel_families();
const KernelFamily& family_of(Algo algo);  // throws std::invalid_argument when the room has no kernel

struct KernelShape {
  Algo algo = default_algo();
  Dtype dtype = Dtype::fp16;
  int d = 64;
  Blocks blocks;
};

// Shapes compiled into this build (a few per algorithm and d; see each family's table).
std::vector<KernelShape> compiled_shapes();
bool is_compiled(const KernelShape& shape);
// The default blocks for an algorithm, dtype and d (the first compiled shape).
Blocks default_blocks(Algo algo, Dtype dtype, int d);

// Extra bytes the algorithm needs beyond Q, K, V, O (S and P, ℓ and m, L).
std::int64_t scratch_bytes(Algo algo, const AttentionProblem& problem);

// Enqueues the whole forward pass (three kernels for standard) on the stream; throws CudaError
// or std::invalid_argument for a shape that is not compiled or a missing tensor. kv_descending
// (rooms with a K/V order): each CTA visits K_j, V_j from its last block down, as PyTorch's
// FlashAttention-2 does.
void launch(Algo algo, const AttentionProblem& problem, Blocks blocks, const DeviceTensors& t, cudaStream_t stream,
            bool kv_descending = false);
LaunchInfo launch_info(Algo algo, const AttentionProblem& problem, Blocks blocks, bool kv_descending = false);

// Kernel names as the profiler shows them (regex fragments), for ncu filters.
const char* kernel_name_pattern(Algo algo);

}  // namespace hbmlab::gpu
