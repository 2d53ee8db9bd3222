// Block-sparse FlashAttention (Algorithm 5) and sliding windows: masks by hand, exact counts against
// The closed forms of docs/design.md#block-sparse on random shapes and every mask kind, masked numerics, the engine
// following the kept work, and one-line errors for bad masks.
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "sim/algo/block_sparse/masks.hpp"
#include "sim/bounds/bounds.hpp"
#include "sim/cli/cli.hpp"
#include "sim/common/error.hpp"
#include "sim/engine/replay.hpp"
#include "sim/engine/timing.hpp"
#include "sim/numerics/attention.hpp"

using namespace hbmlab;

namespace {

AttentionProblem toy(std::int64_t N, bool causal, const std::string& mask) {
  AttentionProblem p(1, 1, N, 4, Dtype::fp16, causal);
  p.block_mask = parse_block_mask(mask);
  return p;
}

std::string pattern(const AttentionProblem& p, Blocks b) {
  const BlockGrid g(p, b);
  std::string out;
  for (std::int64_t i = 0; i < g.Tr; ++i) {
    for (std::int64_t j = 0; j < g.Tc; ++j) out += g.skipped(i, j) ? '.' : '#';
    out += '\n';
  }
  return out;
}

std::string temp_mask_file(const std::string& text) {
  static int n = 0;
  const std::string path = "/tmp/hbmlab-test-mask-" + std::to_string(::getpid()) + "-" + std::to_string(++n) + ".txt";
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("masks by hand on a 4 × 4 grid", "[block-sparse]") {
  // Blocks of 4 rows over N = 16. butterfly: i XOR j is 0 or a power of two; (0, 3), (1, 2) drop.
  CHECK(pattern(toy(16, false, "butterfly"), {4, 4}) == "###.\n##.#\n#.##\n.###\n");
  // local:1 keeps pairs whose tokens overlap (the diagonal); local:5 also the neighbours (gap 1),
  // not blocks two apart (gap 5); with causal only the lower half of that band.
  CHECK(pattern(toy(16, false, "local:1"), {4, 4}) == "#...\n.#..\n..#.\n...#\n");
  CHECK(pattern(toy(16, false, "local:5"), {4, 4}) == "##..\n###.\n.###\n..##\n");
  CHECK(pattern(toy(16, true, "local:5"), {4, 4}) == "#...\n##..\n.##.\n..##\n");
  const AttentionProblem file = toy(16, false, temp_mask_file("1000\n0110\n0000\n1111\n"));
  CHECK(pattern(file, {4, 4}) == "#...\n.##.\n....\n####\n");
  CHECK(kept_pairs(BlockGrid(file, {4, 4})) == 7);
  CHECK(density(BlockGrid(file, {4, 4})) == Approx(7.0 / 16));
}

TEST_CASE("block-sparse counts by hand (toy, fp16, d = 4, blocks 4 × 4)", "[block-sparse][io]") {
  // butterfly keeps 12 of 16 pairs. flash2: Q read and O written once (16·4 elements, 128 B); K and
  // V read for each kept pair, 4 rows × 4 = 16 elements: 12 · 16 · 2 B = 384 B; L written 16 fp32.
  const Counts f2 = count_instance(algo_named("flash2"), toy(16, false, "butterfly"), {4, 4});
  CHECK(f2[Tensor::Q].read_bytes == 128);
  CHECK(f2[Tensor::K].read_bytes == 384);
  CHECK(f2[Tensor::V].read_bytes == 384);
  CHECK(f2[Tensor::O].write_bytes == 128);
  CHECK(f2[Tensor::lse].write_bytes == 64);
  CHECK(f2.skipped_blocks == 4);
  // flash1: every column keeps its diagonal, so K and V are read once (128 B); Q and O read per kept
  // pair (384 B); O written at line 2 and per kept pair (128 + 384 B); ℓ read 12 · 4 fp32 (192 B),
  // written 16 + 48 fp32 (256 B).
  const Counts f1 = count_instance(algo_named("flash1"), toy(16, false, "butterfly"), {4, 4});
  CHECK(f1[Tensor::K].read_bytes == 128);
  CHECK(f1[Tensor::Q].read_bytes == 384);
  CHECK(f1[Tensor::O].read_bytes == 384);
  CHECK(f1[Tensor::O].write_bytes == 512);
  CHECK(f1[Tensor::l].read_bytes == 192);
  CHECK(f1[Tensor::l].write_bytes == 256);
  // A column the mask empties is never loaded: the file keeps nothing in column 3.
  const Counts empty = count_instance(algo_named("flash1"), toy(16, false, temp_mask_file("1000\n0100\n0010\n0000\n")), {4, 4});
  CHECK(empty[Tensor::K].read_bytes == 3 * 16 * 2);
}

TEST_CASE("block-sparse counts equal the closed forms on random shapes and every mask kind", "[block-sparse][io][property]") {
  std::mt19937 rng(20261122);
  auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  for (int k = 0; k < 300; ++k) {
    AttentionProblem p(pick(1, 3), pick(1, 3), pick(1, 600), pick(1, 96), k % 3 == 0 ? Dtype::fp32 : Dtype::fp16, pick(0, 1) == 1);
    const Blocks b{pick(1, std::min<std::int64_t>(p.seq_len, 128)), pick(1, std::min<std::int64_t>(p.seq_len, 128))};
    const BlockGrid grid(p, b);
    std::string spec;
    switch (k % 4) {
      case 0: spec = fmt::format("local:{}", pick(1, 300)); break;
      case 1: spec = "butterfly"; break;
      case 2: spec = fmt::format("random:{}:{}", 0.05 + 0.95 * double(pick(0, 100)) / 100, pick(1, 99)); break;
      default: {
        std::string text;
        for (std::int64_t i = 0; i < grid.Tr; ++i) {
          for (std::int64_t j = 0; j < grid.Tc; ++j) text += pick(0, 2) ? '1' : '0';
          text += '\n';
        }
        spec = temp_mask_file(text);
      }
    }
    p.block_mask = parse_block_mask(spec);
    const BlockGrid masked(p, b);
    for (const char* name : {"flash1", "flash2"}) {
      const Algo algo = algo_named(name);
      INFO(name << " N=" << p.seq_len << " d=" << p.head_dim << " Br=" << b.Br << " Bc=" << b.Bc << " causal=" << p.causal
                << " mask=" << spec);
      const Counts counted = count_problem(algo, p, b), expected = closed_form(algo, p, b).scaled(p.instances());
      for (Tensor t : kAllTensors) {
        REQUIRE(counted[t].read_bytes == expected[t].read_bytes);
        REQUIRE(counted[t].write_bytes == expected[t].write_bytes);
      }
      REQUIRE(counted.matmul_flops == expected.matmul_flops);
      REQUIRE(counted.skipped_blocks == (masked.Tr * masked.Tc - kept_pairs(masked)) * p.instances());
    }
  }
}

TEST_CASE("masked numerics equal the fp64 masked reference; rows keeping no block are 0", "[block-sparse][numerics]") {
  const Inputs in = make_inputs(200, 16, InputKind::unit, 5);
  for (const char* spec : {"local:40", "butterfly", "random:0.3:2", "random:0.05:9"})
    for (bool causal : {false, true})
      for (const char* name : {"flash1", "flash2"}) {
        INFO(spec << " causal=" << causal << " " << name);
        const NumericsCheck c =
            check_numerics(algo_named(name), Precision::fp32, in, {16, 24}, causal, {}, parse_block_mask(spec));
        CHECK(c.finite);
        CHECK(c.max_abs_error < 1e-5);
      }
  // random:0.05 leaves some rows with no kept block: their output is exactly 0.
  BlockGrid grid(200, {16, 24}, false);
  grid.mask = parse_block_mask("random:0.05:9");
  const TiledResult t = algo_named("flash2")->run_tiled(Precision::fp32, in, grid, {});
  int empty_rows = 0;
  for (std::int64_t i = 0; i < grid.Tr; ++i) {
    bool any = false;
    for (std::int64_t j = 0; j < grid.Tc; ++j) any = any || !grid.skipped(i, j);
    if (any) continue;
    ++empty_rows;
    for (std::int64_t x = 0; x < 16; ++x) CHECK(t.O(i * 16, x) == 0.0);
  }
  CHECK(empty_rows > 0);
}

TEST_CASE("the engine's time follows the kept work", "[block-sparse][engine]") {
  const GpuSpec h100 = load_gpu("h100-sxm");
  AttentionProblem p(1, 16, 16384, 64, Dtype::fp16, false);
  const double dense = run_engine(algo_named("flash2"), p, {128, 128}, h100, {}).predicted_s;
  p.block_mask = parse_block_mask("random:0.2:1");
  const double sparse = run_engine(algo_named("flash2"), p, {128, 128}, h100, {}).predicted_s;
  CHECK(sparse < 0.3 * dense);
  CHECK(sparse > 0.15 * dense);
  // A sliding window's first row blocks keep fewer pairs: their CTAs finish first.
  p.causal = true;
  p.block_mask = parse_block_mask("local:4096");
  EngineOptions o;
  o.record_timeline = true;
  const EngineResult e = run_engine(algo_named("flash2"), p, {128, 128}, h100, o);
  double first = 0, last = 0;
  for (const CtaSpan& c : e.timeline.ctas) {
    if (c.cta % 128 == 0) first = std::max(first, c.end_s - c.start_s);
    if (c.cta % 128 == 127) last = std::max(last, c.end_s - c.start_s);
  }
  CHECK(first < 0.2 * last);
}

TEST_CASE("bad masks: exit 2 and one line naming --block-mask or file:line", "[block-sparse][cli][errors]") {
  auto run = [](std::vector<std::string> args) {
    std::ostringstream out, err;
    const int code = run_cli(args, out, err);
    return std::pair{code, err.str()};
  };
  const std::string rows3 = temp_mask_file("01\n10\n11\n"), stray = temp_mask_file("0101\n01x1\n"),
                    ragged = temp_mask_file("0101\n011\n");
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--block-mask", "local:0"}, "--block-mask: local:W"},
      {{"--block-mask", "random:1.5"}, "--block-mask: random density 1.5 is outside (0, 1]"},
      {{"--block-mask", "random:0"}, "--block-mask: random density 0 is outside (0, 1]"},
      {{"--block-mask", "sideways"}, "--block-mask: 'sideways' is not"},
      {{"--block-mask", stray}, stray + ":2: stray character 'x'"},
      {{"--block-mask", ragged}, ragged + ":2: 3 columns, but the first row has 4"},
      {{"--block-mask", rows3, "--block-rows", "4", "--block-cols", "8"}, rows3 + ": 3 rows of 2 columns"},
      {{"--block-mask", "butterfly", "--algo", "standard"}, "--block-mask: standard does not take a block mask"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> full = {"simulate", "--gpu", "toy", "--seq-len", "16", "--head-dim", "4", "--counts-only"};
    full.insert(full.end(), args.begin(), args.end());
    const auto [code, err] = run(full);
    INFO(err);
    CHECK(code == 2);
    CHECK(err.find(message) != std::string::npos);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  }
}

TEST_CASE("simulate --json reports the mask, its density and the dense traffic", "[block-sparse][cli]") {
  std::ostringstream out, err;
  REQUIRE(run_cli({"simulate", "--gpu", "toy", "--seq-len", "16", "--head-dim", "4", "--algo", "flash2", "--block-rows",
                   "4", "--block-cols", "4", "--block-mask", "butterfly", "--json"},
                  out, err) == 0);
  const auto j = nlohmann::json::parse(out.str());
  CHECK(j["problem"]["block_mask"] == "butterfly");
  CHECK(j["block_mask"]["spec"] == "butterfly");
  CHECK(j["block_mask"]["kept_pairs"] == 12);
  CHECK(j["block_mask"]["density"] == Approx(0.75));
  CHECK(j["block_mask"]["dense_hbm_bytes"] > j["hbm"]["read_bytes"].get<std::int64_t>() + j["hbm"]["write_bytes"].get<std::int64_t>());
}
