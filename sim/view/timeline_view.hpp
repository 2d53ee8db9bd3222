// View models of the timing panels: the engine's per-SM timeline and HBM bandwidth binned to the
// panel's width (a run of the engine may hold 200,000 CTA spans; a frame draws a few hundred
// rectangles), and the recorded measurements set against the engine's predictions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/engine/simulate.hpp"
#include "sim/measure/validate.hpp"

namespace hbmlab::view {

// A stretch of one SM's lane where CTAs of one kernel were resident.
struct LaneRun {
  double start_s = 0, end_s = 0;
  std::int32_t kernel = 0;
};

struct TimelineView {
  bool available = false;
  std::string why_not;
  double end_s = 0;                    // the last kernel's end
  std::vector<std::string> kernels;    // names, by kernel index
  std::vector<double> kernel_start_s, kernel_time_s;
  std::int64_t sm_count = 0;
  std::vector<std::vector<LaneRun>> lanes;  // the first lanes.size() SMs
  std::vector<double> hbm_gbps;        // DRAM bandwidth in each of `bins` equal slices of [0, end_s]
  double peak_gbps = 0;                // the GPU's HBM bandwidth, for scale
  std::int64_t dropped_spans = 0;
  // The roofline: FLOPs per byte that reaches DRAM (after the L2) against the GPU's ridge point (tensor
  // FLOP/s over HBM bytes/s). Below the ridge the problem is memory-bound and cannot take less than
  // its DRAM bytes over the bandwidth.
  double flop_per_dram_byte = 0, ridge_flop_per_byte = 0;
  double dram_bytes = 0, bandwidth_floor_s = 0;
};

// Bins the engine's timeline of `result` (simulated with record_timeline) into `bins` slices.
TimelineView timeline_view(const SimulationResult& result, int max_lanes, int bins);

// Every *.json under `dir` that holds attention records, validated (timing engine against
// measured); the others (the L2 microbenchmarks', a file that is not JSON) are listed in
// skipped_files with why. `progress` as for validate_measurements.
ValidationReport load_measured(const std::string& dir, const Progress& progress = {});

// Only the records `keep` accepts, validated: what one panel needs (the Inside-the-SM tab's recorded
// counters of the problem on screen) in a second, where load_measured predicts every record of
// every file. Files are read and skipped as load_measured does.
ValidationReport load_measured_where(const std::string& dir, const std::function<bool(const ValidationRow&)>& keep);

// load_measured a step at a time, for a window that draws between steps: the first step reads the
// files, each later one predicts up to `records` records (on all cores), and finish() adds the
// summaries. `progress` as for load_measured (records predicted so far, of all).
//
// rank() orders the work: the records it ranks lowest are predicted first, and a step predicts
// records of one rank only, so that so_far() holds a whole rank after the step that ends it (the
// window ranks the lesson's own problem 0, its room 1, the rest 2, and shows them at once). It may
// change between steps; without one, records go in file order.
class MeasuredLoad {
public:
  using Rank = std::function<int(const ValidationRow&)>;
  explicit MeasuredLoad(std::string dir) : dir_(std::move(dir)) {}
  void rank(Rank rank) { rank_ = std::move(rank); }
  bool step(std::size_t records, const Progress& progress = {});  // false once nothing is left
  // The records predicted so far, in file order, with their summaries (the files' skipped lists too).
  ValidationReport so_far() const;
  bool read() const { return read_; }  // the first step is done: records() are the files' records
  const std::vector<ValidationRow>& records() const { return report_.rows; }  // predicted or not yet
  std::size_t predicted() const { return predicted_; }
  std::size_t total() const { return report_.rows.size(); }
  // Whether every record rank() puts at or below `rank` is predicted (false before the files are read).
  bool done_through(int rank) const;
  ValidationReport finish();

private:
  std::string dir_;
  bool read_ = false, any_file_ = false;
  std::vector<bool> done_;  // by row
  std::size_t predicted_ = 0;
  Rank rank_;
  ValidationReport report_;
};

}  // namespace hbmlab::view
