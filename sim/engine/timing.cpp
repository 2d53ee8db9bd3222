// The timing engine: the step-by-step replay of the rooms' launch plans (Algorithm::plan_kernels)
// through SMs, L2 and HBM. The model is described in timing.hpp.
//
// [SECTION] Occupancy
// [SECTION] The replay
// [SECTION] Replay: placement, serving a phase, step time and its limiter, retirement
// [SECTION] Chrome trace
#include "sim/engine/timing.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <queue>

#include <fmt/format.h>

#include "sim/common/error.hpp"
#include "sim/common/limits.hpp"
#include "sim/common/sum.hpp"
#include "sim/engine/l2.hpp"
#include "sim/engine/replay.hpp"

namespace hbmlab {
namespace {

// [SECTION] Occupancy

struct Occupancy {
  std::int64_t ctas_per_sm = 0;
  std::string limit;
};

// `block_source`: what sram_per_block came from (EngineOptions::sram_bytes_per_block_source).
Occupancy occupancy(const KernelPlan& k, const GpuSpec& gpu, std::int64_t sram_per_sm, std::int64_t sram_per_block,
                    std::string_view block_source) {
  if (k.smem_bytes_per_cta > sram_per_block)
    fail_input("{}: {} B cannot hold one tile set of {} ({} B per CTA)", block_source, sram_per_block, k.name,
               k.smem_bytes_per_cta);
  if (k.threads_per_cta > gpu.max_threads_per_sm)
    fail_input("{}: numbers.max_threads_per_sm: {} threads cannot hold one CTA of {} ({} threads)", gpu.origin,
               gpu.max_threads_per_sm, k.name, k.threads_per_cta);
  Occupancy o{gpu.max_ctas_per_sm, "CTA cap"};
  auto limit = [&](std::int64_t n, const char* why) {
    if (n < o.ctas_per_sm) o = {n, why};
  };
  if (k.smem_bytes_per_cta > 0) limit(sram_per_sm / k.smem_bytes_per_cta, "SRAM");
  limit(gpu.max_threads_per_sm / k.threads_per_cta, "threads");
  if (k.registers_per_thread > 0) {
    const std::int64_t per_cta = k.registers_per_thread * k.threads_per_cta;
    if (per_cta > gpu.registers_per_sm)
      fail_input("{}: numbers.registers_per_sm: {} registers cannot hold one CTA of {} ({})", gpu.origin,
                 gpu.registers_per_sm, k.name, per_cta);
    limit(gpu.registers_per_sm / per_cta, "registers");
  }
  return o;
}

// [SECTION] The replay

struct Rates {
  double gemm_per_sm = 0;    // FLOP/s: a library GEMM (cuBLAS), the tensor rate × gemm_efficiency
  double sram_per_sm = 0;    // bytes/s
  double dram = 0, l2 = 0;                                           // bytes/s, whole GPU
  double l2_reduce_sectors = 0, l2_reduce_lines = 0;                 // fp32 bytes added/s, whole GPU; 0: unknown
  double hbm_latency_s = 0, l2_latency_s = 0;
  double in_flight_per_sm = 0;  // bytes
  double in_flight_per_cta = 0;  // bytes: the preset's, else the SM's
  double loaded_sharpness = 0;   // GpuSpec::hbm_loaded_sharpness; 0: the idle latency at any load
  // HBM's latency with `bytes` in flight over the GPU: the idle latency while they are few, and
  // as they approach and pass what the peak moves in one latency, the time the peak takes to move
  // them (Little's law), with a soft corner between the two; `peak`: what HBM delivers at most
  // at the moment (threads_peak).
  double loaded_latency(double bytes, double peak) const {
    if (!(loaded_sharpness > 0)) return hbm_latency_s;
    const double x = bytes / (hbm_latency_s * peak);
    return hbm_latency_s * std::pow(1.0 + std::pow(x, loaded_sharpness), 1.0 / loaded_sharpness);
  }
  // What the threads of the CTAs in flight let HBM deliver (GpuSpec::hbm_load_gbps_per_thread,
  // hbm_thread_ceiling_sharpness): with `threads` per SM on `sms` SMs, the soft minimum of the peak
  // and what those threads' loads move at most (docs/design.md, "HBM and the threads that read it").
  double thread_rate = 0;          // bytes/s; 0: not measured, the peak whatever the threads
  double thread_sharpness = 0;
  double threads_peak(double threads, double sms) const {
    if (!(thread_rate > 0) || !(thread_sharpness > 0) || !(threads > 0)) return dram;
    const double x = dram / (threads * sms * thread_rate);
    return dram / std::pow(1.0 + std::pow(x, thread_sharpness), 1.0 / thread_sharpness);
  }
  double clock_hz = 0;
  // The SM's pipes (GpuSpec's measured rates at pipe_clock_mhz), per second per SM.
  double mma_sync_per_sm = 0, mma_sync_per_warp = 0, wgmma_per_sm = 0;  // FLOP/s
  double wgmma_wait_cycles = 0, pipe_hz = 0;
  double ex2_per_sm = 0, fp32_per_sm = 0, smem_per_sm = 0;               // results/s, FLOP/s, bytes/s
  double issue_per_sm = 0;  // warp instructions/s; 0 where the preset does not give it
  // Latencies in seconds at pipe_hz; 0 where the preset does not give them.
  double mma_latency_s = 0, ldmatrix_latency_s = 0, barrier_s = 0;
  // One SM's red.global.add warp instructions, seconds each at pipe_hz by request shape, and the
  // seconds of them its queue takes before a warp waits for its own; 0 where not measured.
  double red_sector_s = 0, red_line_s = 0, red_queue_s = 0;
  double fma_latency_s = 0, ld_shared_latency_s = 0, shuffle_step_s = 0, expf_latency_s = 0, divide_latency_s = 0;
  // The share of the shared-memory bandwidth one CTA of a kernel with scalar-FMA products reaches on
  // them (GpuSpec::fp32_matmul_sram_share_per_cta; 1 where not measured).
  double fp32_sram_share = 1;
  // LSU data-pipe wavefronts per byte of a global load or store into or out of registers.
  double lsu_load_wavefronts_per_byte = 0, lsu_store_wavefronts_per_byte = 0;
};

// The rates with the SM's pipes at `sm_clock_mhz`: pipe_clock_mhz, the clock the SM holds while its
// tensor pipe works, or clock_mhz for a kernel that issues nothing to it.
Rates rates_of(const GpuSpec& gpu, double sm_clock_mhz) {
  Rates r;
  const double sms = double(gpu.sm_count);
  r.gemm_per_sm = gpu.tensor_tflops * 1e12 * gpu.gemm_efficiency / sms;
  r.sram_per_sm = gpu.sram_bytes_per_cycle_per_sm * gpu.clock_mhz * 1e6;
  r.dram = gpu.hbm_bandwidth_gbps * 1e9 * gpu.hbm_efficiency;
  r.l2 = gpu.l2_bandwidth_gbps * 1e9;
  r.l2_reduce_sectors = gpu.l2_reduction_sector_gbps * 1e9;
  r.l2_reduce_lines = gpu.l2_reduction_line_gbps * 1e9;
  r.hbm_latency_s = gpu.hbm_latency_ns * 1e-9;
  r.l2_latency_s = gpu.l2_latency_ns * 1e-9;
  r.in_flight_per_sm = double(gpu.hbm_bytes_in_flight_per_sm);
  r.in_flight_per_cta = gpu.hbm_bytes_in_flight_per_cta > 0 ? double(gpu.hbm_bytes_in_flight_per_cta) : r.in_flight_per_sm;
  r.loaded_sharpness = gpu.hbm_loaded_latency_sharpness;
  r.thread_rate = gpu.hbm_load_gbps_per_thread * 1e9;
  r.thread_sharpness = gpu.hbm_thread_ceiling_sharpness;
  r.clock_hz = gpu.clock_mhz * 1e6;
  const double pipe_hz = sm_clock_mhz * 1e6;
  r.pipe_hz = pipe_hz;
  r.fp32_sram_share = gpu.fp32_matmul_sram_share_per_cta > 0 ? gpu.fp32_matmul_sram_share_per_cta : 1.0;
  // A warp's 16-byte-a-lane global load or store moves 512 bytes: its LSU data-pipe wavefronts per byte.
  r.lsu_load_wavefronts_per_byte =
      (gpu.global_load_wavefronts_per_warp > 0 ? gpu.global_load_wavefronts_per_warp : 4.0) / 512.0;
  r.lsu_store_wavefronts_per_byte =
      (gpu.global_store_wavefronts_per_warp > 0 ? gpu.global_store_wavefronts_per_warp : 4.0) / 512.0;
  r.wgmma_wait_cycles = gpu.wgmma_wait_cycles;
  r.mma_sync_per_sm = gpu.mma_sync_flops_per_cycle_per_sm * pipe_hz;
  r.mma_sync_per_warp = gpu.mma_sync_flops_per_cycle_per_warp * pipe_hz;
  // No wgmma (the A100's sm_80): a wgmma plan runs at the mma.sync rate.
  r.wgmma_per_sm = (gpu.wgmma_flops_per_cycle_per_sm > 0 ? gpu.wgmma_flops_per_cycle_per_sm
                                                           : gpu.mma_sync_flops_per_cycle_per_sm) * pipe_hz;
  r.ex2_per_sm = gpu.ex2_per_cycle_per_sm * pipe_hz;
  r.fp32_per_sm = gpu.fp32_fma_flops_per_cycle_per_sm * pipe_hz;
  r.smem_per_sm = gpu.sram_bytes_per_cycle_per_sm * pipe_hz;
  r.issue_per_sm = gpu.issue_per_cycle_per_sm * pipe_hz;
  if (pipe_hz > 0) {
    r.mma_latency_s = gpu.mma_sync_latency_cycles / pipe_hz;
    r.ldmatrix_latency_s = gpu.ldmatrix_latency_cycles / pipe_hz;
    r.barrier_s = gpu.barrier_cycles / pipe_hz;
    r.red_sector_s = gpu.sm_reduction_sector_cycles / pipe_hz;
    r.red_line_s = gpu.sm_reduction_line_cycles / pipe_hz;
    r.red_queue_s = gpu.sm_reduction_queue_cycles / pipe_hz;
    r.fma_latency_s = gpu.fp32_fma_latency_cycles / pipe_hz;
    r.ld_shared_latency_s = gpu.ld_shared_latency_cycles / pipe_hz;
    r.shuffle_step_s = gpu.shuffle_step_cycles / pipe_hz;
    r.expf_latency_s = gpu.expf_latency_cycles / pipe_hz;
    r.divide_latency_s = gpu.fp32_divide_latency_cycles / pipe_hz;
  }
  return r;
}

// A kernel's on-chip counts as seconds of each pipe per unit of its phases' work
// (docs/design.md#the-sms-pipes): a phase's share of the kernel's MMAs, exps and shared-memory bytes
// is its share of the kernel's matmul FLOPs (every computed block pair issues the same
// instructions); in a kernel without matmuls (a softmax, the split-KV combine, D = rowsum(dO ∘ O))
// its share of the non-matmul operations, or, with none, of the phases.
struct PipeCosts {
  enum class Share { matmul, non_matmul, phase } share = Share::matmul;
  bool counted = false;     // the kernel's launch plan carries its on-chip counts
  double tensor = 0;        // its matmuls: on the tensor pipe at the rate the SM's resident warps reach,
                            // at gemm_efficiency (a library GEMM), or on the FP32 pipe (matmul_on_fp32_units)
  double ex2 = 0;           // the exponent unit
  double smem_loads = 0;    // shared memory ↔ registers by the warps' own instructions (ldmatrix, ld/st.shared)
  double smem = 0;          // every shared-memory byte: those, the copy engine's fills, wgmma's operand reads
  bool async_mma = false;   // wgmma: the warps go on issuing while the tensor cores work
  double waits_s = 0;       // warpgroups in step (KernelPlan::wgmma_waits): their waits on the products, a phase
  double issue = 0;         // the counted warp instructions (MMAs, shared-memory loads and stores, exps) at the issue rate
  // Kernels without wgmma: one warp's dependent MMA chain (its GEMMs' k-steps at the MMA latency) or
  // FMA chain (its dot products on the FP32 pipe and the shared-memory loads they wait on), and the
  // latency one CTA's warps wait out with nothing to issue: each GEMM's first fragments (ldmatrix),
  // the last products of those the next instructions use (MMA), each barrier, a softmax's chain.
  double mma_chain = 0, exposed = 0;
  // The phase's units of work by `share`.
  double units(const CtaPhase& ph) const {
    switch (share) {
      case Share::matmul: return double(ph.matmul_flops);
      case Share::non_matmul: return double(ph.non_matmul_flops);
      case Share::phase: return 1.0;
    }
    return 0.0;
  }
  // The dQ adds (red.global.add warp instructions) on the SM's memory path, and the part of a CTA's
  // burst its queue takes while the warps go on (docs/design.md#the-backwards-dq-reductions).
  double red = 0, red_queue = 0;
};

PipeCosts pipe_costs(const KernelPlan& k, const Rates& r, std::int64_t ctas_per_sm) {
  PipeCosts c;
  const OnChipCounts& oc = k.on_chip;
  std::int64_t matmul = 0, non_matmul = 0, phases = 0;
  for (const CtaProgram& pg : k.programs)
    for (std::int32_t f = pg.first_phase; f < pg.first_phase + pg.phase_count; ++f) {
      matmul += k.phases[f].matmul_flops;
      non_matmul += k.phases[f].non_matmul_flops;
      ++phases;
    }
  c.share = matmul > 0 ? PipeCosts::Share::matmul : non_matmul > 0 ? PipeCosts::Share::non_matmul : PipeCosts::Share::phase;
  const std::int64_t units = matmul > 0 ? matmul : non_matmul > 0 ? non_matmul : phases;
  if (units <= 0) return c;
  const double per_unit = 1.0 / (double(units) * double(k.instances));
  // mma.sync: one warp alone reaches a sub-partition's share; four warps (one per sub-partition)
  // reach about the SM's rate (assets/measurements/h100-pipes.txt).
  const double warps_per_cta = std::max(1.0, double(k.threads_per_cta / 32));
  const double mma_sm = std::min(r.mma_sync_per_sm, r.mma_sync_per_warp * warps_per_cta * double(ctas_per_sm));
  c.counted = oc.modelled && !k.library_gemm;
  // Matmuls (per matmul FLOP, as `units` is then the matmul FLOPs): a library GEMM at its measured
  // rate; scalar FMAs on the FP32 pipe; counted MMAs on their pipe; a kernel without counts, its
  // FLOPs on mma.sync.
  if (matmul > 0) {
    if (k.library_gemm) c.tensor = 1.0 / r.gemm_per_sm;
    else if (k.matmul_on_fp32_units) c.tensor = 1.0 / r.fp32_per_sm;
    else if (c.counted && oc.mma_flops() + oc.wgmma_flops > 0)
      c.tensor = (double(oc.mma_flops()) / mma_sm + double(oc.wgmma_flops) / r.wgmma_per_sm) * per_unit;
    else c.tensor = 1.0 / mma_sm;
  }
  if (!c.counted) return c;
  const SmemBytes smem = oc.total();
  c.smem_loads = double(smem.read + smem.write) / r.smem_per_sm * per_unit;
  c.async_mma = oc.wgmma_flops > 0 && k.wgmma_waits == 0;
  c.waits_s = double(k.wgmma_waits) * r.wgmma_wait_cycles / r.pipe_hz;
  c.ex2 = double(oc.ex2) * 32.0 / r.ex2_per_sm * per_unit;
  // Shared memory's pipe also carries a wavefront per shuffle (gpu/bench/lsu_pipe.cu).
  c.smem = double(smem.fill + smem.read + smem.mma_read + smem.write + oc.shfl_bytes()) / r.smem_per_sm * per_unit;
  // Each wgmma is one instruction in each of its warpgroup's four warps.
  const double instructions =
      double(oc.mma + oc.ldmatrix + oc.ld_shared + oc.st_shared + oc.ex2 + 4 * oc.wgmma + oc.shfl);
  if (r.issue_per_sm > 0) c.issue = instructions / r.issue_per_sm * per_unit;
  const double red_s = k.reduction_requests == ReductionRequests::sectors ? r.red_sector_s : r.red_line_s;
  c.red = double(oc.red) * red_s * per_unit;
  c.red_queue = r.red_queue_s;
  if (oc.wgmma_flops == 0) {
    c.mma_chain = (double(oc.mma_ksteps) * r.mma_latency_s + double(oc.fma_chain) * r.fma_latency_s +
                   double(oc.fma_chain_loads) * r.ld_shared_latency_s) *
                  per_unit;
    c.exposed = (double(oc.gemm_starts) * r.ldmatrix_latency_s + double(oc.gemm_drains) * r.mma_latency_s +
                 double(oc.barriers) * r.barrier_s + double(oc.shuffle_steps) * r.shuffle_step_s +
                 double(oc.serial_loads) * r.ld_shared_latency_s + double(oc.serial_fp32) * r.fma_latency_s +
                 double(oc.serial_exps) * r.expf_latency_s + double(oc.serial_divides) * r.divide_latency_s) *
                per_unit;
  }
  return c;
}

// FLOP/s per SM of a kernel's matmuls at the pipe it issues them to (the compute bound of a run).
double matmul_rate_of(const KernelPlan& k, const Rates& r) {
  if (k.library_gemm) return r.gemm_per_sm;
  if (k.matmul_on_fp32_units) return r.fp32_per_sm;
  return k.on_chip.wgmma_flops > 0 ? r.wgmma_per_sm : r.mma_sync_per_sm;
}

// How a kernel's CTAs use the L2's tiles: the tensors of which some tile is touched by more than one
// of its CTA programs (K and V also where instances share them, kv_group > 1), one bit each — the
// tiles of every other tensor are each one CTA's own, which the L2 sees swept (TileL2::read's `own`)
// — and the bytes of a program's own tiles that it touches more than once, the footprint it sweeps
// (the mean over programs; TileL2::set_own_footprint).
struct TileSharing {
  std::uint32_t shared = 0;
  std::int64_t own_bytes_per_cta = 0;
};

TileSharing tile_sharing(const KernelPlan& k) {
  TileSharing out;
  if (k.kv_group > 1) out.shared |= (1u << static_cast<int>(Tensor::K)) | (1u << static_cast<int>(Tensor::V));
  // Per tensor and tile: the program that touches it (−1: none yet), its bytes and the touches.
  std::array<std::vector<std::int32_t>, kTensorCount> owner, touches;
  std::array<std::vector<std::int64_t>, kTensorCount> tile_bytes;
  for (const TileAccess& a : k.accesses) {
    const int t = static_cast<int>(a.tensor);
    if (static_cast<std::size_t>(a.tile) >= owner[t].size()) {
      owner[t].resize(static_cast<std::size_t>(a.tile) + 1, -1);
      tile_bytes[t].resize(owner[t].size(), 0);
      touches[t].resize(owner[t].size(), 0);
    }
  }
  for (std::int32_t p = 0; p < static_cast<std::int32_t>(k.programs.size()); ++p) {
    const CtaProgram& pg = k.programs[p];
    for (std::int32_t f = pg.first_phase; f < pg.first_phase + pg.phase_count; ++f) {
      const CtaPhase& ph = k.phases[f];
      for (std::int32_t a = ph.first_access; a < ph.first_access + ph.access_count; ++a) {
        const TileAccess& acc = k.accesses[a];
        const int t = static_cast<int>(acc.tensor);
        const auto i = static_cast<std::size_t>(acc.tile);
        tile_bytes[t][i] = std::max(tile_bytes[t][i], acc.sector_bytes);
        ++touches[t][i];
        std::int32_t& o = owner[t][i];
        if (o == -1) o = p;
        else if (o != p) out.shared |= 1u << t;
      }
    }
  }
  if (k.programs.empty()) return out;
  std::int64_t own = 0;
  for (int t = 0; t < kTensorCount; ++t)
    if ((out.shared >> t & 1u) == 0)
      for (std::size_t i = 0; i < owner[t].size(); ++i)
        if (touches[t][i] > 1) own += tile_bytes[t][i];
  out.own_bytes_per_cta = own / static_cast<std::int64_t>(k.programs.size());
  return out;
}

struct Resident {
  std::int64_t cta = 0, instance = 0;
  std::int64_t walker = -1;  // a static-order grid's CTA that runs this tile (KernelPlan::static_tiles)
  std::int32_t program = 0, phase = 0, sm = 0, slot = 0;
  double start_s = 0;
  bool prefetched = false;  // a persistent CTA's tile after its slot's first: its first loads came early
};

// Bandwidth over time in equal bins. A step's bytes are spread over the bins it spans in
// proportion to its time in each, so the plot shows what HBM sustains rather than spikes where a
// long step lands in one short bin; totals stay exact. When the bins run past kMaxSamples,
// neighbours merge and the bin width doubles, so any run fits.
void add_sample(Timeline& tl, double& bin_s, const BandwidthSample& s) {
  const double start = s.start_s, end = std::max(s.end_s, s.start_s);
  auto bin_of = [&](double t) { return static_cast<std::size_t>(t / bin_s); };
  while (bin_of(end) >= Timeline::kMaxSamples) {
    std::vector<BandwidthSample> merged((tl.hbm.size() + 1) / 2);
    for (std::size_t k = 0; k < tl.hbm.size(); ++k) {
      BandwidthSample& m = merged[k / 2];
      m.dram_read_bytes += tl.hbm[k].dram_read_bytes;
      m.dram_write_bytes += tl.hbm[k].dram_write_bytes;
      m.l2_bytes += tl.hbm[k].l2_bytes;
    }
    bin_s *= 2;
    for (std::size_t k = 0; k < merged.size(); ++k) merged[k].start_s = k * bin_s, merged[k].end_s = (k + 1) * bin_s;
    tl.hbm = std::move(merged);
  }
  const std::size_t first = bin_of(start), last = bin_of(end);
  while (tl.hbm.size() <= last) {
    const double t = tl.hbm.size() * bin_s;
    tl.hbm.push_back({t, t + bin_s, 0, 0, 0});
  }
  // Each bin gets the bytes up to its end less those up to its start, both rounded down: the parts
  // add up to the step's bytes exactly, and no bin is off by more than a byte (truncating each part
  // alone would leave up to a byte per bin for the last one, a spike where many steps end together).
  std::int64_t given_read = 0, given_write = 0, given_l2 = 0;
  for (std::size_t k = first; k <= last; ++k) {
    BandwidthSample& bin = tl.hbm[k];
    const double upto = end > start ? (std::min(end, bin.end_s) - start) / (end - start) : 1.0;  // < 1 before the last bin
    const auto cumulative = [&](std::int64_t bytes) { return k == last ? bytes : static_cast<std::int64_t>(upto * double(bytes)); };
    const std::int64_t read = cumulative(s.dram_read_bytes), write = cumulative(s.dram_write_bytes), l2 = cumulative(s.l2_bytes);
    bin.dram_read_bytes += read - given_read;
    bin.dram_write_bytes += write - given_write;
    bin.l2_bytes += l2 - given_l2;
    given_read = read;
    given_write = write;
    given_l2 = l2;
  }
}

// What one step of an SM asks of the SM and the memory system, summed over the CTAs resident on it.
struct StepDemand {
  double sram = 0;  // seconds of the SM's shared-memory bandwidth
  // What the resident CTAs' warps issue and wait on (MMAs, exps, FP32 work), summed over them, and
  // the longest phase one CTA runs in order (its GEMMs, then its softmax).
  double issued = 0, chain = 0;
  double issue = 0;  // every resident warp's instructions through the SM's issue slots
  double red = 0;    // every resident CTA's dQ adds through the SM's memory path
  double latency_bytes = 0, window = 0;  // Σ bytes × latency, and the bytes the CTAs keep in flight
  // The part of the CTAs' windows that HBM serves (each CTA's window × its misses' share of its
  // loads), the current phase's alone: a double-buffered CTA's prefetch is not counted.
  double dram_window = 0;
  double serial = 0, serial_memory = 0;  // the longest CTA that waits for its loads, and its wait
  // CTAs that run their phases in step (KernelPlan::ctas_in_step): the longest of what each waits
  // out after its products (its softmax, barriers and loads), which follows all of their products.
  double after_products = 0;
  double in_step_memory = 0;  // CTAs in step: the longest of their memory waits, the part of the step their loads are out
  std::int64_t dram_read = 0, dram_write = 0, l2_bytes = 0;
  double l2_reduce = 0;  // seconds of the L2's reduction rate (the fp32 adds of TileAccess::reduction)
  // The L2's write-backs: those that fell due during the step (counted with the kernel), and all of
  // them since this SM's last step, which it waits for (Replay::take_writebacks).
  std::int64_t writebacks = 0, writebacks_since = 0;
};

// The resource that sets a step's length.
enum class Limiter { dram, l2, compute, latency, sram };

struct StepTime {
  double seconds = 0;
  Limiter limiter = Limiter::compute;
};

// Per-SM seconds spent in steps each resource limited, for KernelTiming's bound_*_s.
struct BusyTime {
  double dram = 0, l2 = 0, compute = 0, latency = 0, sram = 0;
  void add(StepTime t) {
    switch (t.limiter) {
      case Limiter::dram: dram += t.seconds; break;
      case Limiter::l2: l2 += t.seconds; break;
      case Limiter::compute: compute += t.seconds; break;
      case Limiter::latency: latency += t.seconds; break;
      case Limiter::sram: sram += t.seconds; break;
    }
  }
  double total() const { return dram + l2 + compute + latency + sram; }
};

// The grid of one kernel: CTAs handed out in order (blockIdx.x fastest), each running program
// cta mod programs of instance cta / programs. A static-order grid (KernelPlan::static_tiles) hands
// each of its CTAs its own next position instead: `next` counts its CTAs started, and a slot's CTA
// walks on from the position it ran, the slot taking the next CTA not yet started once it is done.
struct Grid {
  std::int64_t programs = 0, ctas = 0, next = 0;
  KernelPlan::StaticTiles order;
  bool queue() const { return order.ctas == 0; }
  bool place(Resident& r, double at) {
    std::int64_t t = ctas;
    if (queue()) {
      if (next >= ctas) return false;
      t = next++;
    } else {
      if (r.walker >= 0)  // the rest of its run, then a grid's worth of runs on
        t = r.cta % order.run == order.run - 1 ? r.cta + order.run * (order.ctas - 1) + 1 : r.cta + 1;
      if (t >= ctas) {  // a slot's first tile, or its CTA's walk is done: the grid's next CTA starts
        if (next >= order.ctas) return false;
        r.walker = next++;
        t = order.run * r.walker;
      }
    }
    if (t >= ctas) return false;
    r.cta = t;
    r.instance = t / programs;
    const std::int64_t q = t % programs;
    r.program = static_cast<std::int32_t>(order.reverse_odd_instances && r.instance % 2 ? programs - 1 - q : q);
    r.phase = 0;
    r.start_s = at;
    return true;
  }
};

// [SECTION] Replay: placement, serving a phase, step time and its limiter, retirement

// The CTAs per SM up to which refill_last_wave spreads the last wave (the most gpu/bench/cta_placement.cu ran).
constexpr std::int64_t kLastWaveMeasuredCtasPerSm = 3;
// How close in time the SMs free their first slots, over the CTAs' span: 3 CTAs of shared-memory
// loads an SM (gpu/bench/cta_placement.cu) ended their first at 55.9–59.9 µs, 4.0 µs of 117.2.
constexpr double kSlotsFreeTogether = 4.0 / 117.2;

class Replay {
public:
  Replay(const GpuSpec& gpu, const EngineOptions& options, EngineResult& result)
      : gpu_(gpu), options_(options), pipe_rates_(rates_of(gpu, gpu.pipe_clock_mhz)),
        fp32_rates_(rates_of(gpu, gpu.clock_mhz)), rates_(pipe_rates_), result_(result) {
    sram_per_sm_ = options.sram_bytes_per_sm_of(gpu);
    sram_per_block_ = options.sram_bytes_per_block_of(gpu);
    if (options.l2_enabled) l2_.push_back(empty_l2());
  }

