// Forward + backward speed on GPT-2 medium (B=64 H=16 N=1024 d=64 fp16, A100-40GB, paper blocks):
// wall time of the counts and of the timing engine for each pass (best of 5), then of the whole
// `simulate --pass both --numerics off` as the CLI runs it, for every room that has a backward.
// Run: ./build/tests/bench/bench_backward   (--smoke: B=2 H=2 N=256, one repetition)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "sim/algo/blocks.hpp"
#include "sim/engine/replay.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/engine/timing.hpp"
#include "sim/spec/gpu_spec.hpp"
#include "tests/bench/bench_args.hpp"

using namespace hbmlab;

using bench::best_seconds;

int main(int argc, char** argv) {
  const bench::Args args = bench::parse_args(argc, argv);
  const int reps = args.reps(5);
  const GpuSpec a100 = load_gpu("a100-40gb");
  const AttentionProblem gpt2 = args.smoke ? AttentionProblem{2, 2, 256, 64, Dtype::fp16, false}
                                           : AttentionProblem{64, 16, 1024, 64, Dtype::fp16, false};
  const SramBudget sram{a100.sram_bytes_per_sm, a100.sram_bytes_per_block};

  std::printf("%s (B=%lld H=%lld N=%lld d=64 fp16) on %s, paper blocks\n\n", args.smoke ? "smoke" : "GPT-2 medium",
              static_cast<long long>(gpt2.batch), static_cast<long long>(gpt2.heads),
              static_cast<long long>(gpt2.seq_len), a100.name.c_str());
  std::printf("%-10s %-9s %9s %14s %11s %11s %12s\n", "algorithm", "pass", "Br x Bc", "HBM bytes", "counts ms",
              "engine ms", "predicted");
  for (Pass pass : {Pass::forward, Pass::backward})
    for (Algo algo : all_rooms_for(gpt2, pass)) {
      const Blocks b = choose_blocks(algo, gpt2, sram).blocks;
      Counts counts;
      EngineResult engine;
      const double counts_s = best_seconds(reps, [&] { counts = count_problem(algo, gpt2, b); });
      const double engine_s = best_seconds(reps, [&] { engine = run_engine(algo, gpt2, b, a100, EngineOptions{}); });
      std::printf("%-10s %-9s %4lldx%-4lld %14lld %11.3f %11.3f %9.3f ms\n", std::string(algo->name()).c_str(),
                  std::string(to_string(pass)).c_str(), static_cast<long long>(b.Br), static_cast<long long>(b.Bc),
                  static_cast<long long>(counts.hbm_bytes()), counts_s * 1e3, engine_s * 1e3, engine.predicted_s * 1e3);
    }

  // What `hbmlab simulate --algo X --pass both --numerics off` does: blocks, counts, bound and engine
  // for the forward room, then for the backward room: every room that has a backward (the decode
  // rooms have none).
  std::printf("\n%-10s %30s\n", "algorithm", "forward + backward, wall s");
  double all_s = 0;
  int rooms = 0;
  for (Algo backward : algorithms(Pass::backward)) {
    const Algo forward = algo_named(backward->name(), Pass::forward);
    ++rooms;
    SimulateRequest request;
    request.gpu = a100;
    request.problem = gpt2;
    request.numerics = NumericsMode::off;
    const double s = best_seconds(reps, [&] {
      request.algo = forward;
      (void)simulate(request);
      request.algo = backward;
      (void)simulate(request);
    });
    all_s += s;
    std::printf("%-10s %30.4f\n", std::string(forward->name()).c_str(), s);
  }
  std::printf("%-10s %30.4f\n", fmt::format("all {}", rooms).c_str(), all_s);
  return 0;
}
