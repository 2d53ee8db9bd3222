// The block size × SRAM sweep.
#include "sim/bounds/sweep.hpp"

#include <limits>

#include "sim/common/parallel.hpp"
#include "sim/engine/replay.hpp"
#include "sim/engine/timing.hpp"

namespace hbmlab {

std::vector<SweepPoint> run_sweep(const SweepConfig& config, const Progress& progress) {
  config.problem.validate();
  std::vector<std::int64_t> srams = config.sram_bytes;
  if (srams.empty()) srams.push_back(config.gpu.sram_bytes_per_sm);
  const std::size_t total = config.algos.size() * srams.size() * config.block_rows.size() * config.block_cols.size();
  std::vector<SweepPoint> points;
  points.reserve(total);
  for (Algo algo : config.algos)
    for (std::int64_t sram : srams)
      for (std::int64_t Br : config.block_rows)
        for (std::int64_t Bc : config.block_cols) {
          SweepPoint pt;
          pt.algo = algo;
          pt.sram_bytes = sram;
          pt.M_elements = sram / config.problem.elem_bytes();
          pt.blocks = {std::min(Br, algo->heads_per_instance(config.problem) * config.problem.Nq()),
                       std::min(Bc, config.problem.seq_len)};
          pt.problem = algo->prepare(config.problem, pt.blocks, config.gpu);
          const BlockGrid grid = algo->grid(pt.problem, pt.blocks);
          pt.Tr = grid.Tr;
          pt.Tc = grid.Tc;
          pt.working_set_bytes = algo->working_set_bytes(pt.problem, pt.blocks);
          pt.fits = pt.working_set_bytes <= sram;
          pt.total = count_problem(algo, pt.problem, pt.blocks);
          pt.bound_ratio = bound_for(algo, pt.problem, pt.M_elements, pt.total.accesses()).ratio;
          pt.predicted_s = std::numeric_limits<double>::quiet_NaN();
          points.push_back(pt);
        }
  // The timing engine costs far more than the counts; the points run on all cores. It needs the
  // tiles to fit, so points that do not have no time.
  parallel_for(
      points.size(),
      [&](std::size_t i) {
        SweepPoint& pt = points[i];
        if (!pt.fits) return;
        EngineOptions options;
        options.sram_bytes_per_sm = options.sram_bytes_per_block = pt.sram_bytes;
        pt.predicted_s = run_engine(pt.algo, pt.problem, pt.blocks, config.gpu, options).predicted_s;
      },
      progress);
  return points;
}

}  // namespace hbmlab
