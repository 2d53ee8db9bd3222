// GpuSpec: the hardware numbers hbmlab models, each named, with its unit and its source.
// Presets live in scenarios/gpus/*.toml and are embedded in the binary; `hbmlab presets` lists them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hbmlab {

// One number as written in a preset file.
struct Quantity {
  std::string key;     // e.g. "sram_bytes_per_sm"
  double value = 0;
  std::string unit;    // e.g. "bytes"
  std::string source;  // where the number comes from
};

struct GpuSpec {
  std::string name;          // preset id, e.g. "a100-40gb"
  std::string display_name;  // e.g. "NVIDIA A100-SXM4-40GB"
  std::string origin;        // where it was loaded from, for messages

  std::int64_t sm_count = 0;
  double clock_mhz = 0;
  std::int64_t sram_bytes_per_sm = 0;     // shared memory a CTA set on one SM may use
  std::int64_t sram_bytes_per_block = 0;  // shared memory one CTA may use
  double sram_bytes_per_cycle_per_sm = 0;
  std::int64_t max_ctas_per_sm = 0;
  std::int64_t max_threads_per_sm = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t l2_line_bytes = 0;
  std::int64_t l2_sector_bytes = 0;
  double hbm_bandwidth_gbps = 0;  // GB/s, 1e9 bytes per second
  double hbm_latency_ns = 0;
  double tensor_tflops = 0;       // dense fp16/bf16 tensor-core rate
  double non_matmul_tflops = 0;   // fp32 rate for exp, max, sums and rescales

  // Timing engine (sim/engine/timing.hpp). Peak rates above are datasheet figures; the
  // efficiencies below say what fraction of each a library GEMM and a device copy sustain.
  std::int64_t l2_effective_bytes = 0;      // the L2 the engine models, split evenly over l2_partitions
  std::int64_t l2_ways = 0;                 // associativity (l2_effective_bytes / l2_line_bytes: fully associative)
  std::int64_t l2_partitions = 0;           // 2: two partitions, each caching for the SMs beside it (0, 1: one L2)
  // The most dirty bytes the L2 holds: past it, the oldest dirty lines are written back and stay,
  // clean (0: no limit, a dirty line goes back only as it is evicted).
  std::int64_t l2_dirty_limit_bytes = 0;
  std::int64_t l2_partition_first_sms = 0;  // with 2: the engine's first this many SMs sit by partition 0 (a launch's first CTAs)
  std::int64_t l2_partition_run_sms = 0;    // … the rest by partition 1, 0, 1, … in runs of this many (PartitionedL2::side_of_sm)
  double l2_bandwidth_gbps = 0;             // SM↔L2 bandwidth, all SMs together
  double l2_latency_ns = 0;                 // load-to-use latency of an L2 hit
  std::int64_t hbm_bytes_in_flight_per_sm = 0;  // most load bytes one SM keeps outstanding
  std::int64_t hbm_bytes_in_flight_per_cta = 0; // most one CTA keeps outstanding (0: the SM's)
  // HBM's latency under load: with W bytes in flight over the GPU, a round trip takes
  // latency × (1 + x^p)^(1/p), x = W / (latency × peak × hbm_efficiency), p this number (0: the
  // idle latency whatever is in flight). The GPU then delivers the soft minimum of W / latency and
  // its peak (docs/design.md, "HBM under load").
  double hbm_loaded_latency_sharpness = 0;
  // What the threads reading HBM let it deliver: every SM holding n threads of the CTAs in flight,
  // at most the soft minimum, with this exponent, of its peak × hbm_efficiency and
  // sm_count × n × this rate (0: the peak however few the threads; docs/design.md, "HBM and the
  // threads that read it").
  double hbm_load_gbps_per_thread = 0;
  double hbm_thread_ceiling_sharpness = 0;
  std::int64_t registers_per_sm = 0;        // 32-bit registers per SM (limits CTAs per SM)
  double kernel_overhead_ns = 0;            // launch and drain cost of one kernel
  double event_timing_overhead_ns = 0;      // what CUDA events around a launch sequence add to it (0: not measured)
  double kernel_gap_ns = 0;                 // between two kernels of a stream, beyond their ncu durations (0: not measured)
  double gemm_efficiency = 0;               // sustained / peak tensor-core rate in library GEMMs (cuBLAS)
  double hbm_efficiency = 0;                // sustained / peak HBM bandwidth

