// Fuzz harness: block-mask files and specs (`--block-mask FILE`, `--block-mask local:W`, a
// scenario's block_mask). Parses the text as a mask file, and a one-line text starting with local:,
// random: or butterfly as a SPEC; a mask that loads is then applied to flash1 and flash2 on a grid of
// its own Tr × Tc (4-row blocks), simulated whole. Run: tests/fuzz/run.sh (or make fuzz).
#include <sstream>
#include <string>

#include "sim/algo/block_sparse/masks.hpp"
#include "sim/engine/simulate.hpp"
#include "tests/fuzz/harness.hpp"

using namespace hbmlab;

namespace {

// Rows and columns of a mask file that loaded: its non-empty lines (CR ends dropped), all alike.
std::pair<std::int64_t, std::int64_t> shape_of(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string line;
  std::int64_t rows = 0, cols = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    ++rows;
    cols = static_cast<std::int64_t>(line.size());
  }
  return {rows, cols};
}

// flash1 and flash2 under the mask with Br = Bc = 4, NQ = 4·Tr queries over N = 4·Tc keys (the
// last NQ positions), causal or not, through counts, numerics and the timing engine.
void simulate_under(std::shared_ptr<const BlockMask> mask, std::int64_t Tr, std::int64_t Tc, bool causal) {
  if (Tr * Tc > 4096) return;
  SimulateRequest request;
  request.gpu = load_gpu("a100-40gb");
  request.problem = AttentionProblem(1, 1, 4 * Tc, 8, Dtype::fp16, causal);
  request.problem.query_len = 4 * Tr;
  request.problem.block_mask = std::move(mask);
  request.block_rows = 4;
  request.block_cols = 4;
  for (const char* name : {"flash1", "flash2"}) {
    request.algo = algo_named(name);
    fuzz::only_input_errors([&] { (void)simulate(request); });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = fuzz::text_of(data, size);
  const bool causal = size > 0 && (data[size - 1] & 1) != 0;
  fuzz::only_input_errors([&] {
    auto mask = parse_mask_text(text, "fuzz.mask");
    const auto [Tr, Tc] = shape_of(text);
    simulate_under(std::move(mask), Tr, Tc, causal);
  });
  // A SPEC, never a path: a fuzzed name must not read files on this machine.
  if (text.find('\n') == std::string_view::npos &&
      (text.starts_with("local:") || text.starts_with("random:") || text.starts_with("butterfly")))
    fuzz::only_input_errors([&] {
      auto mask = parse_block_mask(text);
      simulate_under(std::move(mask), 8, 16, causal);
    });
  return 0;
}
