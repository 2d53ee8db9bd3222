// The cycle-approximate timing engine: the kernels an algorithm launches, their CTAs in waves on
// the SMs, an L2 at tile granularity and HBM shared by all SMs. simulate() calls run_engine();
// `hbmlab simulate --timeline trace.json` writes the timeline for chrome://tracing or Perfetto.
//
// The model, step by step: each SM keeps its own clock. In one step of an SM every CTA resident
// on it carries out one phase of its program (a phase = the loads of one K_j, V_j or tile, the
// compute on it and any stores). A step lasts as long as its busiest resource needs: the SM's
// compute (every kernel over the SM's measured pipe rates: with exact on-chip counts its MMAs,
// shared-memory loads, exps, FP32 operations and latencies; one CTA's phase in the order its warps
// run it, the resident CTAs' issued work (MMAs, exps, FP32) added up, every CTA's shared-memory bytes
// against the SM's bandwidth, the counted instructions against its issue rate, the dQ
// adds (red.global.add) through the SM's memory path, which one CTA's warps wait out beyond its queue —
// docs/design.md#the-sms-pipes; a kernel without counts, its FLOPs alone; a library GEMM at
// gemm_efficiency of the tensor rate), its SRAM bytes over SRAM
// bandwidth, memory latency (Little's law: bytes × latency over the bytes the SM keeps in flight, each
// CTA's at most hbm_bytes_in_flight_per_cta, the SM's at most hbm_bytes_in_flight_per_sm; the latency
// grows with the bytes in flight over the whole GPU where the preset measured it:
// hbm_loaded_latency_sharpness, docs/design.md "HBM under load: the loaded latency"; HBM's peak
// is at most what the threads of the CTAs in flight move: hbm_load_gbps_per_thread, "HBM and the
// threads that read it"),
// and its DRAM and SM↔L2 bytes over its CTAs' parts of HBM and L2 bandwidth (each CTA in flight over
// the GPU an equal part; a backward's fp32 dQ adds at the L2's measured reduction rate, added to its loads'
// and stores' time: docs/design.md#the-backwards-dq-reductions). A CTA whose loads do not overlap its
// compute (its first phase, unless it is a persistent CTA's next tile, or every phase of a kernel
// that does not double-buffer) instead waits for its loads — latency + its own bytes at
// one CTA's part, or its window's round trips if those take longer — and then works. The SM with the earliest clock steps next, so L2 sees accesses in
// time order.
// A finished CTA frees its slot and the next CTA of the grid (blockIdx.x fastest) takes it on that
// SM; in the last wave of a kernel whose CTAs (at most 3 an SM) share the SM's pipes or shared
// memory, slots freed together take the CTAs left one an SM in turn, as measured (timing.cpp,
// Replay::refill_last_wave). Kernels run one after another; L2 contents carry over.
//
// Approximated: bandwidth is split evenly among the CTAs in flight (a CTA that needs less leaves its
// part unused; a CTA holds its part until its last step ends, so the CTAs still working never share
// more than the peak, tail included); CTAs on one SM step together; L2 as in l2.hpp. Exact: every CTA of every (batch, head)
// is replayed, but the programs are built once per kernel and shared by all B·H instances.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/algo/algorithm.hpp"
#include "sim/engine/counters.hpp"
#include "sim/engine/plan.hpp"
#include "sim/spec/gpu_spec.hpp"

namespace hbmlab {

// [SECTION] Launch plans: what each CTA of a kernel does (sim/engine/plan.hpp, built by the rooms)

std::vector<KernelPlan> plan_kernels(Algo algo, const AttentionProblem& problem, Blocks blocks, const GpuSpec& gpu,
                                     const EngineOptions& options);

// [SECTION] Results

struct TensorMemory {
  std::int64_t sm_read_bytes = 0, sm_write_bytes = 0;  // SM↔L2 requests (sectors)
  std::int64_t read_hit_bytes = 0;
  std::int64_t dram_read_bytes = 0, dram_write_bytes = 0;
};

struct KernelTiming {
  std::string name, overlap;
  // CTAs launched, and the tiles (CTA programs × instances) they work through: as many as the CTAs, or
  // more when persistent CTAs walk them (KernelPlan::persistent, static_tiles). Waves are ⌈tiles / slots⌉.
  std::int64_t ctas = 0, tiles = 0, ctas_per_sm = 0, waves = 0;
  bool persistent() const { return ctas < tiles; }  // its CTAs walk more tiles than there are CTAs
  std::string occupancy_limit;  // "SRAM", "threads", "registers" or "CTA cap"
  std::int64_t smem_bytes_per_cta = 0, threads_per_cta = 0, registers_per_thread = 0;
  bool double_buffered = false;
  std::int64_t rounds = 0;  // SM steps
  double start_s = 0, time_s = 0;
  // The SM clock its pipes ran at (GpuSpec::pipe_clock_mhz, or clock_mhz for a kernel that issues
  // nothing to the tensor pipe: KernelPlan::holds_gpu_clock, matmul_on_fp32_units).
  double sm_clock_mhz = 0;
  // The kernel's time (less launch overhead) split by which resource limited the SMs' steps.
  double bound_dram_s = 0, bound_l2_s = 0, bound_compute_s = 0, bound_latency_s = 0, bound_sram_s = 0;
  std::int64_t dram_read_bytes = 0, dram_write_bytes = 0;
  OnChipCounts on_chip;  // the plan's (KernelPlan::on_chip)
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

// Throws InputError naming the option to change when one instance's plan or the replay of every
// instance is larger than the timing engine takes in one run (kMaxPlanPairs, kMaxEngineTotalPairs in
// sim/common/limits.hpp). run_engine() checks it before planning; callers that run many points check
// every point first. `blocks_chosen`: hbmlab chose the blocks, so the error names --seq-len first
// (check_countable).
void check_engine_size(Algo algo, const AttentionProblem& problem, Blocks blocks, bool blocks_chosen = false);

EngineResult run_engine(Algo algo, const AttentionProblem& problem, Blocks blocks, const GpuSpec& gpu,
                        const EngineOptions& options);
EngineResult run_plans(const std::vector<KernelPlan>& plans, const GpuSpec& gpu, const EngineOptions& options);

// Chrome trace format (chrome://tracing, Perfetto): one track per SM slot, kernels on their own
// track, HBM bandwidth as a counter.
std::string timeline_chrome_trace(const EngineResult& result, const GpuSpec& gpu);

}  // namespace hbmlab
