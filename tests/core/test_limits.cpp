// The limits of sim/common/limits.hpp and the problem's own: every request past one is refused
// before any work, with exit code 2 and one line naming the option and the limit. One test per
// limit, each with an input a user could type; every refusal must come at once (well under a second),
// which the harness checks too, since the point of a limit is that nothing runs for minutes first.
// (An input file's limit is checked by the bytes read, which do not grow on a loaded machine.)
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "sim/cli/cli.hpp"
#include "sim/common/error.hpp"
#include "sim/common/limits.hpp"
#include "sim/measure/validate.hpp"
#include "sim/scenario/embedded.hpp"
#include "sim/spec/gpu_spec.hpp"
#include "sim/view/replay_view.hpp"

using namespace hbmlab;

namespace {

struct Refusal {
  int code;
  std::string out, err;
  double seconds;
};

Refusal run(std::vector<std::string> args) {
  std::ostringstream out, err;
  const auto start = std::chrono::steady_clock::now();
  const int code = run_cli(args, out, err);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {code, out.str(), err.str(), seconds};
}

// Exit 2, nothing on stdout, one line on stderr naming `option` and `limit`, and no work done first.
void require_refused(const std::vector<std::string>& args, const std::string& option, std::int64_t limit) {
  const Refusal r = run(args);
  INFO(fmt::format("hbmlab {}\n  → {}", fmt::join(args, " "), r.err));
  REQUIRE(r.code == 2);
  REQUIRE(r.out.empty());
  REQUIRE(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  REQUIRE_THAT(r.err, Catch::Contains(option) && Catch::Contains(std::to_string(limit)));
  REQUIRE(r.seconds < 1.0);
}

// The bytes this process has read so far (rchar of /proc/self/io), or -1 where the kernel does not say.
std::int64_t bytes_read_by_this_process() {
  std::ifstream io("/proc/self/io");
  std::string key;
  std::int64_t value = 0;
  while (io >> key >> value)
    if (key == "rchar:") return value;
  return -1;
}

// Past the limit, a reader may hold one piece of its own (64 KiB) and the stream's buffer: 1 MiB is ample.
constexpr std::int64_t kReadSlackBytes = std::int64_t{1} << 20;

std::string comma_list(std::int64_t first, std::int64_t step, std::int64_t count) {
  std::string list;
  for (std::int64_t k = 0; k < count; ++k) list += (k ? "," : "") + std::to_string(first + k * step);
  return list;
}

}  // namespace

TEST_CASE("limit: the problem's own sizes (N, d, B·H)", "[limits]") {
  require_refused({"simulate", "--seq-len", "16777217"}, "--seq-len", 16777216);
  require_refused({"simulate", "--head-dim", "4097"}, "--head-dim", 4096);
  require_refused({"simulate", "--batch", "1048576", "--heads", "2"}, "--batch", 1048576);
}

TEST_CASE("limit: block pairs counted in one instance (kMaxCountedPairs)", "[limits]") {
  // N = 16M tokens in 16 × 16 blocks: 2^40 pairs, days of counting.
  require_refused({"simulate", "--seq-len", "16777216", "--block-rows", "16", "--block-cols", "16", "--counts-only"},
                  "--block-rows", kMaxCountedPairs);
}

TEST_CASE("limit: block pairs in one timing-engine plan (kMaxPlanPairs)", "[limits]") {
  // 2048 × 2048 pairs: countable, but the plan alone would take GBs.
  require_refused({"simulate", "--seq-len", "65536", "--block-rows", "32", "--block-cols", "32", "--numerics", "off"},
                  "--counts-only", kMaxPlanPairs);
  // --counts-only takes it: the counts stream without a plan.
  const Refusal counted = run({"simulate", "--seq-len", "65536", "--block-rows", "32", "--block-cols", "32",
                               "--algo", "flash2", "--counts-only"});
  REQUIRE(counted.code == 0);
  // Without --block-rows/--block-cols hbmlab chose the blocks: the refusal names --seq-len, the option
  // the user gave, and the blocks it chose.
  require_refused({"simulate", "--seq-len", "1000000", "--algo", "flash2", "--numerics", "off"}, "--counts-only",
                  kMaxPlanPairs);
  const Refusal chosen = run({"simulate", "--seq-len", "1000000", "--algo", "flash2", "--numerics", "off"});
  CHECK_THAT(chosen.err, Catch::StartsWith("hbmlab simulate: --seq-len: N = 1000000 in the blocks hbmlab chose (Br = ") &&
                             Catch::Contains("makes Tr × Tc = "));
}

TEST_CASE("limit: block pairs the timing engine replays over every instance (kMaxEngineTotalPairs)", "[limits]") {
  require_refused({"simulate", "--seq-len", "8192", "--batch", "256", "--heads", "128", "--numerics", "off"},
                  "--batch/--heads", kMaxEngineTotalPairs);
}

TEST_CASE("limit: the CPU numerics (kMaxFullCheckWork, kMaxNumericsElements)", "[limits]") {
  require_refused({"simulate", "--seq-len", "65536", "--numerics", "full"}, "--numerics", kMaxFullCheckWork);
  // Blocks large enough for the engine (64 MiB of SRAM), but Q, K, V of one head would not fit in fp64.
  require_refused({"simulate", "--seq-len", "131072", "--head-dim", "512", "--numerics", "sampled", "--sram-bytes",
                   "67108864", "--algo", "flash1"},
                  "--numerics", kMaxNumericsElements);
}

TEST_CASE("limit: a sweep's points and its engine work (kMaxSweepPoints, kMaxSweepEnginePairs)", "[limits]") {
  const std::string seventy = comma_list(16, 16, 70);  // 70 × 70 = 4900 points
  require_refused({"sweep", "--block-rows", seventy, "--block-cols", seventy}, "--block-rows", kMaxSweepPoints);
  // Six points, each within one run's engine work, together more than a sweep replays.
  require_refused({"sweep", "--seq-len", "16384", "--batch", "32", "--heads", "32", "--block-rows", "64", "--block-cols",
                   "64,66,68,70,72,74", "--algo", "flash2"},
                  "--block-cols", kMaxSweepEnginePairs);
}

TEST_CASE("limit: a bounds sweep's lists and its counting (kMaxSweepValues, kMaxBoundsPairs)", "[limits]") {
  require_refused({"bounds", "--seq-lens", comma_list(128, 128, 66)}, "--seq-lens", kMaxSweepValues);
  require_refused({"bounds", "--seq-lens", "1048576,2097152,4194304"}, "--seq-lens", kMaxCountedPairs);
  // Each point countable, all of them together more than a bounds run counts.
  // (40 different values: a fit needs at least two different ones.)
  require_refused({"bounds", "--seq-lens", comma_list(1048576, -1024, 40)}, "--seq-lens", kMaxBoundsPairs);
}

TEST_CASE("limit: --steps-limit is a count", "[limits]") {
  const Refusal r = run({"simulate", "--steps-limit", "-1"});
  REQUIRE(r.code == 2);
  REQUIRE_THAT(r.err, Catch::Contains("--steps-limit"));
}

TEST_CASE("limit: input files are read up to kMaxInputFileBytes, endless ones too", "[limits]") {
  // A file one byte past the limit (sparse: it takes no disk) is refused; without the limit it would load.
  const std::filesystem::path big =
      std::filesystem::temp_directory_path() / fmt::format("hbmlab-test-limits-{}.toml", ::getpid());
  std::ofstream(big).close();
  std::filesystem::resize_file(big, kMaxInputFileBytes + 1);
  std::string refusal = "(read whole)";
  try {
    read_text_file(big.string());
  } catch (const InputError& e) {
    refusal = e.what();
  }
  std::filesystem::remove(big);
  REQUIRE_THAT(refusal, Catch::Contains(big.string()) && Catch::Contains("more than 64 MiB"));

  // /dev/zero never ends: reading it whole would exhaust memory. Reading stops just past the limit,
  // counted in the bytes this process read (Linux's rchar), not in seconds, so a loaded machine
  // passes it as well; the time is shown should it fail.
  const std::int64_t read_before = bytes_read_by_this_process();
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(read_text_file("/dev/zero"), Catch::Contains("/dev/zero") && Catch::Contains("64 MiB"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::int64_t read_after = bytes_read_by_this_process();
  if (read_before < 0 || read_after < 0) return;  // a kernel without per-process I/O counts
  INFO(fmt::format("read {} bytes of /dev/zero in {:.2f} s", read_after - read_before, seconds));
  REQUIRE(read_after - read_before > kMaxInputFileBytes);
  REQUIRE(read_after - read_before <= kMaxInputFileBytes + kReadSlackBytes);
}

TEST_CASE("limit: a preset's whole numbers stay exact (2^53)", "[limits][spec]") {
  std::string toml(*find_embedded("gpus/toy.toml"));
  const std::string from = "value = 2,", to = "value = 1e17,";
  REQUIRE(toml.find(from) != std::string::npos);
  toml.replace(toml.find(from), from.size(), to);
  REQUIRE_THROWS_WITH(parse_gpu_spec(toml, "big.toml"),
                      Catch::Contains("big.toml:") && Catch::Contains("numbers.sm_count") &&
                          Catch::Contains("more than hbmlab models"));
}

TEST_CASE("limit: a measurement record's numbers are whole and its launch figures real", "[limits][validate]") {
  auto record = [](const std::string& field) {
    return fmt::format(R"({{"device": {{"name": "NVIDIA H100 80GB HBM3"}}, "records": [{{"kernel": "flash2",
      "problem": {{"batch": 1, "heads": 1, "seq_len": 128, "head_dim": 64{}}}, "blocks": {{"Br": 64, "Bc": 64}},
      "launch": {{"threads_per_cta": 128}}, "time_ms_median": 0.01}}]}})",
                       field);
  };
  REQUIRE_NOTHROW(parse_measurements(record(""), "ok.json", std::nullopt));
  REQUIRE_THROWS_WITH(parse_measurements(record(R"(, "kv_heads": 1.5)"), "half.json", std::nullopt),
                      Catch::Contains("half.json") && Catch::Contains("kv_heads") && Catch::Contains("whole number"));
  REQUIRE_THROWS_WITH(parse_measurements(record(R"(, "query_len": 1e300)"), "huge.json", std::nullopt),
                      Catch::Contains("query_len"));
  const std::string big_launch = [&] {
    std::string r = record("");
    r.replace(r.find("128}"), 3, "4294967296");
    return r;
  }();
  REQUIRE_THROWS_WITH(parse_measurements(big_launch, "launch.json", std::nullopt),
                      Catch::Contains("threads_per_cta") && Catch::Contains("not a launch figure"));
}

TEST_CASE("limit: the window's replay, engine and numerics sizes", "[limits][view]") {
  using namespace hbmlab::view;
  auto request = [](std::int64_t n, std::int64_t d, std::int64_t bh, std::int64_t blocks) {
    ReplayRequest r;
    r.sim.gpu = load_gpu("h100-sxm");
    r.sim.algo = algo_named("flash2");
    r.sim.problem = AttentionProblem(1, bh, n, d);
    r.sim.block_rows = blocks;
    r.sim.block_cols = blocks;
    return r;
  };
  // Step by step: 1024 × 1024 pairs of 64 tokens are more than the window keeps.
  REQUIRE_THROWS_WITH(check_replayable(request(65536, 64, 1, 64)),
                      Catch::Contains("--block-rows") && Catch::Contains(std::to_string(kMaxReplayPairs)));
  // The engine over every head: 32768 heads × 16 × 16 pairs is too slow for a slider.
  REQUIRE_THROWS_WITH(check_replayable(request(1024, 64, 32768, 64)),
                      Catch::Contains("--batch/--heads") && Catch::Contains(std::to_string(kMaxEngineWork)));
  REQUIRE_NOTHROW(check_replayable(request(1024, 64, 16, 64)));
}
