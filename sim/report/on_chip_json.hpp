// The `on_chip` object of `simulate --json` (shared memory ↔ registers, warp instructions, and how
// busy each of the SM's pipes is over a kernel's predicted time, at the preset's measured rates).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/algo/warp_layout.hpp"
#include "sim/spec/gpu_spec.hpp"

namespace hbmlab {

// Each pipe's busy share of `time_s` (a kernel's or a pass's predicted time) at the preset's measured
// rate and clock: demand / (rate per SM clock × SMs × clock × time). None where the preset has no
// rate or the warp layout is not described; `limiter` names the busiest of the others.
struct PipeBusy {
  std::optional<double> tensor, smem, ex2;
  std::string limiter;  // "tensor", "smem" or "ex2"; empty when no share is known
};
PipeBusy pipe_busy(const OnChipCounts& c, double time_s, const GpuSpec& gpu);

// `time_s`: the kernel's (or the pass's) predicted time; pipes whose rate the preset does not give
// are null, and `limiter` names the busiest of the others.
nlohmann::ordered_json on_chip_json(const OnChipCounts& c, double time_s, const GpuSpec& gpu);

}  // namespace hbmlab
