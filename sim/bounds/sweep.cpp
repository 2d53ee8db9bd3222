// The block size × SRAM sweep.
#include "sim/bounds/sweep.hpp"

#include <algorithm>
#include <limits>

#include "sim/common/error.hpp"
#include "sim/common/limits.hpp"
#include "sim/common/parallel.hpp"
#include "sim/engine/replay.hpp"
#include "sim/engine/timing.hpp"

namespace hbmlab {

std::vector<SweepPoint> run_sweep(const SweepConfig& config, const Progress& progress) {
  config.problem.validate();
  // Without a given SRAM, the GPU's: an SM's for the SM (and M), and what one CTA may use of it for
  // the CTA, as `simulate` takes them (an H100's 228 and 227 KiB).
  const bool gpu_sram = config.sram_bytes.empty();
  std::vector<std::int64_t> srams = config.sram_bytes;
  if (gpu_sram) srams.push_back(config.gpu.sram_bytes_per_sm);
  const std::int64_t total = saturating_mul(
      saturating_mul(static_cast<std::int64_t>(config.algos.size()), static_cast<std::int64_t>(srams.size())),
      saturating_mul(static_cast<std::int64_t>(config.block_rows.size()), static_cast<std::int64_t>(config.block_cols.size())));
  if (total > kMaxSweepPoints)
    fail_input("--block-rows/--block-cols/--sram-bytes: {} rooms × {} SRAM sizes × {} Br × {} Bc = {} points is more "
               "than a sweep runs ({}); give shorter lists",
               config.algos.size(), srams.size(), config.block_rows.size(), config.block_cols.size(), total,
               kMaxSweepPoints);
  std::vector<SweepPoint> points;
  points.reserve(static_cast<std::size_t>(total));
  // Every point's size is checked before any is counted or timed (sim/common/limits.hpp).
  std::int64_t engine_pairs = 0;
  for (Algo algo : config.algos) algo->check_problem(config.problem);  // a shape the room does not model, named
  for (Algo algo : config.algos)
    for (std::int64_t sram : srams)
      for (std::int64_t Br : config.block_rows)
        for (std::int64_t Bc : config.block_cols) {
          SweepPoint pt;
          pt.algo = algo;
          pt.sram_bytes = sram;
          pt.cta_sram_bytes = gpu_sram ? std::min(config.gpu.sram_bytes_per_block, sram) : sram;
          pt.M_elements = sram / config.problem.elem_bytes();
          pt.blocks = {std::min(Br, algo->heads_per_instance(config.problem) * config.problem.Nq()),
                       std::min(Bc, config.problem.seq_len)};
          check_countable(algo, config.problem, pt.blocks);
          pt.problem = algo->prepare(config.problem, pt.blocks, config.gpu);
          const BlockGrid grid = algo->grid(pt.problem, pt.blocks);
          // A mask file describes one grid: refused (file and grid named) where these blocks make another.
          if (pt.problem.block_mask) pt.problem.block_mask->check(grid);
          pt.Tr = grid.Tr;
          pt.Tc = grid.Tc;
          pt.working_set_bytes = algo->working_set_bytes(pt.problem, pt.blocks);
          pt.fits = pt.working_set_bytes <= pt.cta_sram_bytes;
          if (pt.fits) {
            check_engine_size(algo, pt.problem, pt.blocks);
            engine_pairs += algo->instances(pt.problem) * pt.Tr * pt.Tc;  // each below kMaxEngineTotalPairs
          }
          points.push_back(pt);
        }
  if (engine_pairs > kMaxSweepEnginePairs)
    fail_input("--block-rows/--block-cols: the sweep's {} points replay {} block pairs in all, more than the timing "
               "engine replays in one sweep ({}); choose fewer or larger blocks, or a smaller B·H",
               points.size(), engine_pairs, kMaxSweepEnginePairs);
  for (SweepPoint& pt : points) {
    pt.total = count_problem(pt.algo, pt.problem, pt.blocks);
    pt.bound_ratio = bound_for(pt.algo, pt.problem, pt.M_elements, pt.total.accesses()).ratio;
    pt.predicted_s = std::numeric_limits<double>::quiet_NaN();
  }
  // The timing engine costs far more than the counts; the points run on all cores. It needs the
  // tiles to fit, so points that do not have no time.
  parallel_for(
      points.size(),
      [&](std::size_t i) {
        SweepPoint& pt = points[i];
        if (!pt.fits) return;
        EngineOptions options;
        options.sram_bytes_per_sm = pt.sram_bytes;
        options.sram_bytes_per_block = pt.cta_sram_bytes;
        options.sram_source = gpu_sram ? config.gpu.origin + ": numbers.sram_bytes_per_block" : config.sram_source;
        options.l2_enabled = config.l2_enabled;
        if (pt.algo->takes_launch()) options.launch = config.launch;
        if (!pt.algo->takes_launch_threads()) options.launch.threads_per_cta.reset();
        options.launch.kv_descending = config.kv_descending && pt.algo->has_kv_order();
        pt.predicted_s = run_engine(pt.algo, pt.problem, pt.blocks, config.gpu, options).predicted_s;
      },
      progress);
  return points;
}

}  // namespace hbmlab
