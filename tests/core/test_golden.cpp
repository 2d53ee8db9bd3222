// Golden snapshots: the paper-model counts of the example workloads, stored in tests/core/golden/.
// They change only on purpose: regenerate with HBMLAB_UPDATE_GOLDEN=1 ./hbmlab_tests_core "[golden]"
// and review the diff.
#include <cstdlib>
#include <fstream>

#include <catch2/catch.hpp>

#include "sim/common/files.hpp"
#include "sim/report/report.hpp"
#include "sim/scenario/scenario.hpp"

using namespace hbmlab;

namespace {

// The sections that belong to the paper's model; time, l2 and dram belong to the timing engine.
Json counts_of(const Scenario& s) {
  Json out = Json::array();
  SimulateRequest request = request_for(s);
  request.numerics = NumericsMode::off;
  for (Algo algo : s.algorithms) {
    request.algo = algo;
    const Json j = simulation_json(simulate(request));
    out.push_back({{"algorithm", j["algorithm"]}, {"blocks", j["blocks"]},
                   {"sram_working_set_bytes", j["sram_working_set_bytes"]}, {"hbm", j["hbm"]}, {"flops", j["flops"]},
                   {"bound", j["bound"]}});
  }
  return out;
}

}  // namespace

TEST_CASE("golden counts of the example workloads", "[golden]") {
  for (const char* name : {"gpt2-medium", "llama-7b-4k-causal", "toy-16"}) {
    INFO(name);
    const std::string path = std::string(HBMLAB_SOURCE_DIR) + "/tests/core/golden/" + name + ".json";
    const Json actual = counts_of(load_scenario(name));
    if (std::getenv("HBMLAB_UPDATE_GOLDEN")) {
      write_file_atomically(path, actual.dump(2) + "\n");
      WARN("rewrote " << path);
      continue;
    }
    std::ifstream in(path);
    REQUIRE(in.good());
    const Json expected = Json::parse(in);
    CHECK(actual.dump(2) == expected.dump(2));
  }
}
