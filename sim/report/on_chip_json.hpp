// The `on_chip` object of `simulate --json` (shared memory ↔ registers, warp instructions, and how
// busy each of the SM's pipes is over a kernel's predicted time, at the preset's measured rates).
#pragma once

#include <nlohmann/json.hpp>

#include "sim/algo/warp_layout.hpp"
#include "sim/spec/gpu_spec.hpp"

namespace hbmlab {

// `time_s`: the kernel's (or the pass's) predicted time; pipes whose rate the preset does not give
// are null, and `limiter` names the busiest of the others.
nlohmann::ordered_json on_chip_json(const OnChipCounts& c, double time_s, const GpuSpec& gpu);

}  // namespace hbmlab
