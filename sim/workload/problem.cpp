// Problem validation, passes, masks and block grids.
#include "sim/workload/problem.hpp"

#include <algorithm>
#include <cmath>

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

std::string_view to_string(Pass pass) { return pass == Pass::forward ? "forward" : "backward"; }

std::optional<Pass> parse_pass(std::string_view text) {
  for (Pass p : {Pass::forward, Pass::backward})
    if (text == to_string(p)) return p;
  return std::nullopt;
}

namespace {

class CausalMask final : public BlockMask {
public:
  bool keeps(const BlockGrid& g, std::int64_t i, std::int64_t j) const override {
    return g.col_begin(j) <= g.query_position(g.row_begin(i) + g.rows(i) - 1);
  }
  std::string spec() const override { return "causal"; }
};

}  // namespace

const BlockMask& causal_mask() {
  static const CausalMask mask;
  return mask;
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
  if (heads > kMaxInstances) fail_input("--heads: {} is more than hbmlab models ({})", heads, kMaxInstances);
  if (batch > kMaxInstances || batch * heads > kMaxInstances)
    fail_input("--batch: B·H = {}·{} is more than hbmlab models ({})", batch, heads, kMaxInstances);
  if (query_len < 0) fail_input("--query-len: must be a positive integer, got {}", query_len);
  if (query_len > seq_len)
    fail_input("--query-len: NQ = {} query rows is more than the N = {} keys they attend to", query_len, seq_len);
  if (kv_heads < 0) fail_input("--kv-heads: must be a positive integer, got {}", kv_heads);
  if (kv_heads > 0 && heads % kv_heads != 0)
    fail_input("--kv-heads: HKV = {} does not divide H = {} (each K/V head serves H/HKV query heads)", kv_heads, heads);
  if (kv_splits < 0) fail_input("--splits: must be a positive integer, got {}", kv_splits);
  if (unified_max && !std::isfinite(*unified_max)) fail_input("--unified-max: must be a finite number, got {}", *unified_max);
}

std::string problem_error_at(std::string_view where, std::string_view message) {
  static constexpr std::pair<std::string_view, std::string_view> kKeys[] = {
      {"--batch: ", "batch"},         {"--heads: ", "heads"},         {"--seq-len: ", "seq_len"},
      {"--head-dim: ", "head_dim"},   {"--query-len: ", "query_len"}, {"--kv-heads: ", "kv_heads"},
      {"--splits: ", "splits"},       {"--unified-max: ", "unified_max"}, {"--block-mask: ", "block_mask"}};
  for (const auto& [option, key] : kKeys)
    if (message.starts_with(option)) return fmt::format("{}.{}: {}", where, key, message.substr(option.size()));
  return fmt::format("{}: {}", where, message);
}

BlockGrid::BlockGrid(std::int64_t N_, Blocks blocks, bool causal_)
    : Nq(N_), N(N_), Br(blocks.Br), Bc(blocks.Bc), Tr(ceil_div(N_, blocks.Br)), Tc(ceil_div(N_, blocks.Bc)),
      causal(causal_) {}

BlockGrid::BlockGrid(const AttentionProblem& p, Blocks blocks, std::int64_t group_)
    : Nq(group_ * p.Nq()), N(p.seq_len), Br(blocks.Br), Bc(blocks.Bc), Tr(ceil_div(group_ * p.Nq(), blocks.Br)),
      Tc(ceil_div(p.seq_len, blocks.Bc)), causal(p.causal), mask(p.block_mask), group(group_),
      splits(std::clamp<std::int64_t>(p.kv_splits, 1, Tc)) {}

std::int64_t BlockGrid::rows(std::int64_t i) const { return std::min(Br, Nq - row_begin(i)); }
std::int64_t BlockGrid::cols(std::int64_t j) const { return std::min(Bc, N - col_begin(j)); }

}  // namespace hbmlab
