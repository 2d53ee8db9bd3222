// Counts-only speed. Run: ./build/tests/bench/bench_counts   (--smoke: tiny sizes, one repetition)
// Prints, for each case, the wall time of counting every step (best of 5), then of the whole
// `simulate --counts-only` pipeline (blocks, counts, bound, roofline) as the CLI runs it.
#include <chrono>
#include <cstdio>
#include <vector>

#include "sim/algo/blocks.hpp"
#include "sim/engine/replay.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/spec/gpu_spec.hpp"
#include "tests/bench/bench_args.hpp"

using namespace hbmlab;

int main(int argc, char** argv) {
  const bench::Args args = bench::parse_args(argc, argv);
  const int reps = args.reps(5);
  const GpuSpec a100 = load_gpu("a100-40gb");
  struct Case {
    const char* name;
    AttentionProblem problem;
    std::optional<Blocks> blocks;
  };
  const std::vector<Case> full = {
      {"GPT-2 medium (B=64 H=16 N=1024 d=64)", {64, 16, 1024, 64, Dtype::fp16, false}, std::nullopt},
      {"one 64K head (N=65536 d=64), 128x128", {1, 1, 65536, 64, Dtype::fp16, false}, Blocks{128, 128}},
      {"one 64K head, causal, 128x128", {1, 1, 65536, 64, Dtype::fp16, true}, Blocks{128, 128}},
  };
  const std::vector<Case> smoke = {
      {"smoke (B=2 H=2 N=256 d=64)", {2, 2, 256, 64, Dtype::fp16, false}, std::nullopt},
      {"smoke one head (N=1024 d=64), causal", {1, 1, 1024, 64, Dtype::fp16, true}, Blocks{128, 128}},
  };
  const std::vector<Case>& cases = args.smoke ? smoke : full;
  std::printf("%-40s %-9s %12s %14s %10s\n", "case", "algo", "steps/head", "HBM bytes", "seconds");
  for (const Case& c : cases)
    for (Algo algo : all_rooms_for(c.problem)) {
      const Blocks b = c.blocks ? *c.blocks
                                : choose_blocks(algo, c.problem, {a100.sram_bytes_per_sm, a100.sram_bytes_per_block}).blocks;
      Counts counts;
      const double s = bench::best_seconds(reps, [&] { counts = count_problem(algo, c.problem, b); });
      std::printf("%-40s %-9s %12lld %14lld %10.4f\n", c.name, std::string(to_string(algo)).c_str(),
                  static_cast<long long>(counts.steps / c.problem.instances()), static_cast<long long>(counts.hbm_bytes()), s);
    }

  std::printf("\n%-40s %-9s %10s\n", "simulate --counts-only", "algo", "seconds");
  const GpuSpec h100 = load_gpu("h100-sxm");
  for (const Case& c : cases)
    for (Algo algo : all_rooms_for(c.problem)) {
      SimulateRequest request;
      request.gpu = c.blocks ? h100 : a100;
      request.problem = c.problem;
      request.algo = algo;
      if (c.blocks) {
        request.block_rows = c.blocks->Br;
        request.block_cols = c.blocks->Bc;
      }
      request.counts_only = true;
      const double best = bench::best_seconds(reps, [&] { (void)simulate(request); });
      std::printf("%-40s %-9s %10.4f\n", c.name, std::string(to_string(algo)).c_str(), best);
    }
  return 0;
}
