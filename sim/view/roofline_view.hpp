// View model of the Inside-the-SM tab's roofline: each kernel of a simulated pass as two points,
// its tensor FLOPs per byte of DRAM traffic and per byte of shared-memory traffic, at the FLOP/s its
// predicted time gives, under three ceilings from the GPU preset: HBM bandwidth, shared-memory
// bandwidth (all SMs) and the tensor peak (with the measured mma.sync ceiling where the preset has it).
#pragma once

#include <string>
#include <vector>

#include "sim/engine/simulate.hpp"

namespace hbmlab::view {

struct RooflinePoint {
  std::string kernel;
  double flops = 0;        // tensor-core FLOPs (mma.sync, wgmma), or the pass's matmul FLOPs for a one-kernel pass on FP32 units
  double dram_bytes = 0;   // read and written after the L2
  double smem_bytes = 0;   // filled, read (registers and tensor cores) and written
  double time_s = 0;       // predicted
  double flop_per_dram_byte() const { return dram_bytes > 0 ? flops / dram_bytes : 0; }
  double flop_per_smem_byte() const { return smem_bytes > 0 ? flops / smem_bytes : 0; }
  double flop_per_s() const { return time_s > 0 ? flops / time_s : 0; }
};

struct RooflineView {
  double hbm_bytes_per_s = 0;       // hbm_bandwidth_gbps
  double smem_bytes_per_s = 0;      // sram_bytes_per_cycle_per_sm × SMs × pipe_clock_mhz
  double tensor_flop_per_s = 0;     // tensor_tflops (the datasheet's peak)
  double mma_sync_flop_per_s = 0;   // mma_sync_flops_per_cycle_per_sm × SMs × pipe_clock_mhz; 0: not in the preset
  std::vector<RooflinePoint> points;  // kernels with FLOPs and on-chip counts
  std::vector<std::string> left_out;  // kernels without, and why
  // Where the two ceilings of a byte kind meet the tensor peak: FLOPs per byte below which that
  // level's bandwidth, not the tensor cores, caps the kernel.
  double hbm_ridge() const { return hbm_bytes_per_s > 0 ? tensor_flop_per_s / hbm_bytes_per_s : 0; }
  double smem_ridge() const { return smem_bytes_per_s > 0 ? tensor_flop_per_s / smem_bytes_per_s : 0; }
};

RooflineView roofline_view(const SimulationResult& result);

}  // namespace hbmlab::view
