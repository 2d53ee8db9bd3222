// Problem validation, block grids, working sets and the choice of block sizes.
#include "sim/workload/problem.hpp"

#include <algorithm>

#include "sim/common/error.hpp"

namespace hbmlab {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

std::int64_t dtype_bytes(Dtype dtype) { return dtype == Dtype::fp32 ? 4 : 2; }

std::string_view to_string(Dtype dtype) {
  switch (dtype) {
    case Dtype::fp16: return "fp16";
    case Dtype::bf16: return "bf16";
    case Dtype::fp32: return "fp32";
  }
  return "?";
}

std::optional<Dtype> parse_dtype(std::string_view text) {
  for (Dtype d : {Dtype::fp16, Dtype::bf16, Dtype::fp32})
    if (text == to_string(d)) return d;
  return std::nullopt;
}

std::string_view to_string(Algo algo) {
  switch (algo) {
    case Algo::standard: return "standard";
    case Algo::flash1: return "flash1";
    case Algo::flash2: return "flash2";
  }
  return "?";
}

std::optional<Algo> parse_algo(std::string_view text) {
  for (Algo a : kAllAlgos)
    if (text == to_string(a)) return a;
  return std::nullopt;
}

std::string_view paper_name(Algo algo) {
  switch (algo) {
    case Algo::standard: return "standard attention (FlashAttention paper, Algorithm 0)";
    case Algo::flash1: return "FlashAttention (FlashAttention paper, Algorithm 1)";
    case Algo::flash2: return "FlashAttention-2 (FlashAttention-2 paper, Algorithm 1)";
  }
  return "?";
}

void AttentionProblem::validate() const {
  // Limits keep every byte count well inside 64 bits (N² · B · H · 4 bytes < 2^63).
  constexpr std::int64_t kMaxSeqLen = std::int64_t{1} << 24;  // 16M tokens
  constexpr std::int64_t kMaxHeadDim = 4096;
  constexpr std::int64_t kMaxInstances = std::int64_t{1} << 20;
  if (batch <= 0) fail_input("--batch: must be a positive integer, got {}", batch);
  if (heads <= 0) fail_input("--heads: must be a positive integer, got {}", heads);
  if (seq_len <= 0) fail_input("--seq-len: must be a positive integer, got {}", seq_len);
  if (head_dim <= 0) fail_input("--head-dim: must be a positive integer, got {}", head_dim);
  if (seq_len > kMaxSeqLen) fail_input("--seq-len: {} is more than hbmlab models ({})", seq_len, kMaxSeqLen);
  if (head_dim > kMaxHeadDim) fail_input("--head-dim: {} is more than hbmlab models ({})", head_dim, kMaxHeadDim);
  if (batch > kMaxInstances || heads > kMaxInstances || batch * heads > kMaxInstances)
    fail_input("--batch: B·H = {}·{} is more than hbmlab models ({})", batch, heads, kMaxInstances);
}

BlockGrid::BlockGrid(std::int64_t N_, Blocks blocks, bool causal_)
    : N(N_), Br(blocks.Br), Bc(blocks.Bc), Tr(ceil_div(N_, blocks.Br)), Tc(ceil_div(N_, blocks.Bc)), causal(causal_) {}

std::int64_t BlockGrid::rows(std::int64_t i) const { return std::min(Br, N - row_begin(i)); }
std::int64_t BlockGrid::cols(std::int64_t j) const { return std::min(Bc, N - col_begin(j)); }

std::int64_t sram_working_set_bytes(Algo algo, const AttentionProblem& problem, Blocks b) {
  const std::int64_t d = problem.head_dim, e = problem.elem_bytes();
  switch (algo) {
    case Algo::standard:
      return e * std::max(b.Br * d + b.Bc * d + b.Br * b.Bc,   // Q_i, K_j, S_ij
                          b.Br * b.Bc + b.Bc * d + b.Br * d);  // P_ij, V_j, O_i
    case Algo::flash1:
    case Algo::flash2:
      return e * (2 * b.Br * d + 2 * b.Bc * d) + kStatBytes * 2 * b.Br;
  }
  return 0;
}

Blocks paper_default_blocks(Algo algo, std::int64_t M, std::int64_t d, std::int64_t N) {
  const std::int64_t big = std::min(ceil_div(M, 4 * d), N);  // line 1: ⌈M/(4d)⌉
  const std::int64_t small = std::min({big, d, N});          // line 1: min(⌈M/(4d)⌉, d)
  if (algo == Algo::flash2) return {big, small};
  return {small, big};
}

namespace {

std::string describe(Blocks b, std::int64_t bytes) {
  return fmt::format("Br={}, Bc={} need {} B of SRAM", b.Br, b.Bc, bytes);
}

// The largest M' <= M whose paper-default blocks fit: working sets grow with M'.
std::optional<Blocks> largest_fitting_default(Algo algo, const AttentionProblem& p, SramBudget sram,
                                              std::int64_t M) {
  auto fits = [&](std::int64_t m) {
    return sram_working_set_bytes(algo, p, paper_default_blocks(algo, m, p.head_dim, p.seq_len)) <=
           sram.bytes_per_block;
  };
  if (!fits(1)) return std::nullopt;
  std::int64_t lo = 1, hi = M;  // fits(lo) holds
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) lo = mid; else hi = mid - 1;
  }
  return paper_default_blocks(algo, lo, p.head_dim, p.seq_len);
}

}  // namespace

