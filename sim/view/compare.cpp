// Comparison view models: the three algorithms side by side and the block size × SRAM explorer.
#include "sim/view/compare.hpp"

#include <algorithm>
#include <limits>

#include "sim/common/error.hpp"

namespace hbmlab::view {

std::vector<AlgoBar> compare_algorithms(const SimulateRequest& base) {
  std::vector<AlgoBar> bars;
  for (Algo algo : kAllAlgos) {
    AlgoBar bar;
    bar.algo = algo;
    SimulateRequest r = base;
    r.algo = algo;
    r.numerics = NumericsMode::off;
    try {
      try {
        bar.result = simulate(r);
      } catch (const InputError&) {
        if (!r.block_rows && !r.block_cols) throw;
        r.block_rows.reset();
        r.block_cols.reset();
        bar.result = simulate(r);
        bar.result.blocks.note = "the chosen Br, Bc do not fit this algorithm's working set; its default is shown";
      }
      bar.ok = true;
    } catch (const InputError& e) {
      bar.error = e.what();
    }
    bars.push_back(std::move(bar));
  }
  return bars;
}

std::vector<std::int64_t> explorer_axis(std::int64_t N, std::int64_t current) {
  std::int64_t hi = 1;
  while (hi * 2 <= std::min<std::int64_t>(N, 512)) hi *= 2;
  // At most 2^16 block pairs per point (v ≥ N / 256), so the whole sweep stays near a second.
  const std::int64_t lo = std::max<std::int64_t>({1, hi / 32, N / 256});
  std::vector<std::int64_t> axis;
  for (std::int64_t v = lo; v <= hi; v *= 2) axis.push_back(v);
  if (current >= lo && current <= N && std::find(axis.begin(), axis.end(), current) == axis.end()) {
    axis.push_back(current);
    std::sort(axis.begin(), axis.end());
  }
  return axis;
}

ExplorerView explore(const ExplorerRequest& request) {
  ExplorerView v;
  v.sram_bytes = request.sram_bytes;
  v.block_rows = explorer_axis(request.problem.seq_len, request.current.Br);
  v.block_cols = explorer_axis(request.problem.seq_len, request.current.Bc);
  SweepConfig config;
  config.gpu = request.gpu;
  config.problem = request.problem;
  config.algos = {request.algo};
  config.block_rows = v.block_rows;
  config.block_cols = v.block_cols;
  for (int e = -4; e <= 3; ++e) {
    const std::int64_t bytes = e < 0 ? request.sram_bytes >> -e : request.sram_bytes << e;
    if (bytes >= 16) config.sram_bytes.push_back(bytes);
    if (e == 0) v.curve_current = static_cast<std::int64_t>(config.sram_bytes.size()) - 1;
  }
  const std::vector<SweepPoint> points = run_sweep(config);
  const std::size_t per_sram = v.block_rows.size() * v.block_cols.size();
  for (std::size_t s = 0; s < config.sram_bytes.size(); ++s) {
    SramPoint sp;
    sp.sram_bytes = config.sram_bytes[s];
    sp.M_elements = sp.sram_bytes / request.problem.elem_bytes();
    std::int64_t best = std::numeric_limits<std::int64_t>::max();
    for (std::size_t k = 0; k < per_sram; ++k) {
      const SweepPoint& pt = points[s * per_sram + k];
      if (pt.fits && pt.total.accesses() < best) {
        best = pt.total.accesses();
        sp.best = pt.blocks;
        sp.any_fits = true;
      }
    }
    if (sp.any_fits) {
      sp.best_accesses = best;
      sp.bound_value = bound_for(request.algo, request.problem, sp.M_elements, best).value;
    }
    v.curve.push_back(sp);
    if (static_cast<std::int64_t>(s) == v.curve_current)
      v.cells.assign(points.begin() + static_cast<std::ptrdiff_t>(s * per_sram),
                     points.begin() + static_cast<std::ptrdiff_t>((s + 1) * per_sram));
  }
  for (std::size_t r = 0; r < v.block_rows.size(); ++r)
    for (std::size_t c = 0; c < v.block_cols.size(); ++c)
      if (v.block_rows[r] == request.current.Br && v.block_cols[c] == request.current.Bc) {
        v.current_r = static_cast<std::int64_t>(r);
        v.current_c = static_cast<std::int64_t>(c);
      }
  if (!v.cells.empty()) {
    v.min_accesses = v.max_accesses = v.cells.front().total.accesses();
    for (const SweepPoint& pt : v.cells) {
      v.min_accesses = std::min(v.min_accesses, pt.total.accesses());
      v.max_accesses = std::max(v.max_accesses, pt.total.accesses());
    }
  }
  return v;
}

}  // namespace hbmlab::view
