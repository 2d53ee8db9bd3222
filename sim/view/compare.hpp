// View models of the comparison panels: one bar per room of the pass that takes the problem (IO and
// bounds panel) and the block size × SRAM explorer (heat map over (Br, Bc), HBM accesses against M). Every
// figure comes from simulate() or run_sweep(); this file only chooses what to ask and arranges it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/bounds/sweep.hpp"
#include "sim/measure/validate.hpp"

namespace hbmlab::view {

// One bar: an algorithm on the same problem, GPU and SRAM (numerics off: counts only).
struct AlgoBar {
  Algo algo = default_algo();
  bool ok = false;
  std::string error;  // why this algorithm could not run with these settings
  bool shape_not_taken = false;  // the room does not model this shape (a mask, NQ < N…): a note, not a fault
  SimulationResult result;
};

// How a bar's HBM accesses compare with the first bar's, in words that hold either way:
// "4.4× fewer than standard", "1.5× more than standard", "as many as standard".
std::string versus_first(double first_accesses, double accesses, std::string_view first_name);

// The rooms of the base algorithm's pass. Explicit blocks that do not fit one algorithm fall back to
// its own default choice (noted in result.blocks.note), so that every bar compares something.
std::vector<AlgoBar> compare_algorithms(const SimulateRequest& base);

struct ExplorerRequest {
  GpuSpec gpu;
  AttentionProblem problem;
  Algo algo = default_algo();
  std::int64_t sram_bytes = 0;  // per SM and per CTA
  Blocks current;               // the replay's blocks, marked on the map
};

// HBM accesses against SRAM size at the best fitting (Br, Bc) of the grid, with the bound.
struct SramPoint {
  std::int64_t sram_bytes = 0, M_elements = 0;
  bool any_fits = false;
  Blocks best;
  std::int64_t best_accesses = 0;  // whole problem (× B·H)
  double bound_value = 0;          // N²d²/M (or Nd + N² for standard), × B·H
};

struct ExplorerView {
  std::vector<std::int64_t> block_rows, block_cols;  // axes; the current blocks are always on them
  std::vector<SweepPoint> cells;  // block_rows.size() × block_cols.size(), row-major, at sram_bytes;
                                  // predicted_s is NaN until explore_times fills it
  std::int64_t sram_bytes = 0;
  std::int64_t current_r = -1, current_c = -1;
  std::int64_t min_accesses = 0, max_accesses = 0;  // over the cells
  std::vector<SramPoint> curve;   // M from sram_bytes/16 to sram_bytes·8
  std::int64_t curve_current = -1;  // index of sram_bytes in curve
};

// Axis values: seven powers of two up to min(N, 2048), large enough that no point needs more than
// 2^16 block pairs, plus the current value.
std::vector<std::int64_t> explorer_axis(std::int64_t N, std::int64_t current);

// HBM accesses for every cell and the curve against M: counts only, well under a second.
ExplorerView explore(const ExplorerRequest& request);

// Predicted time of every cell from the timing engine (run_sweep at the request's SRAM; NaN where
// the blocks do not fit). Seconds to minutes for large B·H: the window runs it on request.
std::vector<double> explore_times(const ExplorerRequest& request, const ExplorerView& view);

// A recorded run of the explorer's problem on its GPU at one cell of the grid: what the GPU measured
// (DRAM bytes read, kernel time) beside what the timing engine predicts for the same launch.
struct MeasuredCell {
  std::int64_t r = -1, c = -1;  // the cell: block_rows[r], block_cols[c]
  ValidationRow row;            // measured and predicted figures, the file it came from
};

// hbmlab's own kernel records under `dir` (`hbmlab measure --blocks all` writes one per compiled
// (Br, Bc)) whose GPU preset, room and problem are the explorer's and whose blocks are on its axes,
// one per cell (K/V ascending preferred), each predicted by the timing engine with the record's
// launch. PyTorch's calibration runs are left out: their blocks are PyTorch's, not a choice the
// explorer shows. Files that cannot be read are skipped. Well under a second: only matching records
// are predicted.
std::vector<MeasuredCell> explorer_measured(const ExplorerRequest& request, const ExplorerView& view,
                                            const std::string& dir);

}  // namespace hbmlab::view