BlockChoice choose_blocks(Algo algo, const AttentionProblem& p, SramBudget sram,
                          std::optional<std::int64_t> block_rows, std::optional<std::int64_t> block_cols) {
  if (sram.bytes_per_sm <= 0) fail_input("--sram-bytes: must be a positive integer, got {}", sram.bytes_per_sm);
  if (sram.bytes_per_block <= 0) sram.bytes_per_block = sram.bytes_per_sm;
  if (block_rows && *block_rows <= 0) fail_input("--block-rows: must be a positive integer, got {}", *block_rows);
  if (block_cols && *block_cols <= 0) fail_input("--block-cols: must be a positive integer, got {}", *block_cols);

  BlockChoice choice;
  choice.M_elements = sram.bytes_per_sm / p.elem_bytes();
  if (choice.M_elements < 1)
    fail_input("--sram-bytes: {} B holds no {} element", sram.bytes_per_sm, to_string(p.dtype));
  const Blocks paper = paper_default_blocks(algo, choice.M_elements, p.head_dim, p.seq_len);

  if (block_rows || block_cols) {
    choice.origin = "explicit";
    choice.blocks = {std::min(block_rows.value_or(paper.Br), p.seq_len),
                     std::min(block_cols.value_or(paper.Bc), p.seq_len)};
    if ((block_rows && *block_rows > p.seq_len) || (block_cols && *block_cols > p.seq_len))
      choice.note = fmt::format("blocks clamped to N = {}", p.seq_len);
    choice.working_set_bytes = sram_working_set_bytes(algo, p, choice.blocks);
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
  choice.working_set_bytes = sram_working_set_bytes(algo, p, paper);
  if (choice.working_set_bytes <= sram.bytes_per_block) return choice;

  const auto fit = largest_fitting_default(algo, p, sram, choice.M_elements);
  if (!fit)
    fail_input("--sram-bytes: {} B per CTA cannot hold even one row each of Q, K, V and O (d = {})",
               sram.bytes_per_block, p.head_dim);
  choice.note = fmt::format("the paper's default {}, more than the {} B one CTA may use; using the largest that fits",
                            describe(paper, choice.working_set_bytes), sram.bytes_per_block);
  choice.blocks = *fit;
  choice.origin = "largest fitting";
  choice.working_set_bytes = sram_working_set_bytes(algo, p, *fit);
  return choice;
}

}  // namespace hbmlab
