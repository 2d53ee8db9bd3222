// In-process traffic counters through the CUPTI Range Profiler API (CUDA 12.6+): DRAM bytes read
// and written, and SM↔L2 traffic (tex-unit sectors × 32 bytes), for one user range around a launch
// sequence; when asked, the SM's on-chip counters too (shared-memory wavefronts, ldmatrix, tensor
// and exponent-unit instructions, tensor-pipe busy). libcupti is opened at run time, so a build or
// machine without it still runs (times only).
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace hbmlab::gpu {

struct TrafficCounters {
  double dram_read_bytes = 0;
  double dram_write_bytes = 0;
  double l2_sm_read_bytes = 0;   // lts__t_sectors_srcunit_tex_op_read.sum × 32
  double l2_sm_write_bytes = 0;  // lts__t_sectors_srcunit_tex_op_write.sum × 32
  int passes = 0;                // replays CUPTI needed
  // On-chip counters (RangeCounters::create with on_chip), the names of docs/on-chip.md's records.
  bool on_chip = false;
  double smem_ld_bytes = 0;          // l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum × 128
  double smem_st_bytes = 0;          // l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum × 128
  double ldmatrix_instructions = 0;  // smsp__inst_executed_op_ldsm.sum
  double mma_instructions = 0;       // smsp__inst_executed_pipe_tensor_op_hmma.sum
  double ex2_instructions = 0;       // sm__inst_executed_pipe_xu.sum (every exponent-unit instruction)
  double tensor_pipe_busy = 0;       // sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed / 100
};

class RangeCounters {
 public:
  // nullptr, with the reason in *why_not, when counters cannot be read here (no libcupti, no
  // permission to profile, an unsupported chip).
  // `on_chip`: the on-chip counters as well (more replay passes).
  static std::unique_ptr<RangeCounters> create(std::string* why_not, bool on_chip = false);
  virtual ~RangeCounters() = default;
  // Runs `launches` once per pass CUPTI needs (before each pass, `before_pass`, outside the range,
  // e.g. an L2 flush) and returns the range's counters. Throws std::runtime_error on a CUPTI error.
  virtual TrafficCounters measure(const std::function<void()>& launches, const std::function<void()>& before_pass) = 0;
};

}  // namespace hbmlab::gpu
