// The cycle-approximate timing engine: the kernels an algorithm launches, their CTAs in waves on
// the SMs, an L2 at tile granularity and HBM shared by all SMs. simulate() calls run_engine();
// `hbmlab simulate --timeline trace.json` writes the timeline for chrome://tracing or Perfetto.
//
// The model, step by step: each SM keeps its own clock. In one step of an SM every CTA resident
// on it carries out one phase of its program (a phase = the loads of one K_j, V_j or tile, the
// compute on it and any stores). A step lasts as long as its busiest resource needs: the SM's
// tensor-core and non-matmul FLOPs over its share of the rates, its SRAM bytes over SRAM
// bandwidth, memory latency (Little's law: bytes × latency over the bytes the SM keeps in flight),
// and its DRAM and SM↔L2 bytes over its fair share of HBM and L2 bandwidth (the total over the SMs
// that have work). A CTA whose loads do not overlap its compute (its first phase, or every phase
// of a kernel that does not double-buffer) instead waits for its loads — latency + its own bytes at
// that share, or its window's round trips if those take longer — and then works. The SM with the earliest clock steps next, so L2 sees accesses in
// time order.
// A finished CTA frees its slot and the next CTA of the grid (blockIdx.x fastest) takes it on that
// SM. Kernels run one after another; L2 contents carry over.
//
// Approximated: bandwidth is split evenly among busy SMs (an SM that needs less leaves its share
// unused); CTAs on one SM step together; L2 as in l2.hpp. Exact: every CTA of every (batch, head)
// is replayed, but the programs are built once per kernel and shared by all B·H instances.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/engine/counters.hpp"
#include "sim/spec/gpu_spec.hpp"

namespace hbmlab {

// [SECTION] Launch plans: what each CTA of a kernel does

// One tile moved between an SM and memory.
struct TileAccess {
  Tensor tensor = Tensor::Q;
  bool store = false;
  std::int32_t tile = 0;          // index of the tile within its tensor (per instance)
  std::int64_t bytes = 0;         // bytes the kernel asks for
  std::int64_t sector_bytes = 0;  // the same, rounded up to whole 32-byte sectors per contiguous run
  std::int64_t paper_bytes = 0;   // what the paper's model charges (0 for a GEMM operand re-read)
};

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
  std::int64_t smem_bytes_per_cta = 0;
  std::int64_t threads_per_cta = 128;
  std::int64_t registers_per_thread = 0;  // 0: unknown, registers do not limit occupancy
  bool double_buffered = true;            // the next phase's loads are in flight during this compute
  bool library_gemm = false;              // tensor rate × gemm_efficiency instead of matmul_efficiency
  bool matmul_on_fp32_units = false;      // matmuls as scalar FMAs (non-matmul rate), not on tensor cores
  std::int64_t bytes_in_flight_per_cta = 0;  // 0: the SM's cap; else what the CTA's load loop keeps outstanding
  // A CTA that waits for its loads (not double-buffered) then works through its phase: its FLOPs,
  // or, when `sram_bound_work`, its own shared-memory traffic at most at `sram_fraction_per_cta`
  // of the SM's SRAM bandwidth (its warps keep too few shared-memory loads in flight for more);
  // plus a fixed chain of barriers and reductions that no rate above sees.
  bool sram_bound_work = false;
  double sram_fraction_per_cta = 1.0;
  double phase_latency_cycles = 0;
  double cta_overhead_cycles = 0;  // once per CTA, before its first phase's work: prologue and epilogue
  std::int64_t ctas() const { return static_cast<std::int64_t>(programs.size()) * instances; }
};

// How a real kernel was launched, when it differs from hbmlab's defaults (e.g. PyTorch's
// FlashAttention-2 build: Br×Bc 128×128, 128 threads, 255 registers, K/V blocks in descending order).
struct LaunchOverride {
  std::optional<std::int64_t> threads_per_cta, registers_per_thread, smem_bytes_per_cta;
  bool kv_descending = false;  // flash2: visit K_j, V_j from the last block down, as FlashAttention-2's kernel does
  // Model hbmlab's own CUDA kernels (gpu/) as they are written: standard with the recorded Br×Bc tiles
  // and 128-thread CTAs, flash1 with fp32 FMAs fed from shared memory and element-wise loads.
  bool hbmlab_kernels = false;
};

