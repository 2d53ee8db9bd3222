// Counts-only and recorded replays.
#include "sim/engine/replay.hpp"

#include "sim/common/error.hpp"
#include "sim/common/limits.hpp"

namespace hbmlab {

std::string too_many_pairs_lead(Algo algo, const AttentionProblem& problem, Blocks blocks, bool blocks_chosen) {
  const BlockGrid grid = algo->grid(problem, blocks);
  if (blocks_chosen)
    return fmt::format("--seq-len: N = {} in the blocks hbmlab chose (Br = {}, Bc = {}) makes Tr × Tc = {} × {} "
                       "block pairs in each of the {}",
                       problem.seq_len, blocks.Br, blocks.Bc, grid.Tr, grid.Tc, algo->instance_name(problem));
  return fmt::format("--block-rows/--block-cols: Tr × Tc = {} × {} block pairs in each of the {}", grid.Tr, grid.Tc,
                     algo->instance_name(problem));
}

void check_countable(Algo algo, const AttentionProblem& problem, Blocks blocks, bool blocks_chosen) {
  if (blocks.Br <= 0 || blocks.Bc <= 0)
    fail_input("--block-rows/--block-cols: Br = {}, Bc = {}: blocks must hold at least one row", blocks.Br, blocks.Bc);
  const BlockGrid grid = algo->grid(problem, blocks);
  const std::int64_t pairs = saturating_mul(grid.Tr, grid.Tc);
  if (pairs > kMaxCountedPairs)
    fail_input("{}, more than hbmlab replays in one run ({}); choose a smaller --seq-len or larger "
               "--block-rows/--block-cols",
               too_many_pairs_lead(algo, problem, blocks, blocks_chosen), kMaxCountedPairs);
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
