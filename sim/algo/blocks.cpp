// The choice of block sizes.
#include "sim/algo/blocks.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/common/error.hpp"

namespace hbmlab {
namespace {

std::string describe(Blocks b, std::int64_t bytes) {
  return fmt::format("Br={}, Bc={} need {} B of SRAM", b.Br, b.Bc, bytes);
}

// The query rows of one instance: NQ (all N for self-attention), or g·NQ when a room packs g heads.
std::int64_t query_rows(Algo algo, const AttentionProblem& p) { return algo->heads_per_instance(p) * p.Nq(); }

// The paper's blocks for M elements, Br clamped to the query rows there are (decoding: NQ ≪ N).
Blocks paper_default(Algo algo, const AttentionProblem& p, std::int64_t M) {
  Blocks b = algo->paper_blocks(M, p.head_dim, p.seq_len);
  b.Br = std::min(b.Br, query_rows(algo, p));
  return b;
}

// The largest M' <= M whose paper-default blocks fit: working sets grow with M'.
std::optional<Blocks> largest_fitting_default(Algo algo, const AttentionProblem& p, SramBudget sram, std::int64_t M) {
  auto fits = [&](std::int64_t m) { return algo->working_set_bytes(p, paper_default(algo, p, m)) <= sram.bytes_per_block; };
  if (!fits(1)) return std::nullopt;
  std::int64_t lo = 1, hi = M;  // fits(lo) holds
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) lo = mid; else hi = mid - 1;
  }
  return paper_default(algo, p, lo);
}

}  // namespace

BlockChoice choose_blocks(Algo algo, const AttentionProblem& p, SramBudget sram, std::optional<std::int64_t> block_rows,
                          std::optional<std::int64_t> block_cols) {
  if (sram.bytes_per_sm <= 0) fail_input("--sram-bytes: must be a positive integer, got {}", sram.bytes_per_sm);
  if (sram.bytes_per_block <= 0) sram.bytes_per_block = sram.bytes_per_sm;
  if (block_rows && *block_rows <= 0) fail_input("--block-rows: must be a positive integer, got {}", *block_rows);
  if (block_cols && *block_cols <= 0) fail_input("--block-cols: must be a positive integer, got {}", *block_cols);

  BlockChoice choice;
  choice.M_elements = sram.bytes_per_sm / p.elem_bytes();
  if (choice.M_elements < 1)
    fail_input("--sram-bytes: {} B holds no {} element", sram.bytes_per_sm, to_string(p.dtype));
  const Blocks paper = paper_default(algo, p, choice.M_elements);

  if (block_rows || block_cols) {
    choice.origin = "explicit";
    const std::int64_t rows = query_rows(algo, p);
    choice.blocks = {std::min(block_rows.value_or(paper.Br), rows), std::min(block_cols.value_or(paper.Bc), p.seq_len)};
    if ((block_rows && *block_rows > p.seq_len) || (block_cols && *block_cols > p.seq_len))
      choice.note = fmt::format("blocks clamped to N = {}", p.seq_len);
    else if (block_rows && *block_rows > rows)
      choice.note = fmt::format("Br clamped to the {} query rows", rows);
    choice.working_set_bytes = algo->working_set_bytes(p, choice.blocks);
    if (choice.working_set_bytes > sram.bytes_per_block) {
      const std::string_view option = block_cols ? "--block-cols" : "--block-rows";
      std::string hint;
      if (auto fit = largest_fitting_default(algo, p, sram, choice.M_elements))
        hint = fmt::format("; the largest paper-rule choice that fits is Br={}, Bc={}", fit->Br, fit->Bc);
      fail_input("{}: {}, more than the {} B one CTA may use{}", option,
                 describe(choice.blocks, choice.working_set_bytes), sram.bytes_per_block, hint);
    }
    return choice;
  }

  choice.blocks = paper;
  choice.origin = "paper default";
  choice.working_set_bytes = algo->working_set_bytes(p, paper);
  if (choice.working_set_bytes <= sram.bytes_per_block) return choice;

  const auto fit = largest_fitting_default(algo, p, sram, choice.M_elements);
  if (!fit)
    fail_input("--sram-bytes: {} B per CTA cannot hold even one row each of Q, K, V and O (d = {})",
               sram.bytes_per_block, p.head_dim);
  choice.note = fmt::format("the paper's default {}, more than the {} B one CTA may use; using the largest that fits",
                            describe(paper, choice.working_set_bytes), sram.bytes_per_block);
  choice.blocks = *fit;
  choice.origin = "largest fitting";
  choice.working_set_bytes = algo->working_set_bytes(p, *fit);
  return choice;
}

}  // namespace hbmlab
