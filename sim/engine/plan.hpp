// Launch plans: the kernels an algorithm launches and what each CTA of them does, phase by phase
// (the tiles it moves, the FLOPs it computes). Each room builds its plans (Algorithm::plan_kernels);
// the timing engine (timing.hpp) replays them through SMs, L2 and HBM.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/algo/step.hpp"
#include "sim/algo/warp_layout.hpp"
#include "sim/spec/gpu_spec.hpp"

namespace hbmlab {

// One tile moved between an SM and memory.
struct TileAccess {
  Tensor tensor = Tensor::Q;
  bool store = false;
  std::int32_t tile = 0;          // index of the tile within its tensor (per instance)
  std::int64_t bytes = 0;         // bytes the kernel asks for
  std::int64_t sector_bytes = 0;  // the same, rounded up to whole 32-byte sectors per contiguous run
  std::int64_t paper_bytes = 0;   // what the paper's model charges (0 for a GEMM operand re-read)
  // An fp32 add into the tile where it lies in the L2 (red.global.add: the backward's dQ_i), counted
  // as a read and a write of the tile; the SM does not wait for it, and with the preset's reduction
  // rate the L2 serves it at that rate (KernelPlan::reduction_requests) instead of as a load and store.
  bool reduction = false;
  // A row of S or P across its block row (standard's softmax, one CTA a row): row `slice_row` of the
  // `slice_rows` rows of every tile `tile`, `tile` + 1, … that another kernel stores or loads whole,
  // `slice_col_bytes` of each (the last may be narrower); 0 rows: an access of the tile itself.
  std::int16_t slice_row = 0, slice_rows = 0, slice_col_bytes = 0;
};

// How a kernel's warps issue their fp32 reductions into the L2: one 32-byte sector per request (a
// warp adds an MMA fragment, 8 rows of 32 bytes) or whole 128-byte lines (32 consecutive floats or more).
enum class ReductionRequests : std::uint8_t { sectors, lines };

struct CtaPhase {
  std::int32_t first_access = 0, access_count = 0;
  std::int64_t matmul_flops = 0, non_matmul_flops = 0;
  std::int64_t sram_bytes = 0;  // bytes through shared memory: tiles loaded and stored, operands read
};

struct CtaProgram {
  std::int32_t first_phase = 0, phase_count = 0;
};

// One kernel. `programs` are the CTAs of one (batch, head) instance in blockIdx.x order; the grid
// is programs × instances with blockIdx.x fastest, and every instance runs the same programs.
struct KernelPlan {
  std::string name;            // "flash2 forward", "GEMM S = QKᵀ"
  std::string overlap;         // what is assumed about loads overlapping compute, in words
  std::vector<TileAccess> accesses;
  std::vector<CtaPhase> phases;
  std::vector<CtaProgram> programs;
  std::int64_t instances = 1;
  // Consecutive instances (query heads b·H + h) that share one K/V head (GQA: H/HKV): their K and V
  // tiles are the same bytes, so the L2 keys them by K/V head, b·HKV + h/(H/HKV) = instance / kv_group.
  std::int64_t kv_group = 1;
  std::int64_t smem_bytes_per_cta = 0;
  std::int64_t threads_per_cta = 128;
  std::int64_t registers_per_thread = 0;  // 0: unknown, registers do not limit occupancy
  bool double_buffered = true;            // the next phase's loads are in flight during this compute
  // Persistent CTAs (one per SM slot walks the grid's tiles in turn): the next tile's first loads are
  // in flight under the current tile's last phases, so only a slot's first tile waits for them.
  bool persistent = false;
  // A persistent grid that walks the tiles in a fixed order rather than taking the next one as a slot
  // frees (gpu/flash3.cu's v4): `ctas` CTAs, and tile position t is program t mod programs of instance
  // t / programs (with `reverse_odd_instances`, program programs − 1 − t mod programs for odd
  // instances). CTA c takes positions run·c … run·c + run − 1, then the same a grid's worth
  // (run·ctas) on, and so on; it stays on its SM slot, and a slot whose CTA has no position left
  // takes a CTA not yet started (more CTAs than slots), or stays empty. ctas = 0: the hardware's
  // queue, the next tile to the first free slot.
  struct StaticTiles {
    std::int64_t ctas = 0, run = 1;
    bool reverse_odd_instances = false;
  } static_tiles;
  bool library_gemm = false;              // a library GEMM: the tensor rate × gemm_efficiency, not the pipes
  bool matmul_on_fp32_units = false;      // matmuls as scalar FMAs on the FP32 pipe, not on tensor cores
  std::int64_t bytes_in_flight_per_cta = 0;  // 0: the SM's cap; else what the CTA's load loop keeps outstanding
  // A CTA that waits for its loads (not double-buffered) then works through its phase: its FLOPs,
  // or, when `sram_bound_work`, its own shared-memory traffic at the share of the SM's bandwidth one
  // CTA reaches (GpuSpec::fp32_matmul_sram_share_per_cta: its warps keep too few shared-memory loads
  // in flight for more) in place of its GEMMs, and then what its warps wait out after them
  // (OnChipCounts' latency path).
  bool sram_bound_work = false;
  // The CTAs resident on an SM run their phases in step: they start together and share the pipe that
  // serves shared memory evenly, so their wavefronts go through it together at its full rate, and then
  // the longest of what a CTA waits out beside them (its loads' round trips, its softmax's chain,
  // barriers) follows (flash1, standard's qk_kernel and softmax_kernel: docs/design.md, "CTAs in step").
  bool ctas_in_step = false;
  // A kernel without matmuls whose SM was measured at the GPU's clock_mhz, not at pipe_clock_mhz
  // (standard's softmax_kernel: 1,978–1,991 MHz under Nsight Compute, gpu/bench/standard_ncu.sh).
  bool holds_gpu_clock = false;
  // Its global loads go to registers and its stores leave from them (no cp.async, no TMA), so their
  // bytes take the SM's LSU data pipe beside its shared-memory wavefronts.
  bool global_via_registers = false;
  // Measured on the kernel itself (gpu/bench/decode_latency.sh), not fitted: SM clocks of a chain that no
  // pipe above sees, added to what a CTA that waits for its loads then works: once per CTA with its
  // first phase (its prologue and epilogue), and once per phase.
  double measured_cta_cycles = 0, measured_phase_cycles = 0;
  // Measured on the kernel itself with one CTA an SM (gpu/bench/flash2_residency.sh), not fitted: SM
  // clocks a phase that one CTA's warps wait out beyond the pipes and latencies above (their instruction
  // order's waits on ldmatrix and exp results, dispatch, instruction fetch), at the clock its pipes run
  // at. It lengthens the CTA's own chain, not the pipes its work takes: other CTAs issue meanwhile.
  double measured_issue_cycles = 0;
  OnChipCounts on_chip;  // shared memory ↔ registers and warp instructions, from the kernel's warp layout
  ReductionRequests reduction_requests = ReductionRequests::lines;  // for its accesses marked `reduction`
  // A wgmma kernel whose consumer warpgroups meet at a barrier every phase and run it in order: their
  // products, waiting on them (`wgmma_waits` times a phase), the FP32 work between (which then hides
  // under no GEMM), their reductions. 0: the warpgroups overlap their FP32 work with their GEMMs.
  std::int32_t wgmma_waits = 0;
  // The grid's tiles, a CTA program of an instance each: as many CTAs unless the kernel is persistent.
  std::int64_t tiles() const { return static_cast<std::int64_t>(programs.size()) * instances; }
};

// How a real kernel was launched, when it differs from hbmlab's defaults (e.g. PyTorch's
// FlashAttention-2 build: Br×Bc 128×128, 128 threads, 255 registers, K/V blocks in descending order).
struct LaunchOverride {
  std::optional<std::int64_t> threads_per_cta, registers_per_thread, smem_bytes_per_cta;
  bool kv_descending = false;  // visit K_j, V_j from the last block down, as FlashAttention-2's kernel does
  // The grid as a record says it was launched: fewer CTAs than the plan's CTA programs means CTAs
  // that walk several tiles each (persistent, gpu/flash3.cu's v4); as many, one CTA per tile.
  std::optional<std::int64_t> ctas;
  // Model hbmlab's own CUDA kernels (gpu/) as they are written, where they differ from the
  // reference launch (standard's recorded tiles, flash1's fp32 FMAs fed from shared memory).
  bool hbmlab_kernels = false;
  // Split-KV combine: each CTA loads and adds one split's O_part at a time, waiting on each, as
  // PyTorch's FlashAttention-2 combine does (one memory round trip per split), instead of loading
  // every split's partial at once.
  bool combine_split_by_split = false;
  // PyTorch's FlashAttention-2 decode kernels (flash_fwd_splitkv_kernel and its combine) as measured on
  // the GPU: the split kernel's CTAs carry that kernel's own measured chain (KernelPlan::measured_cta_cycles).
  bool pytorch_decode_kernels = false;
};

// Applies the override's threads, registers and shared memory to one kernel.
void apply_launch(KernelPlan& plan, const LaunchOverride& launch);

struct EngineOptions {
  bool l2_enabled = true;  // off: the paper's model, every load and store reaches HBM as counted
  // Each kernel starts with an empty L2, as Nsight Compute's --cache-control all runs a launch sequence
  // (it flushes the L2 before every profiled kernel: a combine then reads the partials from DRAM).
  bool l2_flushed_between_kernels = false;
  bool record_timeline = false;
  std::int64_t sram_bytes_per_sm = 0;     // 0: the GPU's
  std::int64_t sram_bytes_per_block = 0;  // 0: the GPU's
  // Where sram_bytes_per_block came from, as an error names it: an option ("--sram-bytes") or a key
  // ("scenarios/gpus/h100.toml: numbers.sram_bytes_per_sm"); empty: the GPU's sram_bytes_per_block.
  std::string sram_source;
  LaunchOverride launch;

