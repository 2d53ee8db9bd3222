// Counts-only and recorded replays.
#include "sim/engine/replay.hpp"


namespace hbmlab {

Counts count_instance(Algo algo, const AttentionProblem& problem, Blocks blocks) {
  IoCounter counter;
  algo->emit(problem, blocks, counter);
  return counter.counts();
}

Counts count_problem(Algo algo, const AttentionProblem& problem, Blocks blocks) {
  return count_instance(algo, problem, blocks).scaled(algo->instances(problem));
}

std::vector<Step> record_steps(Algo algo, const AttentionProblem& problem, Blocks blocks) {
  Trace trace;
  algo->emit(problem, blocks, trace);
  return std::move(trace.steps);
}

}  // namespace hbmlab
