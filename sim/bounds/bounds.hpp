// The exponent fits behind `hbmlab bounds`: counted accesses against N, d and M in log-log space,
// beside each room's closed form and bound (Algorithm::closed_form, Algorithm::bound).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "sim/algo/algorithm.hpp"
#include "sim/bounds/bound.hpp"
#include "sim/engine/counters.hpp"

namespace hbmlab {

// HBM traffic per tensor and matmul FLOPs of one (batch, head), from the formulas of docs/design.md#io-conventions rather
// than from the step streams, so that the two can check each other.
Counts closed_form(Algo algo, const AttentionProblem& problem, Blocks blocks);

// The room's bound, with counted accesses over it.
Bound bound_for(Algo algo, const AttentionProblem& problem, std::int64_t M_elements, std::int64_t accesses);

// Least-squares slope of log y against log x.
double fit_exponent(std::span<const double> x, std::span<const double> y);

struct BoundsPoint {
  std::int64_t N = 0, d = 0, M = 0;  // M in elements
  double s = 1;                      // kept block pairs over Tr·Tc (the s sweep's random mask)
  Blocks blocks;
  std::int64_t accesses = 0;
  std::int64_t closed_form_accesses = 0;
  double bound_value = 0;
  double ratio = 0;
};

struct BoundsRow {
  Algo algo = default_algo();
  SweepAxis axis;
  std::vector<BoundsPoint> points;
  double fitted = 0;
  double expected = 0;
  bool exponent_ok = false;  // |fitted − expected| <= tolerance
  bool exact_ok = false;     // every count equals its closed form
  std::string bound_expression;
  double ratio_min = 0, ratio_max = 0;
};

struct BoundsConfig {
  std::vector<Algo> algos{algorithms().begin(), algorithms().end()};
  std::vector<std::int64_t> seq_lens = {8192, 16384, 32768, 65536};
  std::vector<std::int64_t> head_dims = {32, 64, 128};
  std::vector<std::int64_t> sram_elems = {16384, 32768, 65536, 131072};  // M values
  // Densities of the s sweep (random:s masks), for rooms that take a block mask.
  std::vector<double> densities = {0.125, 0.25, 0.5, 1.0};
  std::int64_t base_N = 32768, base_d = 64, base_M = 65536;
  Dtype dtype = Dtype::fp16;
  bool causal = false;  // every point under the causal mask (the rooms that skip pairs count fewer)
  double tolerance = 0.05;
};

// Counts every point with blocks from the paper's rule for its M. Rooms that take a block mask also
// sweep its density s at the fixed N, d and M, against Proposition 4's Θ(N d + N² d² s / M).
std::vector<BoundsRow> run_bounds(const BoundsConfig& config);

}  // namespace hbmlab
