// Replaying an algorithm: counts-only (streams, one instance then × the room's instances, B·H or
// B·HKV, since all are alike) or recorded (every step kept, for stepping back and forth in the GUI).
#pragma once

#include <string>
#include <vector>

#include "sim/algo/algorithm.hpp"
#include "sim/engine/counters.hpp"

namespace hbmlab {

// Throws InputError when one instance has more block pairs than counting streams in one run
// (kMaxCountedPairs, sim/common/limits.hpp). The error names --block-rows/--block-cols where the
// user gave the blocks, --seq-len where hbmlab chose them (`blocks_chosen`): the option to change.
void check_countable(Algo algo, const AttentionProblem& problem, Blocks blocks, bool blocks_chosen = false);

// The start of a too-many-block-pairs error: the option the user changes and the grid, for
// check_countable and check_engine_size.
std::string too_many_pairs_lead(Algo algo, const AttentionProblem& problem, Blocks blocks, bool blocks_chosen);

// Streams the steps of one instance (a (batch, head), or a room's (batch, K/V head) group) through an IoCounter.
Counts count_instance(Algo algo, const AttentionProblem& problem, Blocks blocks);

// The whole problem: count_instance × Algorithm::instances (B·H, or B·HKV for GQA-packed rooms).
Counts count_problem(Algo algo, const AttentionProblem& problem, Blocks blocks);

// Every step of one instance, in order.
std::vector<Step> record_steps(Algo algo, const AttentionProblem& problem, Blocks blocks);

}  // namespace hbmlab
