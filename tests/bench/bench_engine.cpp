// Timing-engine speed: wall time of one engine run (L2 on), best of 3, with what it predicted.
// Run: ./build/tests/bench/bench_engine   (the target: GPT-2 medium flash2 under one second;
// --smoke: the same cases at B=2 H=2 and N = 2048 for the long ones, one repetition)
#include <chrono>
#include <cstdio>

#include "sim/engine/timing.hpp"
#include "sim/workload/problem.hpp"
#include "tests/bench/bench_args.hpp"

using namespace hbmlab;

int main(int argc, char** argv) {
  const bench::Args args = bench::parse_args(argc, argv);
  const GpuSpec a100 = load_gpu("a100-40gb"), h100 = load_gpu("h100-sxm");
  EngineOptions fa2;  // PyTorch's FlashAttention-2 launch as ncu recorded it (d = 64)
  fa2.launch.threads_per_cta = 128;
  fa2.launch.registers_per_thread = 255;
  fa2.launch.smem_bytes_per_cta = 49152;
  fa2.launch.kv_descending = true;
  struct Case {
    const char* name;
    const GpuSpec& gpu;
    Algo algo;
    AttentionProblem problem;
    Blocks blocks;
    EngineOptions options;
  };
  const AttentionProblem gpt2 = args.smoke ? AttentionProblem{2, 2, 1024, 64, Dtype::fp16, false}
                                           : AttentionProblem{64, 16, 1024, 64, Dtype::fp16, false};
  const std::int64_t long_N = args.smoke ? 2048 : 65536;
  const Case cases[] = {
      {"GPT-2 medium flash2, A100, paper blocks", a100, algo_named("flash2"), gpt2, {328, 64}, {}},
      {"GPT-2 medium flash2, H100, FA2 launch", h100, algo_named("flash2"), gpt2, {128, 128}, fa2},
      {"GPT-2 medium standard, A100", a100, algo_named("standard"), gpt2, {64, 328}, {}},
      {"GPT-2 medium flash1, A100, paper blocks", a100, algo_named("flash1"), gpt2, {64, 328}, {}},
      {"64K tokens flash2, H100, B=1 H=16 d=64", h100, algo_named("flash2"), {1, 16, long_N, 64, Dtype::fp16, false}, {128, 128}, fa2},
      {"64K tokens flash2 causal, H100", h100, algo_named("flash2"), {1, 16, long_N, 64, Dtype::fp16, true}, {128, 128}, fa2},
  };
  if (args.smoke) std::printf("--smoke: the cases below at B=2 H=2 and N = 2048 for the 64K ones, one repetition\n");
  std::printf("%-42s %10s %12s %12s %12s %8s\n", "case", "wall", "predicted", "DRAM read", "SM-L2 read", "CTAs");
  for (const Case& c : cases) {
    EngineResult r;
    const double best = bench::best_seconds(args.reps(3), [&] { r = run_engine(c.algo, c.problem, c.blocks, c.gpu, c.options); });
    std::int64_t ctas = 0;
    for (const KernelTiming& k : r.kernels) ctas += k.ctas;
    std::printf("%-42s %8.3f s %9.3f ms %9.1f MB %9.1f MB %8lld\n", c.name, best, r.predicted_s * 1e3,
                double(r.dram_read_bytes()) / 1e6, double(r.sm_read_bytes()) / 1e6, static_cast<long long>(ctas));
  }
  return 0;
}
