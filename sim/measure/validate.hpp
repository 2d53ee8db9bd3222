// Predicted against measured: reads recorded measurements (assets/measurements/*.json: the
// calibration file's PyTorch SDPA records and `hbmlab measure` kernel files), runs the timing
// engine on each configuration as it was launched, and reports the errors.
// Run: hbmlab validate --measurements assets/measurements/calibration-h100.json [--json]
#pragma once

#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/common/progress.hpp"
#include "sim/engine/timing.hpp"

namespace hbmlab {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// On-chip counters a measurement record may carry, as Nsight Compute reads them (sim/README.md,
// "On-chip traffic"); NaN where the record has none.
struct MeasuredOnChip {
  double smem_ld_bytes = kNaN;          // l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld × 128
  double smem_st_bytes = kNaN;          // ..._op_st × 128
  double smem_mma_bytes = kNaN;         // ..._op_gmma × 128 (wgmma operands)
  double mma_instructions = kNaN;       // smsp__inst_executed_pipe_tensor_op_hmma
  double ldmatrix_instructions = kNaN;  // smsp__inst_executed_op_ldsm
  double ex2_instructions = kNaN;       // sm__inst_executed_pipe_xu
  double tensor_pipe_busy = kNaN;       // sm__pipe_tensor_cycles_active / elapsed, 0..1
  bool any() const;
  static constexpr const char* kKeys[] = {"smem_ld_bytes",         "smem_st_bytes",    "smem_mma_bytes",  "mma_instructions",
                                          "ldmatrix_instructions", "ex2_instructions", "tensor_pipe_busy"};
  double* field(int k);
  const double* field(int k) const { return const_cast<MeasuredOnChip*>(this)->field(k); }
};

struct ValidationRow {
  std::string file, source;  // source: "sdpa flash" or the kernel name of a measurement record
  std::string where;         // "FILE: records[3]": what an error of its prediction names
  std::string gpu;           // preset the prediction used
  AttentionProblem problem;
  Algo algo = default_algo();
  Blocks blocks;
  LaunchOverride launch;
  bool l2_flushed_between_kernels = false;  // timed kernel by kernel under ncu --cache-control all
  // Bytes of the L2 set aside for persisting lines while the record ran (gpu/bench/cudnn_l2_setaside.sh):
  // the prediction runs on the preset less as many of its ways (gpu_with_l2_set_aside).
  std::int64_t l2_set_aside_bytes = 0;
  bool timed_by_events = false;  // CUDA events around the launch sequence: GpuSpec::event_timing_overhead_ns is added
  // Measured (absent fields: NaN) and predicted.
  double measured_time_s = 0, predicted_time_s = 0;
  double measured_dram_read = 0, predicted_dram_read = 0;
  double measured_dram_write = 0, predicted_dram_write = 0;
  double measured_l2_read = 0, predicted_l2_read = 0;
  MeasuredOnChip measured_on_chip;
  OnChipCounts predicted_on_chip;    // the row's kernels together
  double predicted_tensor_busy = kNaN;  // the MMAs' share of the predicted time at the preset's mma.sync rate
  double time_error() const;        // (predicted − measured) / measured; NaN when not measured
  double dram_read_error() const;
};

// The cut-offs a record's error is counted "within": by default the targets the engine is held to
// (README), DRAM reads within 10 % of measured and kernel time within 15 %; `hbmlab validate
// --dram-within PCT --time-within PCT` sets others, and its summary lines print the ones used.
inline constexpr double kDramReadTolerance = 0.10;
inline constexpr double kTimeTolerance = 0.15;
struct ValidationTargets {
  double dram_read = kDramReadTolerance, time = kTimeTolerance;  // fractions: 0.10 is 10 %
};

struct ValidationSummary {
  std::size_t count = 0;
  double mean_abs = 0, worst = 0;  // of the signed relative errors; worst keeps its sign
  double tolerance = 0;            // |error| at or below this counts as within
  std::size_t within = 0;          // records within the tolerance
};

struct ValidationReport {
  std::vector<ValidationRow> rows;
  std::vector<std::string> skipped;        // "file: record: why", for records with nothing to compare
  std::vector<std::string> skipped_files;  // "file: why", for whole files left out (FileErrors::skip)
  ValidationSummary time, dram_read;
  ValidationTargets targets;  // the cut-offs of the summaries (predict_measurements uses them)
};

// What to do with a file that cannot be read or has the wrong shape: fail (the command line,
// where the user named the file) or skip it and say why (a folder scan, which also meets the
// L2 microbenchmarks' files and others that hold no attention records).
enum class FileErrors { fail, skip };

// The *.json files directly in `dir`, sorted by name (none when it cannot be listed).
std::vector<std::string> json_files_in(const std::string& dir);

// One file's records from its text (`path` names it in messages): measured figures only, as
// read_measurements gives them. Throws InputError naming the file and the record on a wrong shape.
ValidationReport parse_measurements(std::string_view json_text, const std::string& path,
                                    const std::optional<std::string>& gpu);

// The records of `files` as rows, measured figures only (predictions and summaries left at 0).
// `gpu` overrides the preset chosen from each file's device name. With FileErrors::fail, throws
// InputError naming the file and the record when a file cannot be read or has the wrong shape.
ValidationReport read_measurements(const std::vector<std::string>& files, const std::optional<std::string>& gpu,
                                   FileErrors on_error = FileErrors::fail);

// The timing engine on every row of `report` (on all cores), then the summaries at report.targets.
void predict_measurements(ValidationReport& report, const Progress& progress = {});

// The GPU as a kernel sees it with `bytes` of its L2 set aside for persisting lines
// (cudaLimitPersistingL2CacheSize): the driver grants whole ways of the L2, l2_bytes / l2_ways each
// (3.125 MiB on the H100: 8 MiB asked gives 9.375), and the kernel's normal lines keep the other
// ways, so the engine's L2 keeps l2_ways less the ways set aside in each partition and its
// l2_effective_bytes shrinks by the same share. `bytes` not a whole number of ways, or all of
// them, is an InputError naming `where`.
GpuSpec gpu_with_l2_set_aside(GpuSpec gpu, std::int64_t bytes, std::string_view where);

// The summaries of the rows' errors (predict_measurements ends with it; the window, which predicts
// the rows a few at a time, calls it once at the end).
void summarise_measurements(ValidationReport& report);

// read_measurements, then the timing engine on every row (on all cores) and the summaries.
ValidationReport validate_measurements(const std::vector<std::string>& files, const std::optional<std::string>& gpu,
                                       FileErrors on_error = FileErrors::fail, const Progress& progress = {});

// What `hbmlab validate --measurements` does with its arguments: a file must hold attention
// records (InputError otherwise, before any engine work); a folder gives its *.json files, and
// those that hold none are left out with why. The summaries count records within `targets`.
ValidationReport validate_paths(const std::vector<std::string>& paths, const std::optional<std::string>& gpu,
                                const Progress& progress = {}, const ValidationTargets& targets = {});

// The records of one room on one GPU preset, as one kind of kernel ran them (PyTorch SDPA's, whose
// source starts with "sdpa", or hbmlab's own), summarised: validate's closing lines and the Measured
// tab's table, at report.targets. In the order the groups first appear in the report's rows.
struct RoomSummary {
  std::string gpu;
  Algo algo = default_algo();
  bool pytorch = false;
  // Records measured with part of the L2 set aside (l2_set_aside_bytes) form groups of their own:
  // they measure a smaller L2 than the GPU's, so they do not speak for the room on the GPU itself.
  bool l2_set_aside = false;
  ValidationSummary time, dram_read;
  std::string label() const;  // "h100-sxm flash2 backward, PyTorch SDPA", "…, L2 partly set aside"
};
std::vector<RoomSummary> summarise_by_room(const ValidationReport& report);

void print_validation(std::ostream& out, const ValidationReport& report);
nlohmann::ordered_json validation_json(const ValidationReport& report);

}  // namespace hbmlab
