// Exponent fits over the rooms' counts.
#include "sim/bounds/bounds.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/algo/block_sparse/masks.hpp"
#include "sim/common/error.hpp"
#include "sim/common/limits.hpp"
#include "sim/engine/replay.hpp"

namespace hbmlab {

Counts closed_form(Algo algo, const AttentionProblem& p, Blocks b) { return algo->closed_form(p, b); }

Bound bound_for(Algo algo, const AttentionProblem& p, std::int64_t M, std::int64_t accesses) {
  Bound bound = algo->bound(p, M);
  bound.ratio = double(accesses) / bound.value;
  return bound;
}

double fit_exponent(std::span<const double> x, std::span<const double> y) {
  const std::size_t n = std::min(x.size(), y.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const double lx = std::log(x[k]), ly = std::log(y[k]);
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
  }
  const double denom = double(n) * sxx - sx * sx;
  return denom == 0 ? 0.0 : (double(n) * sxy - sx * sy) / denom;
}

namespace {

// Every point's size, before any is counted (sim/common/limits.hpp): each list at most
// kMaxSweepValues long, each point within what one run counts, all of them within kMaxBoundsPairs.
void check_bounds_size(const BoundsConfig& config) {
  const std::pair<const char*, std::size_t> lists[] = {{"--seq-lens", config.seq_lens.size()},
                                                       {"--head-dims", config.head_dims.size()},
                                                       {"--sram-elements", config.sram_elems.size()},
                                                       {"--densities", config.densities.size()}};
  for (const auto& [option, size] : lists)
    if (static_cast<std::int64_t>(size) > kMaxSweepValues)
      fail_input("{}: {} values is more than a bounds sweep takes ({})", option, size, kMaxSweepValues);
  std::int64_t total = 0;
  auto point = [&](Algo algo, std::int64_t N, std::int64_t d, std::int64_t M) {
    const Blocks blocks = algo->paper_blocks(M, d, N);
    const AttentionProblem problem{1, 1, N, d, config.dtype, config.causal};
    const BlockGrid grid = algo->grid(problem, blocks);
    const std::int64_t pairs = saturating_mul(grid.Tr, grid.Tc);
    if (pairs > kMaxCountedPairs)
      fail_input("--seq-lens/--head-dims/--sram-elements: N = {}, d = {}, M = {} gives {}'s blocks Br = {}, Bc = {}, "
                 "so Tr × Tc = {} block pairs, more than hbmlab replays in one run ({}); choose a smaller N, a smaller "
                 "d or a larger M",
                 N, d, M, algo->name(), blocks.Br, blocks.Bc, pairs, kMaxCountedPairs);
    total += pairs;
  };
  for (Algo algo : config.algos) {
    for (std::int64_t N : config.seq_lens) point(algo, N, config.base_d, config.base_M);
    for (std::int64_t d : config.head_dims) point(algo, config.base_N, d, config.base_M);
    for (std::int64_t M : config.sram_elems) point(algo, config.base_N, config.base_d, M);
    if (algo->supports().block_mask)
      for (std::size_t k = 0; k < config.densities.size(); ++k) point(algo, config.base_N, config.base_d, config.base_M);
  }
  if (total > kMaxBoundsPairs)
    fail_input("--seq-lens/--head-dims/--sram-elements: the sweep's points count {} block pairs in all, more than a "
               "bounds sweep counts ({}); give fewer or smaller values",
               total, kMaxBoundsPairs);
}

}  // namespace

std::vector<BoundsRow> run_bounds(const BoundsConfig& config) {
  check_bounds_size(config);
  std::vector<BoundsRow> rows;
  for (Algo algo : config.algos) {
    std::vector<SweepAxis> axes = {SweepAxis::N, SweepAxis::d, SweepAxis::M};
    if (algo->supports().block_mask) axes.push_back(SweepAxis::s);
    for (SweepAxis axis : axes) {
      BoundsRow row{algo, axis, {}, 0, algo->expected_exponent(axis), false, true, "", 0, 0};
      const std::size_t count = axis == SweepAxis::N   ? config.seq_lens.size()
                                : axis == SweepAxis::d ? config.head_dims.size()
                                : axis == SweepAxis::M ? config.sram_elems.size()
                                                       : config.densities.size();
      std::vector<double> xs, ys;
      for (std::size_t k = 0; k < count; ++k) {
        BoundsPoint pt;
        pt.N = axis == SweepAxis::N ? config.seq_lens[k] : config.base_N;
        pt.d = axis == SweepAxis::d ? config.head_dims[k] : config.base_d;
        pt.M = axis == SweepAxis::M ? config.sram_elems[k] : config.base_M;
        AttentionProblem problem{1, 1, pt.N, pt.d, config.dtype, config.causal};
        pt.blocks = algo->paper_blocks(pt.M, pt.d, pt.N);
        if (axis == SweepAxis::s) {
          problem.block_mask = parse_block_mask(fmt::format("random:{}:1", config.densities[k]));
          pt.s = density(BlockGrid(problem, pt.blocks));
        }
        pt.accesses = count_instance(algo, problem, pt.blocks).accesses();
        pt.closed_form_accesses = closed_form(algo, problem, pt.blocks).accesses();
        Bound bound = bound_for(algo, problem, pt.M, pt.accesses);
        if (axis == SweepAxis::s) {
          bound = block_sparse_bound(problem, pt.M, pt.s);
          bound.ratio = double(pt.accesses) / bound.value;
        }
        pt.bound_value = bound.value;
        pt.ratio = bound.ratio;
        row.bound_expression = bound.expression;
        row.exact_ok = row.exact_ok && pt.accesses == pt.closed_form_accesses;
        xs.push_back(axis == SweepAxis::N   ? double(pt.N)
                     : axis == SweepAxis::d ? double(pt.d)
                     : axis == SweepAxis::M ? double(pt.M)
                                            : pt.s);
        ys.push_back(double(pt.accesses));
        row.points.push_back(pt);
      }
      row.fitted = fit_exponent(xs, ys);
      row.exponent_ok = std::fabs(row.fitted - row.expected) <= config.tolerance;
      auto [lo, hi] = std::minmax_element(row.points.begin(), row.points.end(),
                                          [](const BoundsPoint& a, const BoundsPoint& b) { return a.ratio < b.ratio; });
      row.ratio_min = lo->ratio;
      row.ratio_max = hi->ratio;
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

}  // namespace hbmlab
