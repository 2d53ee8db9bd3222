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

// φ's safe range, in natural units: how far a row's largest score may lie above φ, or below it,
// before e^(x − φ), rounded to the dtype for the P̃V product, overflows or leaves the normal numbers.
// bf16 and fp32 have fp32's exponent range: ±64 (e^±64 ≈ 2^±92, where a sum of up to 2^24 terms times
// |v| < 8 stays finite: 2^27 · 2^92 < 2^128). fp16 ends at 65504 < 2^16 and its normal numbers at
// 2^−14: 15 ln 2 above and 14 ln 2 below (about ±10). The counts, the numerics and hbmlab's kernel
// (gpu/flash_decoding.cu) all draw the line here.
struct SafeRange {
  double above = 0, below = 0;
};
constexpr SafeRange unified_max_safe_range(Dtype dtype) {
  constexpr double ln2 = 0.6931471805599453;
  return dtype == Dtype::fp16 ? SafeRange{15 * ln2, 14 * ln2} : SafeRange{64, 64};
}

// The counts' rule: every row of the problem has scores with those statistics, so all rows fall back
// or none: when the expected row max √(2 ln N) lies outside φ's safe range for the dtype.
bool rows_fall_back(std::int64_t N, double phi, Dtype dtype);

// FlashDecoding++'s steps of one instance with the given row blocks recomputed on the synchronised
// path, and their closed form. The room's own emit() recomputes the blocks rows_fall_back says.
void emit_flashdecoding_pp(const AttentionProblem& problem, Blocks blocks, std::span<const std::int64_t> recomputed,
                           StepSink& sink);
Counts flashdecoding_pp_form(const AttentionProblem& problem, Blocks blocks, std::span<const std::int64_t> recomputed);

}  // namespace hbmlab
