// Comparison view models: the three algorithms side by side and the block size × SRAM explorer.
#include "sim/view/compare.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "sim/common/error.hpp"
#include "sim/engine/replay.hpp"

namespace hbmlab::view {

std::string versus_first(double first_accesses, double accesses, std::string_view first_name) {
  const double ratio = first_accesses / accesses;
  if (fmt::format("{:.1f}", ratio) == "1.0") return fmt::format("as many as {}", first_name);
  return ratio > 1 ? fmt::format("{:.1f}× fewer than {}", ratio, first_name)
                   : fmt::format("{:.1f}× more than {}", 1 / ratio, first_name);
}

std::vector<AlgoBar> compare_algorithms(const SimulateRequest& base) {
  std::vector<AlgoBar> bars;
  // The rooms of the pass being shown that `--algo all` would run on this shape (the split count and φ
  // are left to the rooms below).
  AttentionProblem shape = base.problem;
  shape.kv_splits = 0;
  shape.unified_max.reset();
  for (Algo algo : all_rooms_for(shape, base.algo->pass())) {
    AlgoBar bar;
    bar.algo = algo;
    SimulateRequest r = base;
    r.algo = algo;
    r.numerics = NumericsMode::off;
    // The split count and φ are knobs of the rooms that take them; the others run the same problem.
    if (!algo->supports().splits) r.problem.kv_splits = 0;
    if (!algo->supports().unified_max) r.problem.unified_max.reset();
    try {
      algo->check_problem(r.problem);
    } catch (const InputError& e) {
      bar.error = e.what();
      bar.shape_not_taken = true;
      bars.push_back(std::move(bar));
      continue;
    }
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
  while (hi * 2 <= std::min<std::int64_t>(N, 2048)) hi *= 2;
  // At most 2^16 block pairs per point (v ≥ N / 256), so the whole sweep stays near a second.
  const std::int64_t lo = std::max<std::int64_t>({1, hi / 64, N / 256});
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
  const AttentionProblem& p = request.problem;
  v.sram_bytes = request.sram_bytes;
  v.block_rows = explorer_axis(request.algo->heads_per_instance(p) * p.Nq(), request.current.Br);
  v.block_cols = explorer_axis(p.seq_len, request.current.Bc);
  // HBM accesses do not depend on M, only whether the blocks fit does: one count per (Br, Bc),
  // then every SRAM size compares working sets. The timing engine runs later, on demand
  // (explore_times), because it costs far more than counting.
  const std::int64_t rows = request.algo->heads_per_instance(p) * p.Nq();  // query rows of one instance
  for (std::int64_t Br : v.block_rows)
    for (std::int64_t Bc : v.block_cols) {
      SweepPoint pt;
      pt.algo = request.algo;
      pt.sram_bytes = pt.cta_sram_bytes = request.sram_bytes;  // the explorer's SRAM: an SM's and its CTA's
      pt.M_elements = request.sram_bytes / p.elem_bytes();
      pt.blocks = {std::min(Br, rows), std::min(Bc, p.seq_len)};
      pt.predicted_s = std::numeric_limits<double>::quiet_NaN();
      try {
        pt.problem = request.algo->prepare(p, pt.blocks, request.gpu);
      } catch (const InputError&) {  // the room cannot run these blocks (more splits than K/V blocks)
        pt.problem = p;
        pt.working_set_bytes = std::numeric_limits<std::int64_t>::max();
        v.cells.push_back(pt);
        continue;
      }
      const BlockGrid grid = request.algo->grid(pt.problem, pt.blocks);
      pt.Tr = grid.Tr;
      pt.Tc = grid.Tc;
      pt.working_set_bytes = request.algo->working_set_bytes(pt.problem, pt.blocks);
      pt.fits = pt.working_set_bytes <= request.sram_bytes;
      pt.total = count_problem(request.algo, pt.problem, pt.blocks);
      pt.bound_ratio = bound_for(request.algo, pt.problem, pt.M_elements, pt.total.accesses()).ratio;
      v.cells.push_back(pt);
    }
  for (int e = -4; e <= 3; ++e) {
    const std::int64_t bytes = e < 0 ? request.sram_bytes >> -e : request.sram_bytes << e;
    if (bytes < 16) continue;
    if (e == 0) v.curve_current = static_cast<std::int64_t>(v.curve.size());
    SramPoint sp;
    sp.sram_bytes = bytes;
    sp.M_elements = bytes / p.elem_bytes();
    std::int64_t best = std::numeric_limits<std::int64_t>::max();
    for (const SweepPoint& pt : v.cells)
      if (pt.working_set_bytes <= bytes && pt.total.accesses() > 0 && pt.total.accesses() < best) {
        best = pt.total.accesses();
        sp.best = pt.blocks;
        sp.any_fits = true;
      }
    if (sp.any_fits) {
      sp.best_accesses = best;
      sp.bound_value = bound_for(request.algo, p, sp.M_elements, best).value;
    }
    v.curve.push_back(sp);
  }
  for (std::size_t r = 0; r < v.block_rows.size(); ++r)
    for (std::size_t c = 0; c < v.block_cols.size(); ++c)
      if (v.block_rows[r] == request.current.Br && v.block_cols[c] == request.current.Bc) {
        v.current_r = static_cast<std::int64_t>(r);
        v.current_c = static_cast<std::int64_t>(c);
      }
  bool first = true;
  for (const SweepPoint& pt : v.cells) {
    if (pt.total.accesses() == 0) continue;  // a cell the room cannot run
    v.min_accesses = first ? pt.total.accesses() : std::min(v.min_accesses, pt.total.accesses());
    v.max_accesses = first ? pt.total.accesses() : std::max(v.max_accesses, pt.total.accesses());
    first = false;
  }
  return v;
}

std::vector<double> explore_times(const ExplorerRequest& request, const ExplorerView& view) {
  SweepConfig config;
  config.gpu = request.gpu;
  config.problem = request.problem;
  config.algos = {request.algo};
  config.block_rows = view.block_rows;
  config.block_cols = view.block_cols;
  config.sram_bytes = {request.sram_bytes};
  std::vector<double> times;
  for (const SweepPoint& pt : run_sweep(config)) times.push_back(pt.predicted_s);
  return times;
}

namespace {

// The same attention: shape, dtype, mask and decoding knobs as far as a record names them.
bool same_problem(const AttentionProblem& a, const AttentionProblem& b) {
  const auto mask = [](const AttentionProblem& p) { return p.block_mask ? p.block_mask->spec() : std::string(); };
  return a.batch == b.batch && a.heads == b.heads && a.seq_len == b.seq_len && a.head_dim == b.head_dim &&
         a.dtype == b.dtype && a.causal == b.causal && a.Nq() == b.Nq() && a.Hkv() == b.Hkv() && mask(a) == mask(b);
}

std::int64_t index_of(const std::vector<std::int64_t>& axis, std::int64_t v) {
  const auto it = std::find(axis.begin(), axis.end(), v);
  return it == axis.end() ? -1 : static_cast<std::int64_t>(it - axis.begin());
}

}  // namespace

std::vector<MeasuredCell> explorer_measured(const ExplorerRequest& request, const ExplorerView& view,
                                            const std::string& dir) {
  const ValidationReport all = read_measurements(json_files_in(dir), std::nullopt, FileErrors::skip);
  ValidationReport matching;
  std::vector<MeasuredCell> cells;
  for (const ValidationRow& row : all.rows) {
    if (row.source.starts_with("sdpa") || row.gpu != request.gpu.name || row.algo != request.algo ||
        !same_problem(row.problem, request.problem))
      continue;
    const std::int64_t r = index_of(view.block_rows, row.blocks.Br), c = index_of(view.block_cols, row.blocks.Bc);
    if (r < 0 || c < 0) continue;
    const auto taken = std::find_if(cells.begin(), cells.end(), [&](const MeasuredCell& m) { return m.r == r && m.c == c; });
    if (taken != cells.end()) {
      // One per cell: a record with both time and DRAM counters first, then the K/V order the room
      // itself uses (ascending) over a study of the other.
      const auto rank = [](const ValidationRow& m) {
        return 2 * int(std::isfinite(m.measured_time_s) && std::isfinite(m.measured_dram_read)) + int(!m.launch.kv_descending);
      };
      if (rank(row) > rank(taken->row)) taken->row = row;
      continue;
    }
    cells.push_back({r, c, row});
  }
  for (const MeasuredCell& m : cells) matching.rows.push_back(m.row);
  predict_measurements(matching);
  for (std::size_t k = 0; k < cells.size(); ++k) cells[k].row = matching.rows[k];
  return cells;
}

}  // namespace hbmlab::view