struct EngineOptions {
  bool l2_enabled = true;  // off: the paper's model, every load and store reaches HBM as counted
  bool record_timeline = false;
  std::int64_t sram_bytes_per_sm = 0;     // 0: the GPU's
  std::int64_t sram_bytes_per_block = 0;  // 0: the GPU's
  LaunchOverride launch;
};

std::vector<KernelPlan> plan_kernels(Algo algo, const AttentionProblem& problem, Blocks blocks,
                                     const GpuSpec& gpu, const EngineOptions& options);

// [SECTION] Results

struct TensorMemory {
  std::int64_t sm_read_bytes = 0, sm_write_bytes = 0;  // SM↔L2 requests (sectors)
  std::int64_t read_hit_bytes = 0;
  std::int64_t dram_read_bytes = 0, dram_write_bytes = 0;
};

struct KernelTiming {
  std::string name, overlap;
  std::int64_t ctas = 0, ctas_per_sm = 0, waves = 0;
  std::string occupancy_limit;  // "SRAM", "threads", "registers" or "CTA cap"
  std::int64_t smem_bytes_per_cta = 0, threads_per_cta = 0, registers_per_thread = 0;
  bool double_buffered = false;
  std::int64_t rounds = 0;  // SM steps
  double start_s = 0, time_s = 0;
  // The kernel's time (less launch overhead) split by which resource limited the SMs' steps.
  double bound_dram_s = 0, bound_l2_s = 0, bound_compute_s = 0, bound_latency_s = 0, bound_sram_s = 0;
  std::int64_t dram_read_bytes = 0, dram_write_bytes = 0;
};

// A CTA's stay on an SM, for the per-SM timeline.
struct CtaSpan {
  std::int32_t kernel = 0, sm = 0, slot = 0;
  std::int64_t cta = 0;  // linear block index in the grid
  double start_s = 0, end_s = 0;
};

// Bandwidth over one stretch of time (one or more rounds merged).
struct BandwidthSample {
  double start_s = 0, end_s = 0;
  std::int64_t dram_read_bytes = 0, dram_write_bytes = 0, l2_bytes = 0;
  double dram_gbps() const { return end_s > start_s ? double(dram_read_bytes + dram_write_bytes) / (end_s - start_s) / 1e9 : 0; }
};

struct Timeline {
  std::vector<CtaSpan> ctas;          // at most kMaxSpans; `dropped_spans` says how many were left out
  std::vector<BandwidthSample> hbm;   // equal bins from time 0, at most kMaxSamples (bins widen as needed)
  std::int64_t dropped_spans = 0;
  static constexpr std::size_t kMaxSpans = 200000, kMaxSamples = 4096;
};

struct EngineResult {
  bool l2_enabled = true;
  double predicted_s = 0;
  double hbm_s = 0;      // DRAM bytes over sustained HBM bandwidth: how long HBM is busy
  double compute_s = 0;  // FLOPs over the whole GPU's sustained rates
  double l2_s = 0;       // SM↔L2 bytes over L2 bandwidth
  std::vector<KernelTiming> kernels;
  std::array<TensorMemory, kTensorCount> memory{};  // by Tensor
  std::int64_t dram_dirty_at_end_bytes = 0;  // stores still in L2 when the last kernel ends
  std::int64_t matmul_flops = 0, non_matmul_flops = 0;
  Timeline timeline;

  std::int64_t sm_read_bytes() const;
  std::int64_t sm_write_bytes() const;
  std::int64_t read_hit_bytes() const;
  std::int64_t dram_read_bytes() const;
  std::int64_t dram_write_bytes() const;
};

// Checks the GPU's numbers the engine needs; InputError naming `origin: numbers.key` otherwise.
void validate_for_engine(const GpuSpec& gpu);

EngineResult run_engine(Algo algo, const AttentionProblem& problem, Blocks blocks, const GpuSpec& gpu,
                        const EngineOptions& options);
EngineResult run_plans(const std::vector<KernelPlan>& plans, const GpuSpec& gpu, const EngineOptions& options);

// Chrome trace format (chrome://tracing, Perfetto): one track per SM slot, kernels on their own
// track, HBM bandwidth as a counter.
std::string timeline_chrome_trace(const EngineResult& result, const GpuSpec& gpu);

}  // namespace hbmlab
