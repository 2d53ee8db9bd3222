// Decode-step speed: one Llama-3-8B decode step (32 query heads on 8 K/V heads, d = 128, NQ = 1) at
// 4K, 32K and 128K context, the embedded llama3-8b-decode-* scenarios. For each room: the wall time of
// the counts (every step, best of 5), of the timing engine (best of 3), and of `simulate` with both and
// no numerics, as the CLI runs it; beside them the predicted time and the cache's bytes over the HBM
// bandwidth, the floor any decode step stands on.
// Run: ./build/tests/bench/bench_decode   (the target: the 128K step, counts + engine, well under 1 s;
// --smoke: the 4K step only, one repetition)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/engine/replay.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/scenario/scenario.hpp"
#include "tests/bench/bench_args.hpp"

using namespace hbmlab;

using bench::best_seconds;

int main(int argc, char** argv) {
  const bench::Args args = bench::parse_args(argc, argv);
  const std::vector<const char*> full = {"llama3-8b-decode-4k", "llama3-8b-decode-32k", "llama3-8b-decode-128k"},
                                 smoke = {"llama3-8b-decode-4k"};
  std::printf("%-24s %-16s %9s %9s %9s %12s %12s %6s\n", "scenario", "algo", "counts", "engine", "simulate",
              "predicted", "cache/BW", "CTAs");
  double worst_128k = 0;
  for (const char* name : args.smoke ? smoke : full) {
    const Scenario sc = load_scenario(name);
    for (Algo algo : sc.algorithms) {
      SimulateRequest request;
      request.gpu = load_gpu(sc.gpu);
      request.problem = sc.problem;
      request.algo = algo;
      request.numerics = NumericsMode::off;
      SimulationResult r = simulate(request);  // the blocks and splits it chose, for the parts below
      const double counts_s = best_seconds(args.reps(5), [&] { (void)count_problem(algo, r.problem, r.blocks.blocks); });
      const double engine_s = best_seconds(args.reps(3), [&] { (void)run_engine(algo, r.problem, r.blocks.blocks, request.gpu, {}); });
      const double simulate_s = best_seconds(args.reps(3), [&] { r = simulate(request); });
      const AttentionProblem& p = r.problem;  // K and V of B·HKV heads, N × d each
      const double cache_bytes = 2.0 * double(p.batch * p.Hkv() * p.seq_len * p.head_dim * p.elem_bytes());
      std::int64_t ctas = 0;
      for (const KernelTiming& k : r.engine.kernels) ctas += k.ctas;
      std::printf("%-24s %-16s %6.2f ms %6.2f ms %6.2f ms %9.2f µs %9.2f µs %6lld\n", name,
                  std::string(to_string(algo)).c_str(), counts_s * 1e3, engine_s * 1e3, simulate_s * 1e3, r.time.predicted_s * 1e6,
                  cache_bytes / (request.gpu.hbm_bandwidth_gbps * 1e9) * 1e6, static_cast<long long>(ctas));
      if (std::string_view(name).ends_with("128k")) worst_128k = std::max(worst_128k, counts_s + engine_s);
    }
  }
  if (!args.smoke)
    std::printf("\n128K decode step, counts + engine: %.1f ms at worst over the rooms (target: well under 1 s)\n",
                worst_128k * 1e3);
  std::printf("(cache/BW: the K/V cache's bytes, K and V of every K/V head once, over the HBM bandwidth)\n");
  return 0;
}