  // The SM's pipes, per SM clock, each measured by a microbenchmark (gpu/bench/pipes.cu). The timing
  // engine times every kernel from them and asks for all but the issue rate; a preset for counts
  // alone may leave them out. Shared-memory bandwidth is sram_bytes_per_cycle_per_sm above.
  double mma_sync_flops_per_cycle_per_sm = 0;    // mma.sync m16n8k16 fp16→fp32, enough warps
  double mma_sync_flops_per_cycle_per_warp = 0;  // the same from one warp alone (8 independent MMAs)
  double wgmma_flops_per_cycle_per_sm = 0;       // wgmma m64nNk16 fp16→fp32, operands in shared memory
  double ex2_per_cycle_per_sm = 0;               // ex2.approx.f32 results (the exponent unit)
  double fp32_fma_flops_per_cycle_per_sm = 0;    // fma.rn.f32, 2 FLOPs each
  double issue_per_cycle_per_sm = 0;             // warp instructions issued
  double pipe_clock_mhz = 0;                     // the SM clock those pipes ran at under load
  double wgmma_wait_cycles = 0;                  // a warpgroup waiting on its wgmma products: the tensor pipe's drain
  // The SM's latencies, per SM clock (gpu/bench/latency.cu); optional, 0 where not measured: an
  // mma.sync m16n8k16 whose accumulator the next one adds into, an ldmatrix.x4 whose registers an
  // MMA takes, a __syncthreads of 8 warps with nothing between.
  double mma_sync_latency_cycles = 0;
  double ldmatrix_latency_cycles = 0;
  double barrier_cycles = 0;
  // And those of a kernel that computes on the FP32 pipe from shared memory (hbmlab's flash1): an
  // fma.rn.f32 on the accumulator of the one before, an ld.shared whose value the next instruction
  // uses, a shfl.sync.bfly step of a warp's row max or sum (the shuffle and its max.f32 or add.f32),
  // expf and IEEE division (the compiler's sequences) on the last result.
  double fp32_fma_latency_cycles = 0;
  double ld_shared_latency_cycles = 0;
  double shuffle_step_cycles = 0;
  double expf_latency_cycles = 0;
  double fp32_divide_latency_cycles = 0;
  // The share of the shared-memory wavefronts a clock that one CTA of such a kernel reaches on its
  // products, each run alone between its barriers (gpu/bench/smem_warps.cu, `step`); optional, 0
  // where not measured (then the full bandwidth).
  double fp32_matmul_sram_share_per_cta = 0;
  // What a warp's 16-byte-a-lane ld.global and st.global (512 bytes) take of the SM's LSU data pipe,
  // the pipe that also serves shared memory a wavefront a clock (gpu/bench/lsu_pipe.cu); optional, 0
  // where not measured (then 4, a wavefront per 128 bytes).
  double global_load_wavefronts_per_warp = 0;
  double global_store_wavefronts_per_warp = 0;
  // The L2's fp32 reductions (red.global.add into L2-resident addresses), bytes added per second by
  // all SMs together (gpu/bench/l2_reduce.cu); optional, 0 where not measured. A request of one
  // 32-byte sector (a warp adding an MMA fragment: 8 rows, 32 bytes each) or of whole 128-byte lines
  // (a warp adding 32 consecutive floats or more).
  double l2_reduction_sector_gbps = 0;
  double l2_reduction_line_gbps = 0;
  // The SM's side of those reductions (gpu/bench/l2_reduce.cu, `l2_reduce sm`); optional, 0 where not
  // measured: the cycles one SM's memory path takes per red.global.add warp instruction of each request
  // shape (the MMA fragment as float2: 8 one-sector requests; 32 consecutive floats: one line), and the
  // cycles of those a CTA's warps hand to the queue before the next instruction of each warp waits.
  double sm_reduction_sector_cycles = 0;
  double sm_reduction_line_cycles = 0;
  double sm_reduction_queue_cycles = 0;

  std::vector<Quantity> quantities;  // every number in file order, for listings
};

// Parses a preset. `origin` names the file in messages ("scenarios/gpus/toy.toml").
// Throws InputError "origin:line: key: what is wrong".
GpuSpec parse_gpu_spec(std::string_view toml_text, std::string_view origin);

// A preset by name ("h100-sxm") or a path to a .toml file.
GpuSpec load_gpu(std::string_view name_or_path);

// Every embedded preset, in file-name order.
std::vector<GpuSpec> gpu_presets();
std::vector<std::string> gpu_preset_names();

}  // namespace hbmlab
