// Fuzz harness: GPU preset TOML (`hbmlab simulate --gpu FILE.toml`). Parses the text as a preset;
// a preset that loads then runs a small problem through standard and flash2, counts and timing
// engine, as `hbmlab simulate --gpu` does. Run: tests/fuzz/run.sh (or make fuzz).
#include "sim/engine/simulate.hpp"
#include "sim/spec/gpu_spec.hpp"
#include "tests/fuzz/harness.hpp"

using namespace hbmlab;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::only_input_errors([&] {
    SimulateRequest request;
    request.gpu = parse_gpu_spec(fuzz::text_of(data, size), "fuzz-gpu.toml");
    request.problem = AttentionProblem(1, 2, 64, 16);
    request.numerics = NumericsMode::off;
    request.record_timeline = true;  // as the window does
    for (const char* name : {"standard", "flash2"}) {
      request.algo = algo_named(name);
      fuzz::only_input_errors([&] { (void)simulate(request); });
    }
  });
  return 0;
}
