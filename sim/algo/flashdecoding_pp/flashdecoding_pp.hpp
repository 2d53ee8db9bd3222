// FlashDecoding++'s unified max and its fallback, for the room (flashdecoding_pp.cpp) and its tests:
// the default φ, the rule the counts follow for which rows fall back, and the step stream with chosen
// row blocks recomputed, so that a test can count what the numerics found on adversarial inputs.
#pragma once

#include <span>

#include "sim/algo/step.hpp"
#include "sim/engine/counters.hpp"
#include "sim/workload/problem.hpp"

namespace hbmlab {

// φ when --unified-max is not given, from the scores' statistics as FlashDecoding++ sets it offline
// (Hong et al. 2023, Section 3: from the distribution of the softmax inputs a model produces).
// hbmlab's inputs have standard-normal scores (q, k ~ N(0, I_d), scale 1/√d: mean 0, variance 1), so
// φ is the expected largest score of a row of N: μ + σ·√(2 ln N) = √(2 ln N) (0 for N = 1).
double default_unified_max(std::int64_t N);

// The counts' rule: every row of the problem has scores with those statistics, so all rows fall back
// or none: when the expected row max √(2 ln N) lies outside φ's safe range for the dtype
// (SplitKvAttention::safe_range: ±64 for bf16 and fp32, about ±10 for fp16).
bool rows_fall_back(std::int64_t N, double phi, Dtype dtype);

// FlashDecoding++'s steps of one instance with the given row blocks recomputed on the synchronised
// path, and their closed form. The room's own emit() recomputes the blocks rows_fall_back says.
void emit_flashdecoding_pp(const AttentionProblem& problem, Blocks blocks, std::span<const std::int64_t> recomputed,
                           StepSink& sink);
Counts flashdecoding_pp_form(const AttentionProblem& problem, Blocks blocks, std::span<const std::int64_t> recomputed);

}  // namespace hbmlab
