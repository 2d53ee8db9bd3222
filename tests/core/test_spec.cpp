// GPU presets: every embedded preset loads; malformed files are errors naming file:line: key.
#include <catch2/catch.hpp>

#include "sim/common/error.hpp"
#include "sim/common/units.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/scenario/embedded.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/spec/gpu_spec.hpp"

using namespace hbmlab;

namespace {

std::string toy_text() { return std::string(*find_embedded("gpus/toy.toml")); }

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("the five presets load with their numbers", "[spec]") {
  CHECK(gpu_preset_names() == std::vector<std::string>{"a100-40gb", "a100-80gb", "h100-sxm", "h200", "toy"});
  const GpuSpec h100 = load_gpu("h100-sxm");
  CHECK(h100.sm_count == 132);
  CHECK(h100.sram_bytes_per_sm == 228 * 1024);
  CHECK(h100.sram_bytes_per_block == 227 * 1024);
  CHECK(h100.l2_bytes == 50 * 1024 * 1024);
  CHECK(h100.hbm_bandwidth_gbps == 3350);
  CHECK(load_gpu("a100-80gb").hbm_bandwidth_gbps == 2039);
  for (const GpuSpec& gpu : gpu_presets())
    for (const Quantity& q : gpu.quantities) {
      INFO(gpu.name << " " << q.key);
      CHECK_FALSE(q.source.empty());
    }
}

TEST_CASE("malformed presets name file, line and key", "[spec][errors]") {
  const std::string toy = toy_text();
  const std::string origin = "toy.toml";
  CHECK_THROWS_WITH(parse_gpu_spec(replace(toy, "unit = \"SMs\"", "unit = \"SM\""), origin),
                    "toy.toml:7: numbers.sm_count.unit: \"SM\", expected \"SMs\"");
  CHECK_THROWS_WITH(parse_gpu_spec(replace(toy, "{ value = 16,   unit = \"GB/s\"", "{ value = 0,   unit = \"GB/s\""), origin),
                    Catch::StartsWith("toy.toml:17: numbers.hbm_bandwidth_gbps.value: must be a positive number"));
  CHECK_THROWS_WITH(parse_gpu_spec(replace(toy, "{ value = 128,  unit = \"bytes\",       source = \"as on NVIDIA GPUs\" }",
                                           "{ value = 96,  unit = \"bytes\",       source = \"as on NVIDIA GPUs\" }"), origin),
                    "toy.toml:15: numbers.l2_line_bytes.value: must be a power of two, got 96");
  CHECK_THROWS_WITH(parse_gpu_spec(replace(toy, "sm_count ", "sm_cuont "), origin),
                    "toy.toml:7: numbers.sm_cuont: unknown key");
  // The fractions of the datasheet rates that kernels were once timed at: refused, with the reason.
  CHECK_THROWS_WITH(parse_gpu_spec(replace(toy, "sm_count ", "matmul_efficiency "), origin),
                    Catch::StartsWith("toy.toml:7: numbers.matmul_efficiency: no longer a key: every kernel is timed "
                                      "from the SM's pipes"));
  CHECK_THROWS_WITH(parse_gpu_spec(replace(toy, "source = \"chosen: 1 cycle = 1 ns\"", "source = \"\""), origin),
                    Catch::StartsWith("toy.toml:8: numbers.clock_mhz.source: missing"));
  CHECK_THROWS_WITH(parse_gpu_spec(replace(toy, "[numbers]", "[numbers"), origin), Catch::StartsWith("toy.toml:6:"));
  CHECK_THROWS_AS(parse_gpu_spec("name = \"x\"\n", origin), InputError);
  const std::string partitions = "[numbers]\nl2_partitions = { value = 2, unit = \"partitions\", source = \"s\" }";
  CHECK_THROWS_WITH(parse_gpu_spec(replace(toy, "[numbers]", partitions), origin),
                    "toy.toml:1: numbers.l2_partition_run_sms: missing (unit \"SMs\"), needed with l2_partitions = 2");
  CHECK_THROWS_WITH(parse_gpu_spec(replace(toy, "[numbers]", replace(partitions, "value = 2", "value = 3")), origin),
                    "toy.toml:1: numbers.l2_partitions: 3 partitions; hbmlab models 1 or 2");
  CHECK(load_gpu("h100-sxm").hbm_loaded_latency_sharpness == 4);  // fitted (h100-hbm-share.txt, partial)
  CHECK(load_gpu("h200").hbm_loaded_latency_sharpness == 0);       // not measured: the idle latency
  CHECK(load_gpu("h100-sxm").l2_partitions == 2);
  CHECK(load_gpu("h100-sxm").l2_effective_bytes == load_gpu("h100-sxm").l2_bytes);  // the whole L2, not fitted
}

TEST_CASE("every embedded scenario parses, lessons have stages", "[spec][scenario]") {
  const std::vector<std::string> names = scenario_names();
  CHECK(names.size() >= 7);
  int lessons = 0;
  int last_number = 0;
  for (const std::string& name : names) {
    INFO(name);
    const Scenario s = load_scenario(name);
    CHECK_FALSE(s.title.empty());
    if (s.kind == "lesson") {
      ++lessons;
      CHECK_FALSE(s.stages.empty());
      // lessons/06-skip-... is lesson 6; the menu lists them in that order.
      const std::string file = name.substr(name.find('/') + 1);
      CHECK(s.number == std::stoi(file.substr(0, 2)));
      CHECK(s.number > last_number);
      last_number = s.number;
    }
    CHECK_NOTHROW(load_gpu(s.gpu));
  }
  CHECK(lessons >= 8);
  CHECK(load_scenario(kDefaultLesson).number == 1);
}

// A size a lesson's words quote is the one the window prints beside it (format_bytes: KiB below
// 1 MiB, then decimal MB and GB), so a class reads the same figure in the caption and the panel.
TEST_CASE("lesson captions quote sizes as the window prints them", "[spec][scenario]") {
  for (const std::string& name : scenario_names()) {
    const Scenario s = load_scenario(name);
    INFO(name);
    CHECK(s.summary.find("MiB") == std::string::npos);
    CHECK(s.summary.find("GiB") == std::string::npos);
    for (const LessonStage& stage : s.stages) {
      INFO(stage.title);
      CHECK(stage.caption.find("MiB") == std::string::npos);
      CHECK(stage.caption.find("GiB") == std::string::npos);
    }
  }
  auto caption_has = [](const Scenario& s, std::size_t stage, const std::string& figure) {
    REQUIRE(stage < s.stages.size());
    INFO(s.stages[stage].caption);
    CHECK(s.stages[stage].caption.find(figure) != std::string::npos);
  };
  // Lesson 1: Q per head (the memory panel), then S per head (the matrix panel).
  const Scenario one = load_scenario("lessons/01-why-standard-attention-is-memory-bound");
  const AttentionProblem& p1 = one.problem;
  caption_has(one, 0, format_bytes(double(p1.seq_len * p1.head_dim * p1.elem_bytes())) + " each");
  caption_has(one, 1, format_bytes(double(p1.seq_len * p1.seq_len * p1.elem_bytes())) + " per head");
  // Lesson 4: the P the standard backward reads (per head and in all), and its N×N passes of the
  // backward's bytes per head, as the IO panel adds them.
  const Scenario four = load_scenario("lessons/04-backward-recompute-instead-of-store");
  SimulateRequest request = request_for(four);
  request.algo = algo_named("standard", Pass::backward);
  request.counts_only = true;
  const SimulationResult standard = simulate(request);
  const double nn = double(four.problem.seq_len * four.problem.seq_len * four.problem.elem_bytes());
  caption_has(four, 0, format_bytes(nn) + " per head, " + format_bytes(nn * double(four.problem.batch * four.problem.heads)));
  caption_has(four, 1, format_bytes(7 * nn) + " of the " + format_bytes(double(standard.per_instance.hbm_bytes())) +
                           " per head");
  caption_has(four, 2, "P's " + format_bytes(nn));
  // ... and the whole backward's HBM bytes, FlashAttention-2's against standard's.
  request.algo = algo_named("flash2", Pass::backward);
  const SimulationResult flash2 = simulate(request);
  caption_has(four, 4, format_bytes(double(flash2.total.hbm_bytes())) + " of backward traffic for GPT-2 medium instead of " +
                           format_bytes(double(standard.total.hbm_bytes())));
  // Lesson 5: the K/V cache one decode step reads, B·HKV·N·d of each in the dtype.
  const Scenario five = load_scenario("lessons/05-decoding-one-query-a-long-cache");
  const AttentionProblem& p5 = five.problem;
  caption_has(five, five.stages.size() - 1,
              format_bytes(double(2 * p5.batch * p5.Hkv() * p5.seq_len * p5.head_dim * p5.elem_bytes())) + " of cache");
  // Lesson 7: what crosses DRAM after the L2, as the timing engine replays it (the IO panel's DRAM line).
  const Scenario seven = load_scenario("lessons/07-past-hbm-shared-memory-and-tensor-cores");
  SimulateRequest engine = request_for(seven);
  engine.numerics = NumericsMode::off;
  engine.algo = seven.algorithms.front();
  const SimulationResult run7 = simulate(engine);
  const double read = double(run7.engine.dram_read_bytes()), written = double(run7.engine.dram_write_bytes());
  caption_has(seven, 0, format_bytes(read) + " comes from DRAM and " + format_bytes(written) + " goes back");
  caption_has(seven, 1, format_bytes(read + written) + " read from and written to DRAM");
  caption_has(seven, 0, format_bytes(double(run7.total.hbm_read_bytes())) + " read for all 40 heads");
}

TEST_CASE("malformed scenarios name file, line and key", "[spec][scenario][errors]") {
  const std::string good = "[workload]\ntitle = \"t\"\n[problem]\nseq_len = 64\nhead_dim = 8\n";
  CHECK_NOTHROW(parse_scenario(good, "w.toml"));
  CHECK_THROWS_WITH(parse_scenario(replace(good, "head_dim", "hed_dim"), "w.toml"),
                    Catch::StartsWith("w.toml:5: problem.hed_dim: unknown key"));
  CHECK_THROWS_WITH(parse_scenario(replace(good, "seq_len = 64", "seq_len = 0"), "w.toml"),
                    "w.toml:4: problem.seq_len: must be a positive integer, got 0");
  CHECK_THROWS_WITH(parse_scenario(replace(good, "seq_len = 64", "seq_len = \"long\""), "w.toml"),
                    "w.toml:4: problem.seq_len: expected a positive integer");
  CHECK_THROWS_WITH(parse_scenario(good + "[blocks]\nrows = -1\n", "w.toml"),
                    "w.toml:7: blocks.rows: must be a positive integer, got -1");
  CHECK_THROWS_WITH(parse_scenario(replace(good, "title = \"t\"", "title = \"t\"\nalgorithms = [\"flash9\"]"), "w.toml"),
                    Catch::StartsWith("w.toml:3: workload.algorithms: unknown algorithm 'flash9'"));
  CHECK_THROWS_WITH(parse_scenario("[workload\n", "w.toml"), Catch::StartsWith("w.toml:1:"));
  CHECK_THROWS_WITH(parse_scenario(replace(good, "[workload]", "[lesson]"), "w.toml"),
                    Catch::Contains("stages: a lesson needs at least one"));
  // A file's error names its key, not the command-line option the user did not give.
  CHECK_THROWS_WITH(parse_scenario(good + "query_len = 100\n", "w.toml"),
                    "w.toml:3: problem.query_len: NQ = 100 query rows is more than the N = 64 keys they attend to");
  CHECK_THROWS_WITH(parse_scenario(replace(good, "seq_len = 64", "seq_len = 100000000"), "w.toml"),
                    Catch::StartsWith("w.toml:3: problem.seq_len: 100000000 is more than hbmlab models"));
  CHECK_THROWS_WITH(parse_scenario(good + "block_mask = \"local:0\"\n", "w.toml"),
                    Catch::StartsWith("w.toml:6: problem.block_mask: local:W window '0'"));
  CHECK_THROWS_WITH(parse_scenario(replace(good, "title = \"t\"", "title = \"t\"\ngpu = \"toyy\""), "w.toml"),
                    Catch::StartsWith("w.toml:3: workload.gpu: unknown preset 'toyy'"));
  CHECK_THROWS_WITH(parse_scenario(replace(good, "title = \"t\"", "title = \"t\"\ngpu = \"./no-such-gpu.toml\""), "w.toml"),
                    "w.toml:3: workload.gpu: no GPU preset file './no-such-gpu.toml'");
  CHECK_NOTHROW(parse_scenario(replace(good, "title = \"t\"", "title = \"t\"\ngpu = \"toy\""), "w.toml"));
}

TEST_CASE("a lesson stage may show two rooms side by side and the Inside-the-SM tab", "[spec][scenario]") {
  const std::string lesson = "[lesson]\ntitle = \"t\"\n[problem]\nseq_len = 64\nhead_dim = 8\n[[stages]]\ncaption = \"c\"\n";
  const Scenario s = parse_scenario(lesson + "side_by_side = true\npanel = \"onchip\"\n", "l.toml");
  REQUIRE(s.stages[0].side_by_side);
  CHECK(*s.stages[0].side_by_side);
  CHECK(s.stages[0].panel == "onchip");
  CHECK_FALSE(parse_scenario(lesson, "l.toml").stages[0].side_by_side);
  CHECK_THROWS_WITH(parse_scenario(lesson + "side_by_side = \"yes\"\n", "l.toml"), Catch::StartsWith("l.toml:8: stages.side_by_side:"));
  CHECK_THROWS_WITH(parse_scenario(lesson + "panel = \"sm\"\n", "l.toml"),
                    Catch::Contains("stages.panel: unknown panel 'sm'") && Catch::Contains("measured or onchip"));
  // A stage may run on another GPU preset (that stage only); an unknown one is named with its line.
  const Scenario hopper_stage = parse_scenario(lesson + "gpu = \"h100-sxm\"\n", "l.toml");
  REQUIRE(hopper_stage.stages[0].gpu);
  CHECK(*hopper_stage.stages[0].gpu == "h100-sxm");
  CHECK_FALSE(parse_scenario(lesson, "l.toml").stages[0].gpu);
  CHECK_THROWS_WITH(parse_scenario(lesson + "gpu = \"b200\"\n", "l.toml"),
                    "l.toml:8: stages.gpu: no GPU preset named 'b200'");
  // Lesson 8 opens flash2 beside flash3 and closes on flash3 alone.
  const Scenario hopper = load_scenario("lessons/08-hopper-the-same-bytes-in-half-the-time");
  CHECK(hopper.stages.front().side_by_side.value_or(false));
  CHECK_FALSE(hopper.stages.back().side_by_side.value_or(true));
}
