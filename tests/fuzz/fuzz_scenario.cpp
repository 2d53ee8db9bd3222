// Fuzz harness: scenario and lesson TOML (`hbmlab simulate --scenario FILE`, the window's Open).
// Parses the text as a scenario file; a small problem is then simulated in every room the scenario
// runs, as `hbmlab simulate --scenario` does. Run: tests/fuzz/run.sh (or make fuzz).
#include "sim/engine/simulate.hpp"
#include "sim/scenario/scenario.hpp"
#include "tests/fuzz/harness.hpp"

using namespace hbmlab;

namespace {

// Small enough that a whole simulation (counts, fp64 numerics, timing engine) takes milliseconds.
bool small(const Scenario& s) {
  const AttentionProblem& p = s.problem;
  return p.seq_len <= 64 && p.head_dim <= 32 && p.batch * p.heads <= 4;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::only_input_errors([&] {
    const Scenario s = parse_scenario(fuzz::text_of(data, size), "fuzz.toml");
    const std::vector<Algo> rooms = rooms_of(s);
    if (!small(s)) return;
    SimulateRequest request = request_for(s);
    request.record_timeline = true;  // as the window does
    for (Algo algo : rooms) {
      request.algo = algo;
      (void)simulate(request);
    }
  });
  return 0;
}