  void run(const KernelPlan& k, std::int32_t kernel_index);
  // Empties the L2 (EngineOptions::l2_flushed_between_kernels): what was dirty is written back outside
  // any kernel, so no kernel's DRAM counts see it.
  void flush_l2() {
    for (PartitionedL2& c : l2_) c = empty_l2();
  }
  double now_s() const { return now_s_; }
  std::int64_t dirty_bytes() const {
    std::int64_t sum = 0;
    for (const PartitionedL2& c : l2_) sum += c.dirty_bytes();
    return sum;
  }
  // The run's end: what the dirty tiles lost since their last touch was written back during it
  // (TileL2::evicted_dirty_bytes), counted with the last kernel; no step waited for it.
  void count_evicted_dirty() {
    for (const PartitionedL2& c : l2_) {
      const auto lost = c.evicted_dirty_bytes();
      for (int t = 0; t < kTensorCount; ++t) {
        result_.memory[t].dram_write_bytes += lost[t];
        if (!result_.kernels.empty()) result_.kernels.back().dram_write_bytes += lost[t];
      }
    }
  }

private:
  KernelTiming begin_kernel(const KernelPlan& k, const Occupancy& occ) const;
  // The first wave: breadth first, one CTA per SM, then the next slot of each.
  std::vector<std::vector<Resident>> place_first_wave(Grid& grid, std::int64_t ctas_per_sm, double start_s) const;
  // One resident CTA carries out its current phase: its tiles go through the L2 (or straight to HBM
  // with the L2 off) and its demand is added to the SM's step.
  // `ctas_in_flight`: the CTAs over the GPU that HBM and the L2 serve at once, each an equal part.
  void serve_phase(const KernelPlan& k, const Resident& r, const PipeCosts& pipes, std::int64_t ctas_in_flight,
                   StepDemand& d);
  // The write-backs that fell due (TileL2::take_writebacks), counted; and all of them since SM `sm`'s
  // last step.
  void take_writebacks(StepDemand& d, std::int64_t sm);
  // The GPU's L2 as the preset builds it, holding nothing.
  PartitionedL2 empty_l2() const {
    PartitionedL2 l2(gpu_.l2_effective_bytes, gpu_.l2_ways, gpu_.l2_line_bytes, std::max<std::int64_t>(1, gpu_.l2_partitions));
    l2.set_dirty_limit(gpu_.l2_dirty_limit_bytes);
    return l2;
  }
  // The L2 partition beside SM `sm` (PartitionedL2::side_of_sm).
  int l2_side(std::int32_t sm) const {
    if (l2_.empty() || l2_.front().partitions() == 1) return 0;
    return PartitionedL2::side_of_sm(sm, gpu_.l2_partition_first_sms, gpu_.l2_partition_run_sms);
  }
  // One SM's step: its `ctas_here` CTAs take their parts of HBM and the L2 out of `ctas_in_flight`.
  StepTime step_time(const StepDemand& d, std::int64_t ctas_in_flight, std::int64_t ctas_here) const;
  // CTAs whose last phase ended at t1 leave (their span recorded); the next CTA of the grid takes
  // each freed slot on this SM at once, which is how the hardware hands out CTAs. But where the
  // CTAs share the SM's own pipes or shared memory (`shared_sm`: the kernel's steps so far were
  // mostly bound by compute or SRAM) and the grid holds less than a wave (a CTA for every slot of
  // the GPU), the freed slots are kept in `freed` (their CTAs' longest span in `freed_span_s`) for
  // refill_last_wave.
  void retire(const KernelPlan& k, std::int32_t kernel_index, std::vector<Resident>& here, Grid& grid, double t1,
              bool shared_sm, std::vector<std::int32_t>& freed, double& freed_span_s);
  // The last wave: the CTAs left go to the slots freed at `t` on SM `s` and on the SMs whose slots
  // free within kSlotsFreeTogether of their CTAs' span after it, one a slot in turn: the earliest
  // SM's first slot, the next SM's first slot, …, then second slots. `ready` holds every SM's next
  // step (an SM whose slots freed is there at that time); what stays empty leaves at its SM's time.
  template <class Queue>
  void refill_last_wave(std::int64_t s, double t, const KernelPlan& k, Grid& grid,
                        Queue& ready, Queue& leaving, std::vector<std::vector<Resident>>& resident,
                        std::vector<std::vector<std::int32_t>>& freed, std::vector<double>& freed_span_s) const;
  void end_kernel(KernelTiming& kt, const BusyTime& busy, double start_s, double end_s);

