// Replaying an algorithm: counts-only (streams, one (batch, head) then × B·H, since all are
// alike) or recorded (every step kept, for stepping back and forth in the GUI).
#pragma once

#include <vector>

#include "sim/algo/algorithm.hpp"
#include "sim/engine/counters.hpp"

namespace hbmlab {

// Streams the steps of one (batch, head) through an IoCounter.
Counts count_instance(Algo algo, const AttentionProblem& problem, Blocks blocks);

// The whole problem: count_instance × B·H.
Counts count_problem(Algo algo, const AttentionProblem& problem, Blocks blocks);

// Every step of one (batch, head), in order.
std::vector<Step> record_steps(Algo algo, const AttentionProblem& problem, Blocks blocks);

}  // namespace hbmlab
