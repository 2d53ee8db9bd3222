// In-process traffic counters through the CUPTI Range Profiler API (CUDA 12.6+): DRAM bytes read
// and written, and SM↔L2 traffic (tex-unit sectors × 32 bytes), for one user range around a launch
// sequence. libcupti is opened at run time, so a build or machine without it still runs (times only).
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
};

class RangeCounters {
 public:
  // nullptr, with the reason in *why_not, when counters cannot be read here (no libcupti, no
  // permission to profile, an unsupported chip).
  static std::unique_ptr<RangeCounters> create(std::string* why_not);
  virtual ~RangeCounters() = default;
  // Runs `launches` once per pass CUPTI needs (before each pass, `before_pass`, outside the range,
  // e.g. an L2 flush) and returns the range's counters. Throws std::runtime_error on a CUPTI error.
  virtual TrafficCounters measure(const std::function<void()>& launches, const std::function<void()>& before_pass) = 0;
};

}  // namespace hbmlab::gpu
