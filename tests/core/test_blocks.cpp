// Block choice: the paper's defaults, the SRAM working-set check, and errors for blocks that do not fit.
#include <catch2/catch.hpp>

#include "sim/common/error.hpp"
#include "sim/spec/gpu_spec.hpp"
#include "sim/algo/blocks.hpp"

using namespace hbmlab;

namespace {

SramBudget sram_of(const char* preset) {
  const GpuSpec gpu = load_gpu(preset);
  return {gpu.sram_bytes_per_sm, gpu.sram_bytes_per_block};
}

}  // namespace

TEST_CASE("A100, d=64: Bc = ⌈M/4d⌉ = 328, Br = d = 64", "[blocks]") {
  // 164 KiB per SM / 2 B = 83,968 elements; 83,968 / 256 = 328.
  const BlockChoice c = choose_blocks(algo_named("flash1"), {1, 1, 1024, 64, Dtype::fp16, false}, sram_of("a100-40gb"));
  CHECK(c.M_elements == 83968);
  CHECK(c.blocks == Blocks{64, 328});
  CHECK(c.note.empty());
}

TEST_CASE("defaults clamp to N", "[blocks]") {
  const BlockChoice c = choose_blocks(algo_named("flash1"), {1, 1, 100, 64, Dtype::fp16, false}, sram_of("a100-40gb"));
  CHECK(c.blocks == Blocks{64, 100});
}

TEST_CASE("defaults that do not fit fall back to the largest that do, and say so", "[blocks]") {
  // H100, d = 256: Bc = Br = ⌈116,736/1024⌉ = 114 needs 234,384 B > 232,448 B per CTA.
  const AttentionProblem p{1, 1, 4096, 256, Dtype::fp16, false};
  const SramBudget sram = sram_of("h100-sxm");
  const BlockChoice c = choose_blocks(algo_named("flash1"), p, sram);
  CHECK(c.origin == "largest fitting");
  CHECK_THAT(c.note, Catch::Contains("234384 B"));
  CHECK(c.working_set_bytes <= sram.bytes_per_block);
  CHECK(c.blocks.Bc == 113);  // one key row fewer is enough
  CHECK(algo_named("flash1")->working_set_bytes(p, {c.blocks.Br + 1, c.blocks.Bc + 1}) > sram.bytes_per_block);
}

TEST_CASE("explicit blocks that do not fit are an error naming the option", "[blocks][errors]") {
  const AttentionProblem p{1, 1, 4096, 64, Dtype::fp16, false};
  CHECK_THROWS_WITH(choose_blocks(algo_named("flash1"), p, sram_of("toy"), 64, 64),
                    Catch::StartsWith("--block-cols: Br=64, Bc=64 need"));
  CHECK_THROWS_WITH(choose_blocks(algo_named("flash1"), p, sram_of("toy"), 64, std::nullopt),
                    Catch::StartsWith("--block-rows:"));
  CHECK_THROWS_AS(choose_blocks(algo_named("flash1"), p, sram_of("toy"), 0, 4), InputError);
}

TEST_CASE("SRAM too small for one row of each tile", "[blocks][errors]") {
  CHECK_THROWS_WITH(choose_blocks(algo_named("flash1"), {1, 1, 64, 64, Dtype::fp16, false}, {100, 100}),
                    Catch::StartsWith("--sram-bytes:"));
}

TEST_CASE("problem validation names the option", "[blocks][errors]") {
  CHECK_THROWS_WITH((AttentionProblem{1, 1, 0, 64, Dtype::fp16, false}.validate()), Catch::StartsWith("--seq-len:"));
  CHECK_THROWS_WITH((AttentionProblem{1, 1, 64, -3, Dtype::fp16, false}.validate()), Catch::StartsWith("--head-dim:"));
  CHECK_THROWS_WITH((AttentionProblem{0, 1, 64, 8, Dtype::fp16, false}.validate()), Catch::StartsWith("--batch:"));
}
