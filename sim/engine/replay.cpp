// Counts-only and recorded replays.
#include "sim/engine/replay.hpp"

#include "sim/common/error.hpp"
#include "sim/common/limits.hpp"

namespace hbmlab {

void check_countable(Algo algo, const AttentionProblem& problem, Blocks blocks) {
  if (blocks.Br <= 0 || blocks.Bc <= 0)
    fail_input("--block-rows/--block-cols: Br = {}, Bc = {}: blocks must hold at least one row", blocks.Br, blocks.Bc);
  const BlockGrid grid = algo->grid(problem, blocks);
  const std::int64_t pairs = saturating_mul(grid.Tr, grid.Tc);
  if (pairs > kMaxCountedPairs)
    fail_input("--block-rows/--block-cols: Tr × Tc = {} × {} block pairs (in each of the {}) is more than hbmlab "
               "replays in one run ({}); choose larger blocks or a smaller --seq-len",
               grid.Tr, grid.Tc, algo->instance_name(problem), kMaxCountedPairs);
}

Counts count_instance(Algo algo, const AttentionProblem& problem, Blocks blocks) {
  check_countable(algo, problem, blocks);
  IoCounter counter;
  algo->emit(problem, blocks, counter);
  return counter.counts();
}

Counts count_problem(Algo algo, const AttentionProblem& problem, Blocks blocks) {
  return count_instance(algo, problem, blocks).scaled(algo->instances(problem));
}

std::vector<Step> record_steps(Algo algo, const AttentionProblem& problem, Blocks blocks) {
  check_countable(algo, problem, blocks);
  Trace trace;
  algo->emit(problem, blocks, trace);
  return std::move(trace.steps);
}

}  // namespace hbmlab
