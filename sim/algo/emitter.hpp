// Emitter: what the rooms' step streams are written with. It knows the block grid of one
// (batch, head) and turns "load K_j at line 6" into a Step with its rectangle and bytes.
#pragma once

#include <utility>

#include "sim/algo/step.hpp"

namespace hbmlab {

// Non-matmul FLOPs count one operation per max, add, subtract, multiply, divide, exp or log on
// one element. Per score of S_ij: rowmax 1, subtract-and-exp 2, rowsum 1.
inline constexpr std::int64_t kScoreOps = 4;
// Standard softmax per score: max, subtract, exp, sum, then divide by the sum.
inline constexpr std::int64_t kSoftmaxOps = 5;

class Emitter {
public:
  Emitter(const AttentionProblem& p, Blocks b, StepSink& sink) : Emitter(p, BlockGrid(p, b), sink) {}
  Emitter(const AttentionProblem& p, BlockGrid g, StepSink& sink)
      : grid(std::move(g)), d_(p.head_dim), dtype_(p.dtype), sink_(sink) {}

  const BlockGrid grid;
  std::int32_t cta = -1;  // stamped on every step (Step::cta) by rooms that number their CTAs
  std::int64_t d() const { return d_; }

  void load(Tensor t, std::int64_t i, std::int64_t j, int line) { move(StepKind::load, t, i, j, line); }
  void store(Tensor t, std::int64_t i, std::int64_t j, int line) { move(StepKind::store, t, i, j, line); }

  void compute(FlopKind kind, Tensor result, std::int64_t i, std::int64_t j, int line, std::int64_t flops,
               std::int64_t sram_read_elems = 0) {
    Step s = tile(result, i, j);
    s.kind = StepKind::compute;
    s.flop_kind = kind;
    s.line = static_cast<std::uint8_t>(line);
    s.flops = flops;
    s.sram_read_bytes = sram_read_elems * dtype_bytes(dtype_);
    s.cta = cta;
    sink_.on_step(s);
  }

  void skip(std::int64_t i, std::int64_t j, int line) {
    Step s = tile(Tensor::S, i, j);
    s.kind = StepKind::skip;
    s.line = static_cast<std::uint8_t>(line);
    s.by_block_mask = !(grid.causal && !causal_mask().keeps(grid, i, j));
    s.cta = cta;
    sink_.on_step(s);
  }

  // The rectangle a tensor's block occupies: K and V (and their gradients) by row block j; the
  // others by row block i; S and P (and dP, dS) also by column block j; statistics one column wide.
  // A split's partials O_part and lse_part (j = the split) stack the splits: split j's rows follow
  // the j earlier splits' NQ rows each.
  Step tile(Tensor t, std::int64_t i, std::int64_t j) const {
    Step s;
    s.tensor = t;
    s.i = static_cast<std::int32_t>(i);
    s.j = static_cast<std::int32_t>(j);
    const bool by_j = by_column_block(t);
    const bool by_split = t == Tensor::O_part || t == Tensor::lse_part;
    s.row0 = by_j ? grid.col_begin(j) : by_split ? j * grid.Nq + grid.row_begin(i) : grid.row_begin(i);
    s.rows = by_j ? grid.cols(j) : grid.rows(i);
    if (is_score_block(t)) {
      s.col0 = grid.col_begin(j);
      s.cols = grid.cols(j);
    } else {
      s.cols = is_stat(t) ? 1 : d_;
    }
    return s;
  }

private:
  void move(StepKind kind, Tensor t, std::int64_t i, std::int64_t j, int line) {
    Step s = tile(t, i, j);
    s.kind = kind;
    s.line = static_cast<std::uint8_t>(line);
    s.bytes = s.rows * s.cols * element_bytes(t, dtype_);
    s.cta = cta;
    sink_.on_step(s);
  }

  std::int64_t d_;
  Dtype dtype_;
  StepSink& sink_;
};

}  // namespace hbmlab