  const GpuSpec& gpu_;
  const EngineOptions& options_;
  // A kernel whose matmuls run as scalar FMAs (KernelPlan::matmul_on_fp32_units), or that holds the
  // GPU's clock as measured (KernelPlan::holds_gpu_clock), issues nothing to the tensor pipe and runs
  // at clock_mhz: Nsight Compute read 1,977–1,980 MHz on every launch of hbmlab's flash1
  // (gpu/bench/flash1_step.sh) and 1,978–1,991 on standard's softmax_kernel (gpu/bench/standard_ncu.sh);
  // every other kernel's pipes run at pipe_clock_mhz.
  const Rates pipe_rates_, fp32_rates_;
  Rates rates_;  // the running kernel's
  EngineResult& result_;
  std::int64_t sram_per_sm_ = 0, sram_per_block_ = 0;
  std::vector<PartitionedL2> l2_;
  double now_s_ = 0;
  double sample_bin_s_ = 1e-9;
  double hbm_latency_s_ = 0;  // HBM's latency under the load of the moment (Rates::loaded_latency)
  double hbm_peak_ = 0;       // what HBM delivers at most with the threads of the moment (Rates::threads_peak)
  // The kernel's write-backs so far, and how many of them each SM had when it last stepped.
  std::int64_t writebacks_due_ = 0;
  std::vector<std::int64_t> writebacks_seen_;
  // The running kernel's CTA slots over the GPU (SMs × CTAs per SM); 0 where its last wave is not
  // spread (more CTAs an SM than measured).
  std::int64_t wave_slots_ = 0;
  std::uint32_t shared_tensors_ = 0;  // the running kernel's (tile_sharing)
};

KernelTiming Replay::begin_kernel(const KernelPlan& k, const Occupancy& occ) const {
  KernelTiming kt;
  kt.name = k.name;
  kt.overlap = k.overlap;
  kt.on_chip = k.on_chip;
  kt.tiles = k.tiles();
  const std::int64_t slots = gpu_.sm_count * occ.ctas_per_sm;
  kt.ctas = k.static_tiles.ctas > 0 ? k.static_tiles.ctas : k.persistent ? std::min(kt.tiles, slots) : kt.tiles;
  kt.ctas_per_sm = occ.ctas_per_sm;
  kt.occupancy_limit = occ.limit;
  kt.waves = ceil_div(kt.tiles, slots);
  kt.smem_bytes_per_cta = k.smem_bytes_per_cta;
  kt.threads_per_cta = k.threads_per_cta;
  kt.registers_per_thread = k.registers_per_thread;
  kt.double_buffered = k.double_buffered;
  kt.start_s = now_s_;
  kt.sm_clock_mhz = rates_.pipe_hz * 1e-6;
  return kt;
}

std::vector<std::vector<Resident>> Replay::place_first_wave(Grid& grid, std::int64_t ctas_per_sm, double start_s) const {
  const std::int64_t S = gpu_.sm_count;
  std::vector<std::vector<Resident>> resident(static_cast<std::size_t>(S));
  for (std::int64_t n = 0; n < S * ctas_per_sm; ++n) {
    Resident r;
    r.sm = static_cast<std::int32_t>(n % S);
    r.slot = static_cast<std::int32_t>(n / S);
    if (!grid.place(r, start_s)) break;
    resident[r.sm].push_back(r);
  }
  return resident;
}

void Replay::serve_phase(const KernelPlan& k, const Resident& r, const PipeCosts& pipes, std::int64_t ctas_in_flight,
                         StepDemand& d) {
  const bool l2_on = options_.l2_enabled;
  const CtaPhase& ph = k.phases[k.programs[r.program].first_phase + r.phase];
  double latency_bytes = 0, window = 0;
  std::int64_t own_dram = 0, own_l2 = 0;  // this CTA's loads in this phase (SM↔L2 only with the L2 on)
  std::int64_t loaded = 0, stored = 0;  // the phase's global loads and stores (KernelPlan::global_via_registers)
  // A load of `b` bytes through the L2 that `o` says how much of hit: counted, and, unless it is a
  // reduction's read (the CTA does not wait for it), part of the CTA's wait.
  auto count_load = [&](TensorMemory& mem, const TileL2::ReadOutcome& o, std::int64_t b, bool waited) {
    loaded += b;
    mem.sm_read_bytes += b;
    mem.read_hit_bytes += o.hit_bytes;
    mem.dram_read_bytes += o.miss_bytes;
    d.dram_read += o.miss_bytes;
    if (!waited) return;
    own_dram += o.miss_bytes;
    own_l2 += b;
    latency_bytes += double(o.hit_bytes) * rates_.l2_latency_s + double(o.miss_bytes) * hbm_latency_s_;
    window += double(b);
  };
  const double reduce_rate =
      k.reduction_requests == ReductionRequests::sectors ? rates_.l2_reduce_sectors : rates_.l2_reduce_lines;
  for (std::int32_t a = ph.first_access; a < ph.first_access + ph.access_count; ++a) {
    const TileAccess& acc = k.accesses[a];
    TensorMemory& mem = result_.memory[static_cast<int>(acc.tensor)];
    if (!l2_on) {  // the paper's model: the request is what the algorithm counts, served by HBM
      const std::int64_t b = acc.paper_bytes;
      if (acc.store) {
        mem.sm_write_bytes += b;
        mem.dram_write_bytes += b;
        d.dram_write += b;
        stored += b;
      } else {
        loaded += b;
        mem.sm_read_bytes += b;
        mem.dram_read_bytes += b;
        d.dram_read += b;
        own_dram += b;
        latency_bytes += double(b) * hbm_latency_s_;
        window += double(b);
      }
      continue;
    }
    PartitionedL2& cache = l2_.front();
    // An fp32 add into the L2 (dQ_i's): with the preset's reduction rate for the kernel's requests,
    // it costs the L2 that rate, once per byte added (at the write), and the CTA does not wait for it;
    // the L2 still reads the tile to add into it (a miss is a DRAM read) and holds it dirty.
    const bool reduce = acc.reduction && reduce_rate > 0;
    const bool shared_kv = acc.tensor == Tensor::K || acc.tensor == Tensor::V;
    const std::uint64_t key = tile_key(shared_kv ? r.instance / k.kv_group : r.instance, acc.tensor, acc.tile);
    const std::int64_t b = acc.sector_bytes;
    const bool own = (shared_tensors_ >> static_cast<int>(acc.tensor) & 1u) == 0;
    if (acc.slice_rows > 0) {  // a row across its block row's tiles (TileAccess::slice_rows)
      const bool last = acc.slice_row == acc.slice_rows - 1;
      const std::int64_t col_bytes = acc.slice_col_bytes, sector = gpu_.l2_sector_bytes;
      for (std::int64_t at = 0, j = 0; at < acc.bytes; at += col_bytes, ++j) {
        const std::int64_t part = (std::min(col_bytes, acc.bytes - at) + sector - 1) / sector * sector;
        const std::uint64_t tile = tile_key(r.instance, acc.tensor, acc.tile + j);
        d.l2_bytes += part;
        if (acc.store) {
          if (last) cache.write(tile, part * acc.slice_rows, own);  // the tile, whole, once its last row is in
          mem.sm_write_bytes += part;
          stored += part;
          continue;
        }
        count_load(mem, cache.read_part(l2_side(r.sm), tile, part, part * acc.slice_rows, own, last), part, true);
      }
      continue;
    }
    if (!reduce) d.l2_bytes += b;
    if (acc.store) {
      cache.write(key, b, own);
      mem.sm_write_bytes += b;
      stored += b;
      if (reduce) d.l2_reduce += double(acc.bytes) / reduce_rate;
    } else {
      count_load(mem, cache.read(l2_side(r.sm), key, b, own), b, !reduce);
    }
  }
  if (k.bytes_in_flight_per_cta > 0) window = std::min(window, double(k.bytes_in_flight_per_cta));
  // One CTA keeps no more in flight than the GPU lets it, the SM's CTAs together no more than the
  // SM's figure (step_time): gpu/bench/hbm_share.cu measured one CTA alone at most at 42.5 GB/s and
  // one SM at 96.4 GB/s, however many bytes they issued.
  window = std::min(window, rates_.in_flight_per_cta);
  // One CTA's warps run a phase in order: the GEMMs (mma.sync's loop loads the next fragments
  // from shared memory under the current MMAs), then the softmax (exps, then FP32 work). A wgmma
  // is asynchronous: the warpgroup's FP32 work issues while it runs. The CTAs resident on an SM
  // take turns on the tensor pipe, the exponent unit and the FP32 pipe, whose work their warps
  // issue: that work adds up; shared memory serves every CTA's loads at once, against its
  // bandwidth alone (docs/design.md#the-sms-pipes).
  const double w = pipes.units(ph);
  // A non-matmul operation is one FP32 lane instruction; an FMA counts two FLOPs in the pipe's rate.
  const double fp32 = double(ph.non_matmul_flops) / (rates_.fp32_per_sm / 2);
  const double waits = ph.matmul_flops > 0 ? pipes.waits_s : 0.0;
  const double issued = pipes.async_mma ? std::max(w * (pipes.tensor + pipes.ex2), fp32)
                                        : w * (pipes.tensor + pipes.ex2) + fp32 + waits;
  // An mma.sync GEMM lasts at least its k-steps one after another at the MMA's latency, and one
  // CTA's warps wait out, with nothing to issue, each GEMM's first loads and last products and each
  // barrier; other CTAs' warps issue meanwhile (`issued` adds no latency).
  const double gemms = w * std::max({pipes.smem_loads, pipes.tensor, pipes.mma_chain});
  const double after_gemms = w * (pipes.exposed + pipes.ex2) + fp32 + waits;
  // What one CTA's warps wait out beyond its pipes, measured on the kernel (KernelPlan::measured_issue_cycles).
  const double issue_waits = k.measured_issue_cycles / rates_.pipe_hz;
  double compute = (pipes.async_mma ? issued : gemms + after_gemms) + issue_waits;
  // The CTA's dQ adds leave through the SM's memory path one after another; its queue takes the
  // first of them, and then each warp waits until its own have gone, with nothing else to issue
  // before the next barrier (gpu/bench/l2_reduce.cu, `l2_reduce sm`: the step rounds).
  const double reds = w * pipes.red;
  const double red_wait = std::max(0.0, reds - pipes.red_queue);
  compute += red_wait;
  d.red += reds;
  d.issued += issued;
  d.chain = std::max(d.chain, compute);
  // Every FP32 operation of a warp's 32 lanes is one instruction.
  if (rates_.issue_per_sm > 0) d.issue += w * pipes.issue + double(ph.non_matmul_flops) / 32.0 / rates_.issue_per_sm;
  // Shared-memory bytes: the counted ones, or, for a kernel without counts, its plan's.
  d.sram += pipes.counted ? w * pipes.smem : double(ph.sram_bytes) / rates_.sram_per_sm;
  // Global loads into registers and stores from them pass the SM's LSU data pipe too, beside shared
  // memory's wavefronts, at the preset's wavefronts a warp's 512 bytes (gpu/bench/lsu_pipe.cu).
  if (k.global_via_registers)
    d.sram += (double(loaded) * rates_.lsu_load_wavefronts_per_byte + double(stored) * rates_.lsu_store_wavefronts_per_byte) *
              double(kWavefrontBytes) / rates_.smem_per_sm;
  // What the CTA does once its loads are in: its compute, or its own shared-memory traffic in place
  // of its GEMMs (its counted wavefronts, or its plan's bytes, at the share one CTA reaches), and then
  // what its warps wait out after them.
  const double own_sram =
      k.sram_bound_work
          ? (pipes.counted ? w * pipes.smem : double(ph.sram_bytes) / rates_.smem_per_sm) / rates_.fp32_sram_share
          : 0;
  // A chain the kernel's own measurement found beyond its pipes (KernelPlan::measured_*_cycles).
  const double fixed_cycles = k.measured_phase_cycles + (r.phase == 0 ? k.measured_cta_cycles : 0.0);
  const double work =
      (pipes.async_mma ? std::max(compute, own_sram) : std::max(gemms, own_sram) + after_gemms + red_wait + issue_waits) +
      fixed_cycles / rates_.clock_hz;
  d.latency_bytes += latency_bytes;
  // Double-buffered CTAs keep this phase's and the next phase's loads in flight (their first
  // phase cannot overlap: nothing was prefetched yet; the pipeline fills once per CTA), together no
  // more than one CTA's figure: the prefetch shares the CTA's own window, it does not double it.
  d.window += std::min(window * (k.double_buffered ? 2 : 1), rates_.in_flight_per_cta);
  const double miss_share = l2_on ? (own_l2 > 0 ? double(own_dram) / double(own_l2) : 0.0) : 1.0;
  d.dram_window += window * miss_share;
  double memory_wait = 0;
  if ((!k.double_buffered || (r.phase == 0 && !r.prefetched)) && window > 0) {
    // It waits for its loads: either as many round trips as its window needs (Little's law),
    // or the first byte's latency and then its own bytes at one CTA's part of DRAM and L2
    // bandwidth, whichever is longer.
    const double parts = double(std::max<std::int64_t>(1, ctas_in_flight));
    const double transfer = std::max(double(own_dram) * parts / hbm_peak_, double(own_l2) * parts / rates_.l2);
    const double mean_latency = latency_bytes / double(l2_on ? own_l2 : own_dram);
    // CTAs in step wait for their round trips alone: their SM's loads are in flight while other SMs
    // work through their shared memory, so the bandwidth they share is the step's DRAM and L2 bounds.
    const double round_trips = latency_bytes / std::min(window, rates_.in_flight_per_sm);
    const double memory = k.ctas_in_step ? round_trips : std::max(round_trips, mean_latency + transfer);
    memory_wait = memory;
    if (work + memory > d.serial) {
      d.serial = work + memory;
      d.serial_memory = memory;
    }
  }
  if (k.ctas_in_step) {
    d.after_products = std::max(d.after_products, work - std::max(gemms, own_sram) + memory_wait);
    d.in_step_memory = std::max(d.in_step_memory, memory_wait);
  }
  // This CTA's next phase comes up only after every other SM's step, and a long problem's plan is
  // tens of megabytes (a 64K-token head: half a million phases): its entries are asked of memory now,
  // so that they are in the cache by then (waiting on them was a fifth of the engine's time).
  const std::int32_t next = ph.first_access + ph.access_count;
  if (r.phase + 1 < k.programs[r.program].phase_count) __builtin_prefetch(&ph + 1);
  if (static_cast<std::size_t>(next) < k.accesses.size()) {
    __builtin_prefetch(&k.accesses[next]);
    __builtin_prefetch(reinterpret_cast<const char*>(&k.accesses[next]) + 64);
    __builtin_prefetch(reinterpret_cast<const char*>(&k.accesses[next]) + 128);
  }
}

// The L2 writes dirty lines back on its own, whichever SM's step finds them due: they hold HBM for
// every SM, not for the one that finds them. So each SM's step waits for all the write-backs since its
// own last step at HBM's rate (step_time), beside its part of the loads.
void Replay::take_writebacks(StepDemand& d, std::int64_t sm) {
  for (PartitionedL2& cache : l2_) {
    const auto wb = cache.take_writebacks();
    for (int t = 0; t < kTensorCount; ++t) {
      result_.memory[t].dram_write_bytes += wb[t];
      d.writebacks += wb[t];
    }
  }
  writebacks_due_ += d.writebacks;
  std::int64_t& seen = writebacks_seen_[static_cast<std::size_t>(sm)];
  d.writebacks_since = writebacks_due_ - seen;
  seen = writebacks_due_;
}

// The step lasts as long as its busiest resource needs. HBM and L2 bandwidth are shared by the CTAs
// in flight over the GPU, each an equal part (gpu/bench/hbm_share.cu: of 136 equal streaming CTAs on
// 132 SMs, the four SMs holding two end them about when the others end their one); a grid of one CTA
// per SM reads HBM slower than one of two, which the loaded latency (Rates::loaded_latency, where the
// preset gives it) puts in the latency term, not in this share (docs/design.md, "Timing engine"). A
// CTA that cannot overlap waits for its loads, then computes: its phase is charged to latency or
// compute by the larger part.
StepTime Replay::step_time(const StepDemand& d, std::int64_t ctas_in_flight, std::int64_t ctas_here) const {
  // HBM and the L2 serve the CTAs in flight alike, wherever they sit (gpu/bench/hbm_share.cu: 136 CTAs
  // on 132 SMs, the four SMs holding two end with the rest): this SM's part is its CTAs' parts.
  const double share = double(std::max<std::int64_t>(1, ctas_in_flight)) / double(std::max<std::int64_t>(1, ctas_here));
  const double t_dram = (double(d.dram_read + d.dram_write) * share + double(d.writebacks_since)) / hbm_peak_;
  // Loads, stores and reductions share the L2: their times add (gpu/bench/l2_reduce.cu: half the
  // SMs reducing and half loading each reach the fraction of their own peak that sums to one).
  const double t_l2 = options_.l2_enabled ? double(d.l2_bytes) * share / rates_.l2 + d.l2_reduce * share : 0.0;
  const double in_flight = std::min(d.window, rates_.in_flight_per_sm);
  const double memory = in_flight > 0 ? d.latency_bytes / in_flight : 0.0;
  const bool serial_waits = 2 * d.serial_memory > d.serial;
  const double pipes = std::max({d.issued, d.chain, d.issue, d.red});
  const double t_compute = std::max(pipes, serial_waits ? 0.0 : d.serial);
  const double t_latency = std::max(memory, serial_waits ? d.serial : 0.0);
  // CTAs in step: every CTA's shared-memory traffic at the SM's bandwidth, then the longest wait after
  // a CTA's products (gpu/bench/flash1_step.sh: two CTAs of flash1 take their two pairs' wavefronts
  // at one a clock plus one CTA's softmax and loads).
  const double t_sram = d.sram + d.after_products;
  const double step_s = std::max({t_dram, t_l2, t_compute, t_latency, t_sram});
  if (step_s == t_dram) return {step_s, Limiter::dram};
  if (step_s == t_compute) return {step_s, Limiter::compute};
  if (step_s == t_latency) return {step_s, Limiter::latency};
  if (step_s == t_l2) return {step_s, Limiter::l2};
  return {step_s, Limiter::sram};
}

void Replay::retire(const KernelPlan& k, std::int32_t kernel_index, std::vector<Resident>& here, Grid& grid, double t1,
                    bool shared_sm, std::vector<std::int32_t>& freed, double& freed_span_s) {
  std::size_t kept = 0;
  for (std::size_t n = 0; n < here.size(); ++n) {
    Resident r = here[n];
    if (++r.phase == k.programs[r.program].phase_count) {
      if (options_.record_timeline) {
        if (result_.timeline.ctas.size() < Timeline::kMaxSpans)
          result_.timeline.ctas.push_back({kernel_index, r.sm, r.slot, r.cta, r.start_s, t1});
        else
          ++result_.timeline.dropped_spans;
      }
      if (shared_sm && grid.queue() && grid.next < grid.ctas && grid.ctas - grid.next < wave_slots_) {  // refill_last_wave
        freed.push_back(r.slot);
        freed_span_s = std::max(freed_span_s, t1 - r.start_s);
        continue;
      }
      if (!grid.place(r, t1)) continue;
      r.prefetched = k.persistent && k.double_buffered;
    }
    here[kept++] = r;
  }
  here.resize(kept);
}

template <class Queue>
void Replay::refill_last_wave(std::int64_t s, double t, const KernelPlan& k, Grid& grid,
                              Queue& ready, Queue& leaving, std::vector<std::vector<Resident>>& resident,
                              std::vector<std::vector<std::int32_t>>& freed,
                              std::vector<double>& freed_span_s) const {
  // gpu/bench/cta_placement.cu (assets/measurements/h100-cta-placement.txt): CTAs that share an SM's
  // shared memory or pipes do not keep pace (the oldest ends first: 3 CTAs of shared-memory loads an
  // SM ended at 0.51, 0.78 and 1.0 of the wave), and a freed slot takes the next CTA 0.1–0.4 µs
  // later, so the SMs' first slots free before their second ones and the last 116 of 512 CTAs went
  // one an SM. The engine's SM steps its CTAs together, so it hands out the slots they free at once
  // in that order. (CTAs that end together, as HBM's streams do (gpu/bench/hbm_share.cu), left the
  // last wave in clumps of 1–3 an SM where their slots happened to free first: retire keeps
  // refilling those at once.)
  const double window = freed_span_s[s] * kSlotsFreeTogether;
  std::vector<std::pair<double, std::int64_t>> near;  // SMs stepping next within the window
  while (!ready.empty() && ready.top().first <= t + window) {
    near.push_back(ready.top());
    ready.pop();
  }
  std::vector<std::pair<double, std::int64_t>> takers{{t, s}};
  for (const auto& e : near)
    if (!freed[e.second].empty()) takers.push_back(e);
  for (std::size_t round = 0;; ++round) {
    bool any = false;
    for (const auto& [at, sm] : takers) {
      if (round >= freed[sm].size()) continue;
      any = true;
      Resident r;
      r.sm = static_cast<std::int32_t>(sm);
      r.slot = freed[sm][round];
      if (!grid.place(r, at)) continue;
      r.prefetched = k.persistent && k.double_buffered;
      resident[sm].push_back(r);
      freed[sm][round] = -1;  // taken
    }
    if (!any) break;
  }
  for (const auto& [at, sm] : takers) {
    const auto taken = std::count(freed[sm].begin(), freed[sm].end(), -1);
    if (const auto left = static_cast<std::int64_t>(freed[sm].size()) - taken; left > 0) leaving.push({at, left});
    freed[sm].clear();
    freed_span_s[sm] = 0;
  }
  for (const auto& e : near) ready.push(e);
}

// Per-SM busy time by limiter, scaled to the kernel's duration.
void Replay::end_kernel(KernelTiming& kt, const BusyTime& busy, double start_s, double end_s) {
  const double total = busy.total();
  const double span = end_s - start_s;
  if (total > 0) {
    kt.bound_dram_s = span * busy.dram / total;
    kt.bound_l2_s = span * busy.l2 / total;
    kt.bound_compute_s = span * busy.compute / total;
    kt.bound_latency_s = span * busy.latency / total;
    kt.bound_sram_s = span * busy.sram / total;
  }
  now_s_ = end_s;
  kt.time_s = now_s_ - kt.start_s;
  result_.kernels.push_back(kt);
}

void Replay::run(const KernelPlan& k, std::int32_t kernel_index) {
  rates_ = k.matmul_on_fp32_units || k.holds_gpu_clock ? fp32_rates_ : pipe_rates_;
  if (options_.l2_enabled) {
    const TileSharing sharing = tile_sharing(k);
    shared_tensors_ = sharing.shared;
    for (PartitionedL2& c : l2_) c.set_own_footprint(sharing.own_bytes_per_cta);
  }
  const std::int64_t S = gpu_.sm_count;
  const Occupancy occ = occupancy(k, gpu_, sram_per_sm_, sram_per_block_, options_.sram_bytes_per_block_source(gpu_));
  KernelTiming kt = begin_kernel(k, occ);
  const double start_s = now_s_ + gpu_.kernel_overhead_ns * 1e-9;  // launch: the first CTAs start after it
  const PipeCosts pipes = pipe_costs(k, rates_, occ.ctas_per_sm);
  Grid grid{static_cast<std::int64_t>(k.programs.size()), kt.tiles, 0, k.static_tiles};
  std::vector<std::vector<Resident>> resident = place_first_wave(grid, occ.ctas_per_sm, start_s);
  // The last wave spread over the SMs as measured: for up to 3 CTAs an SM (gpu/bench/cta_placement.cu
  // ran 1–3); with more, every freed slot takes the next CTA at once, to the grid's end.
  wave_slots_ = occ.ctas_per_sm <= kLastWaveMeasuredCtasPerSm ? S * occ.ctas_per_sm : 0;
  // The last wave's freed slots, per SM, until refill_last_wave hands them out, and the span of the
  // CTAs that left them.
  std::vector<std::vector<std::int32_t>> freed(static_cast<std::size_t>(S));
  std::vector<double> freed_span_s(static_cast<std::size_t>(S), 0.0);

  // SMs by their own clock, earliest first (lower SM first on ties, as the grid order fills them).
  using Entry = std::pair<double, std::int64_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
  std::int64_t ctas_in_flight = 0;
  for (std::int64_t s = 0; s < S; ++s)
    if (!resident[s].empty()) {
      ready.push({start_s, s});
      ctas_in_flight += static_cast<std::int64_t>(resident[s].size());
    }
  // When CTAs that leave no successor end their last step, and how many: each keeps its part of HBM
  // and the L2 until then, so the CTAs still working get no more than the peak between them.
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> leaving;
  // HBM's load: the bytes in flight over the GPU, each SM's HBM-bound window of its last step
  // (StepDemand::dram_window) from when it issued them until it leaves. An SM's first step sees
  // what the SMs stepped before it issued: the first wave's SMs, which start together, are served
  // in SM order, so the load builds up over it.
  std::vector<double> sm_window(static_cast<std::size_t>(S), 0.0);
  writebacks_due_ = 0;
  writebacks_seen_.assign(static_cast<std::size_t>(S), 0);
  double gpu_window = 0;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> emptied;

  BusyTime busy;
  double end_s = start_s;
  std::int64_t peak_for_ctas = -1;  // the CTAs in flight hbm_peak_ was worked out for
  while (!ready.empty()) {
    const auto [t0, s] = ready.top();
    ready.pop();
    if (!freed[s].empty()) refill_last_wave(s, t0, k, grid, ready, leaving, resident, freed, freed_span_s);
    if (resident[s].empty()) {  // nothing left for this SM (its slots went unfilled, here or by another SM's refill)
      emptied.push({t0, s});
      continue;
    }
    for (; !leaving.empty() && leaving.top().first <= t0; leaving.pop()) ctas_in_flight -= leaving.top().second;
    for (; !emptied.empty() && emptied.top().first <= t0; emptied.pop()) {
      gpu_window -= sm_window[emptied.top().second];
      sm_window[emptied.top().second] = 0;
    }
    // HBM's peak for the threads in flight: the CTAs in flight's threads per SM they fill.
    // (It changes only as CTAs come and go: worked out again only then; two powers a step were 3 %
    // of the engine's time.)
    if (ctas_in_flight != peak_for_ctas) {
      peak_for_ctas = ctas_in_flight;
      hbm_peak_ = rates_.threads_peak(double(ctas_in_flight * k.threads_per_cta) /
                                          double(std::max<std::int64_t>(1, std::min(S, ctas_in_flight))),
                                      double(S));
    }
    hbm_latency_s_ = rates_.loaded_latency(gpu_window, hbm_peak_);
    std::vector<Resident>& here = resident[s];
    StepDemand demand;  // one step of this SM: each resident CTA carries out one phase
    const auto ctas_here = static_cast<std::int64_t>(here.size());
    for (const Resident& r : here) serve_phase(k, r, pipes, ctas_in_flight, demand);
    take_writebacks(demand, s);
    const StepTime step = step_time(demand, ctas_in_flight, ctas_here);
    busy.add(step);
    const double t1 = t0 + step.seconds;
    if (options_.record_timeline)
      add_sample(result_.timeline, sample_bin_s_, {t0, t1, demand.dram_read, demand.dram_write + demand.writebacks, demand.l2_bytes});
    kt.dram_read_bytes += demand.dram_read;
    kt.dram_write_bytes += demand.dram_write + demand.writebacks;
    ++kt.rounds;
    // CTAs in step have their loads out only while they wait for them: HBM sees the SM's window
    // for that part of the step (Little's law on the bytes in flight).
    const double out = k.ctas_in_step && step.seconds > 0 ? std::min(1.0, demand.in_step_memory / step.seconds) : 1.0;
    const double w = std::min(demand.dram_window, rates_.in_flight_per_sm) * out;
    gpu_window += w - sm_window[s];
    sm_window[s] = w;
    // The kernel so far spent most of its SMs' time on their pipes or shared memory, which its CTAs share.
    const bool shared_sm = 2 * (busy.compute + busy.sram) > busy.total();
    retire(k, kernel_index, here, grid, t1, shared_sm, freed[s], freed_span_s[s]);
    const auto held = static_cast<std::int64_t>(here.size() + freed[s].size());  // freed slots wait for a CTA
    if (const auto left = ctas_here - held; left > 0) leaving.push({t1, left});
    end_s = std::max(end_s, t1);
    if (held > 0) ready.push({t1, s});
    else emptied.push({t1, s});
  }
  end_kernel(kt, busy, start_s, end_s);
}

}  // namespace

// [SECTION] Public entry points

std::int64_t EngineResult::sm_read_bytes() const { return sum_field(memory, &TensorMemory::sm_read_bytes); }
std::int64_t EngineResult::sm_write_bytes() const { return sum_field(memory, &TensorMemory::sm_write_bytes); }
std::int64_t EngineResult::read_hit_bytes() const { return sum_field(memory, &TensorMemory::read_hit_bytes); }
std::int64_t EngineResult::dram_read_bytes() const { return sum_field(memory, &TensorMemory::dram_read_bytes); }
std::int64_t EngineResult::dram_write_bytes() const { return sum_field(memory, &TensorMemory::dram_write_bytes); }

void validate_for_engine(const GpuSpec& gpu) {
  // Presets already hold positive numbers and power-of-two lines and sectors (gpu_spec.cpp);
  // what is left is what only the engine needs.
  if (gpu.l2_line_bytes % gpu.l2_sector_bytes != 0)
    fail_input("{}: numbers.l2_sector_bytes: {} does not divide l2_line_bytes ({})", gpu.origin, gpu.l2_sector_bytes,
               gpu.l2_line_bytes);
  if (gpu.l2_bytes < gpu.l2_line_bytes)
    fail_input("{}: numbers.l2_bytes: {} B is less than one line ({} B)", gpu.origin, gpu.l2_bytes, gpu.l2_line_bytes);
  auto positive = [&](double v, const char* key) {
    if (!(v > 0)) fail_input("{}: numbers.{}: must be positive for the timing engine, got {}", gpu.origin, key, v);
  };
  positive(gpu.hbm_bandwidth_gbps, "hbm_bandwidth_gbps");
  positive(gpu.l2_bandwidth_gbps, "l2_bandwidth_gbps");
  positive(gpu.tensor_tflops * gpu.gemm_efficiency, "gemm_efficiency");
  // Every kernel is timed from the SM's pipes (docs/design.md#the-sms-pipes).
  positive(gpu.mma_sync_flops_per_cycle_per_sm, "mma_sync_flops_per_cycle_per_sm");
  positive(gpu.mma_sync_flops_per_cycle_per_warp, "mma_sync_flops_per_cycle_per_warp");
  positive(gpu.ex2_per_cycle_per_sm, "ex2_per_cycle_per_sm");
  positive(gpu.fp32_fma_flops_per_cycle_per_sm, "fp32_fma_flops_per_cycle_per_sm");
  positive(gpu.pipe_clock_mhz, "pipe_clock_mhz");
  positive(gpu.hbm_efficiency, "hbm_efficiency");
  positive(double(gpu.hbm_bytes_in_flight_per_sm), "hbm_bytes_in_flight_per_sm");
  positive(gpu.sram_bytes_per_cycle_per_sm * gpu.clock_mhz, "sram_bytes_per_cycle_per_sm");
  positive(double(gpu.sm_count), "sm_count");
}

std::vector<KernelPlan> plan_kernels(Algo algo, const AttentionProblem& p, Blocks blocks, const GpuSpec& gpu,
                                     const EngineOptions& options) {
  return algo->plan_kernels(p, blocks, gpu, options);
}

EngineResult run_plans(const std::vector<KernelPlan>& plans, const GpuSpec& gpu, const EngineOptions& options) {
  validate_for_engine(gpu);
  EngineResult result;
  result.l2_enabled = options.l2_enabled;
  Replay replay(gpu, options, result);
  const Rates rates = rates_of(gpu, gpu.pipe_clock_mhz);
  double compute_s = 0;
  for (std::size_t n = 0; n < plans.size(); ++n) {
    const KernelPlan& k = plans[n];
    std::int64_t mm = 0, nm = 0;
    for (const CtaProgram& pg : k.programs)
      for (std::int32_t f = pg.first_phase; f < pg.first_phase + pg.phase_count; ++f) {
        mm += k.phases[f].matmul_flops;
        nm += k.phases[f].non_matmul_flops;
      }
    mm *= k.instances;
    nm *= k.instances;
    result.matmul_flops += mm;
    result.non_matmul_flops += nm;
    const double sms = double(gpu.sm_count);
    compute_s += double(mm) / (matmul_rate_of(k, rates) * sms) + double(nm) / (rates.fp32_per_sm / 2 * sms);
    if (n > 0 && options.l2_flushed_between_kernels) replay.flush_l2();
    replay.run(k, static_cast<std::int32_t>(n));
  }
  replay.count_evicted_dirty();
  result.predicted_s = replay.now_s();
  result.compute_s = compute_s;
  result.hbm_s = double(result.dram_read_bytes() + result.dram_write_bytes()) / rates.dram;
  result.l2_s = options.l2_enabled ? double(result.sm_read_bytes() + result.sm_write_bytes()) / rates.l2 : 0.0;
  result.dram_dirty_at_end_bytes = replay.dirty_bytes();
  return result;
}

void check_engine_size(Algo algo, const AttentionProblem& problem, Blocks blocks, bool blocks_chosen) {
  check_countable(algo, problem, blocks, blocks_chosen);
  const BlockGrid grid = algo->grid(problem, blocks);
  const std::int64_t pairs = grid.Tr * grid.Tc;  // at most kMaxCountedPairs: no overflow
  if (pairs > kMaxPlanPairs)
    fail_input("{}, more than the timing engine plans in one run ({}); choose a smaller --seq-len or larger "
               "--block-rows/--block-cols, or --counts-only",
               too_many_pairs_lead(algo, problem, blocks, blocks_chosen), kMaxPlanPairs);
  const std::int64_t instances = algo->instances(problem);
  if (saturating_mul(instances, pairs) > kMaxEngineTotalPairs)
    fail_input("--batch/--heads: {} {} × {} block pairs is more than the timing engine replays in one run ({}); "
               "every instance is alike: choose a smaller B·H, or --counts-only",
               instances, algo->instance_name(problem), pairs, kMaxEngineTotalPairs);
}

EngineResult run_engine(Algo algo, const AttentionProblem& problem, Blocks blocks, const GpuSpec& gpu,
                        const EngineOptions& options) {
  check_engine_size(algo, problem, blocks);
  validate_for_engine(gpu);
  return run_plans(plan_kernels(algo, problem, blocks, gpu, options), gpu, options);
}

// [SECTION] Chrome trace

std::string timeline_chrome_trace(const EngineResult& r, const GpuSpec& gpu) {
  // Times in microseconds, as the format wants. pid 0: kernels and HBM; pid 1: one thread per SM slot.
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  auto us = [](double s) { return s * 1e6; };
  out += fmt::format("{{\"ph\":\"M\",\"pid\":0,\"name\":\"process_name\",\"args\":{{\"name\":\"{} — kernels and HBM\"}}}},\n",
                     gpu.display_name);
  out += "{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":\"SMs (one track per CTA slot)\"}}";
  std::int64_t max_slots = 1;
  for (const KernelTiming& k : r.kernels) max_slots = std::max(max_slots, k.ctas_per_sm);
  for (std::int64_t sm = 0; sm < gpu.sm_count; ++sm)
    for (std::int64_t slot = 0; slot < max_slots; ++slot)
      out += fmt::format(",\n{{\"ph\":\"M\",\"pid\":1,\"tid\":{},\"name\":\"thread_name\",\"args\":{{\"name\":\"SM {} slot {}\"}}}}",
                         sm * max_slots + slot, sm, slot);
  for (const KernelTiming& k : r.kernels)
    out += fmt::format(",\n{{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"name\":\"{}\",\"ts\":{:.4f},\"dur\":{:.4f},"
                       "\"args\":{{\"ctas\":{},\"tiles\":{},\"ctas_per_sm\":{},\"waves\":{}}}}}",
                       k.name, us(k.start_s), us(k.time_s), k.ctas, k.tiles, k.ctas_per_sm, k.waves);
  for (const CtaSpan& c : r.timeline.ctas)
    out += fmt::format(",\n{{\"ph\":\"X\",\"pid\":1,\"tid\":{},\"name\":\"{} CTA {}\",\"ts\":{:.4f},\"dur\":{:.4f}}}",
                       c.sm * max_slots + c.slot, r.kernels[c.kernel].name, c.cta, us(c.start_s), us(c.end_s - c.start_s));
  for (const BandwidthSample& b : r.timeline.hbm)
    out += fmt::format(",\n{{\"ph\":\"C\",\"pid\":0,\"name\":\"HBM GB/s\",\"ts\":{:.4f},\"args\":{{\"DRAM\":{:.1f},\"SM-L2\":{:.1f}}}}}",
                       us(b.start_s), b.dram_gbps(),
                       b.end_s > b.start_s ? double(b.l2_bytes) / (b.end_s - b.start_s) / 1e9 : 0.0);
  if (!r.timeline.hbm.empty())
    out += fmt::format(",\n{{\"ph\":\"C\",\"pid\":0,\"name\":\"HBM GB/s\",\"ts\":{:.4f},\"args\":{{\"DRAM\":0,\"SM-L2\":0}}}}",
                       us(r.timeline.hbm.back().end_s));
  out += "\n]}\n";
  return out;
}

}  // namespace hbmlab
