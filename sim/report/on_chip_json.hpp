// The `on_chip` object of `simulate --json` (shared memory ↔ registers, warp instructions, and how
// busy each of the SM's pipes is over a kernel's predicted time, at the preset's measured rates).
#pragma once

#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/algo/warp_layout.hpp"
#include "sim/engine/timing.hpp"
#include "sim/spec/gpu_spec.hpp"

namespace hbmlab {

// Each pipe's busy share of a kernel's predicted time at the preset's measured rate and at the clock
// the engine ran the kernel's pipes at (KernelTiming::sm_clock_mhz): demand / (rate per SM clock ×
// SMs × clock × time). None where the preset has no rate or the warp layout is not described;
// `limiter` names the busiest of the others.
struct PipeBusy {
  std::optional<double> tensor, smem, ex2;
  std::string limiter;  // "tensor", "smem" or "ex2"; empty when no share is known
};
PipeBusy pipe_busy(const KernelTiming& kernel, const GpuSpec& gpu);
// A pass's kernels together: each pipe's busy seconds, summed over the kernels at their own clocks, as
// a share of `time_s` (the pass's time), as the pass's counts sum theirs: a kernel whose layout is not
// described adds nothing (its counts stay 0), and a pipe no kernel has a share of is none.
PipeBusy pipe_busy(std::span<const KernelTiming> kernels, double time_s, const GpuSpec& gpu);

// `pipes`: pipe_busy's for the same kernel or pass; `clock_mhz`: the clock its pipes ran at (0: the
// kernels of a pass ran at different clocks, written null).
nlohmann::ordered_json on_chip_json(const OnChipCounts& c, const PipeBusy& pipes, double clock_mhz);

}  // namespace hbmlab
