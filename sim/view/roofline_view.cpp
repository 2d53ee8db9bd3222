// The Inside-the-SM tab's roofline (roofline_view.hpp): ceilings from the preset, a point per kernel.
#include "sim/view/roofline_view.hpp"

namespace hbmlab::view {

RooflineView roofline_view(const SimulationResult& res) {
  const GpuSpec& gpu = res.gpu;
  RooflineView v;
  // The measured pipes' ceilings at the clock the SM holds while they are busy (pipe_clock_mhz), the
  // clock the engine times them at, so no predicted point can stand above its ceiling.
  const double clock_hz = (gpu.pipe_clock_mhz > 0 ? gpu.pipe_clock_mhz : gpu.clock_mhz) * 1e6, sms = double(gpu.sm_count);
  v.hbm_bytes_per_s = gpu.hbm_bandwidth_gbps * 1e9;
  v.smem_bytes_per_s = gpu.sram_bytes_per_cycle_per_sm * sms * clock_hz;
  v.tensor_flop_per_s = gpu.tensor_tflops * 1e12;
  v.mma_sync_flop_per_s = gpu.mma_sync_flops_per_cycle_per_sm * sms * clock_hz;
  const auto& kernels = res.engine.kernels;
  for (const KernelTiming& k : kernels) {
    const OnChipCounts& c = k.on_chip;
    RooflinePoint p;
    p.kernel = k.name;
    p.flops = double(c.mma_flops() + c.wgmma_flops);
    if (p.flops == 0 && kernels.size() == 1) p.flops = double(res.engine.matmul_flops);  // flash1: FMAs
    const SmemBytes t = c.total();
    p.smem_bytes = double(t.fill + t.read + t.mma_read + t.write);
    p.dram_bytes = double(k.dram_read_bytes + k.dram_write_bytes);
    p.time_s = k.time_s;
    if (!c.modelled) v.left_out.push_back(k.name + ": its warp layout is not described");
    else if (p.flops <= 0) v.left_out.push_back(k.name + ": no matmul FLOPs");
    else if (p.smem_bytes <= 0 || p.dram_bytes <= 0 || p.time_s <= 0) v.left_out.push_back(k.name + ": no shared-memory or DRAM bytes");
    else v.points.push_back(p);
  }
  return v;
}

}  // namespace hbmlab::view
