// Choosing Br and Bc for an algorithm: explicit blocks checked against the SRAM one CTA may use,
// or the paper's defaults, or the largest of those that fit. The room says its working set and
// defaults; this is the same for every room.
#pragma once

#include <optional>
#include <string>

#include "sim/algo/algorithm.hpp"

namespace hbmlab {

struct SramBudget {
  std::int64_t bytes_per_sm = 0;     // sets M = bytes_per_sm / dtype bytes
  std::int64_t bytes_per_block = 0;  // what one CTA may use: the working set must fit here
};

struct BlockChoice {
  Blocks blocks;
  std::int64_t M_elements = 0;
  std::int64_t working_set_bytes = 0;
  std::string origin;  // "paper default", "explicit", "largest fitting"
  std::string note;    // why the choice differs from what was asked, if it does
};

// Explicit blocks (either may be absent) are checked against the budget and are an InputError
// naming --block-rows/--block-cols when they do not fit. Without them the paper's defaults are
// used, or, when those do not fit, the largest that do (the note says so).
BlockChoice choose_blocks(Algo algo, const AttentionProblem& problem, SramBudget sram,
                          std::optional<std::int64_t> block_rows = std::nullopt,
                          std::optional<std::int64_t> block_cols = std::nullopt);

}  // namespace hbmlab