  // The SRAM an SM has and one CTA may use: the options' where given (--sram-bytes, a sweep's point),
  // else the GPU's. The rooms and the engine read them here, so that both hold a CTA to one limit.
  std::int64_t sram_bytes_per_sm_of(const GpuSpec& gpu) const {
    return sram_bytes_per_sm > 0 ? sram_bytes_per_sm : gpu.sram_bytes_per_sm;
  }
  std::int64_t sram_bytes_per_block_of(const GpuSpec& gpu) const {
    return sram_bytes_per_block > 0 ? sram_bytes_per_block : gpu.sram_bytes_per_block;
  }
  std::string sram_bytes_per_block_source(const GpuSpec& gpu) const {
    return !sram_source.empty() ? sram_source : gpu.origin + ": numbers.sram_bytes_per_block";
  }
};

// Builds a KernelPlan CTA by CTA. As a StepSink it takes a room's step stream directly, starting a
// new phase wherever a load follows compute or a store ("bring tiles in, work on them, write
// results"); rooms that shape their CTAs themselves call begin_program, begin_phase, access and
// compute. `Tc` numbers the S_ij and P_ij tiles; `sector` is the L2's sector size.
class PlanBuilder final : public StepSink {
public:
  PlanBuilder(KernelPlan& plan, const AttentionProblem& problem, std::int64_t Tc, std::int64_t sector)
      : plan_(plan), p_(problem), Tc_(Tc), sector_(sector) {}

  void begin_program();
  void begin_phase();
  // A load or store step; `paper_bytes` is what the paper's model charges for it.
  void access(const Step& s, std::int64_t paper_bytes);
  void compute(const Step& s);
  void on_step(const Step& s) override;

private:
  KernelPlan& plan_;
  const AttentionProblem& p_;
  std::int64_t Tc_, sector_;
  bool open_ = false, worked_ = false;
};

}  // namespace hbmlab
