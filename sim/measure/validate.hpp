// Predicted against measured: reads recorded measurements (assets/measurements/*.json: the
// calibration file's PyTorch SDPA records and `hbmlab measure` kernel files), runs the timing
// engine on each configuration as it was launched, and reports the errors.
// Run: hbmlab validate --measurements assets/measurements/calibration-h100.json [--json]
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/engine/timing.hpp"

namespace hbmlab {

struct ValidationRow {
  std::string file, source;  // source: "sdpa flash" or the kernel name of a measurement record
  std::string gpu;           // preset the prediction used
  AttentionProblem problem;
  Algo algo = Algo::flash2;
  Blocks blocks;
  LaunchOverride launch;
  // Measured (absent fields: NaN) and predicted.
  double measured_time_s = 0, predicted_time_s = 0;
  double measured_dram_read = 0, predicted_dram_read = 0;
  double measured_dram_write = 0, predicted_dram_write = 0;
  double measured_l2_read = 0, predicted_l2_read = 0;
  double time_error() const;        // (predicted − measured) / measured; NaN when not measured
  double dram_read_error() const;
};

struct ValidationSummary {
  std::size_t count = 0;
  double mean_abs = 0, worst = 0;  // of the signed relative errors; worst keeps its sign
};

struct ValidationReport {
  std::vector<ValidationRow> rows;
  std::vector<std::string> skipped;  // "file: record: why", for records with nothing to compare
  ValidationSummary time, dram_read;
};

// `gpu` overrides the preset chosen from each file's device name. Throws InputError naming the
// file and the record when a file cannot be read or has the wrong shape.
ValidationReport validate_measurements(const std::vector<std::string>& files, const std::optional<std::string>& gpu);

void print_validation(std::ostream& out, const ValidationReport& report);
nlohmann::ordered_json validation_json(const ValidationReport& report);

}  // namespace hbmlab
