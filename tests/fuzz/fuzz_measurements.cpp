// Fuzz harness: measurement and calibration JSON (`hbmlab validate --measurements FILE`, the
// window's Measured tab). Parses the text as a measurement file (hbmlab measure's "records") or a
// calibration file (PyTorch SDPA "sdpa" records); when its records are small, predicts them with the
// timing engine and prints the report and its JSON, as `hbmlab validate` does.
// Run: tests/fuzz/run.sh (or make fuzz).
#include <sstream>

#include "sim/measure/validate.hpp"
#include "tests/fuzz/harness.hpp"

using namespace hbmlab;

namespace {

bool small(const ValidationReport& report) {
  if (report.rows.size() > 2) return false;
  for (const ValidationRow& row : report.rows) {
    const AttentionProblem& p = row.problem;
    if (p.seq_len > 256 || p.head_dim > 64 || p.batch * p.heads > 8) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::only_input_errors([&] {
    ValidationReport report = parse_measurements(fuzz::text_of(data, size), "fuzz.json", std::nullopt);
    if (!small(report)) return;
    predict_measurements(report);
    std::ostringstream out;
    print_validation(out, report);
    out << validation_json(report).dump(2);
  });
  return 0;
}
