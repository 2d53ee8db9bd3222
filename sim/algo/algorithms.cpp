// Step streams of standard attention, FlashAttention and FlashAttention-2 for one (batch, head).
// Comments name the paper's lines (shared/ALGORITHMS.md); DESIGN.md fixes what each line moves.
//
// [SECTION] Tiles and FLOP conventions
// [SECTION] standard (Algorithm 0)
// [SECTION] flash1 (FlashAttention, Algorithm 1)
// [SECTION] flash2 (FlashAttention-2, Algorithm 1)
#include "sim/algo/algorithms.hpp"

namespace hbmlab {
namespace {

// [SECTION] Tiles and FLOP conventions
//
// Non-matmul FLOPs count one operation per max, add, subtract, multiply, divide, exp or log on
// one element. Per score of S_ij: rowmax 1, subtract-and-exp 2, rowsum 1 (kScoreOps = 4).
constexpr std::int64_t kScoreOps = 4;
// Standard softmax per score: max, subtract, exp, sum, then divide by the sum.
constexpr std::int64_t kSoftmaxOps = 5;
// flash1 line 11 per row: m_new = max (1); two exponents of differences (4); ℓ_new (3).
constexpr std::int64_t kFlash1StatOps = 8;
// flash1 line 12 per element of O_i: ℓ_i·e^(m_i−m_new)·O_i (2), e^(m̃−m_new)·(P̃V) (1), add (1), ÷ℓ_new (1).
constexpr std::int64_t kFlash1RescaleOps = 5;
// flash2 line 9 per row: max with m_i (1), e^(m_i − m_i') (2), ℓ_i update multiply-add (2).
constexpr std::int64_t kFlash2StatOps = 5;

class Emitter {
public:
  Emitter(const AttentionProblem& p, Blocks b, StepSink& sink)
      : grid(p.seq_len, b, p.causal), d_(p.head_dim), elem_(p.elem_bytes()), sink_(sink) {}

  const BlockGrid grid;

  void load(Tensor t, std::int64_t i, std::int64_t j, int line) { move(StepKind::load, t, i, j, line); }
  void store(Tensor t, std::int64_t i, std::int64_t j, int line) { move(StepKind::store, t, i, j, line); }

  void compute(FlopKind kind, Tensor result, std::int64_t i, std::int64_t j, int line, std::int64_t flops,
               std::int64_t sram_read_elems = 0) {
    Step s = tile(result, i, j);
    s.kind = StepKind::compute;
    s.flop_kind = kind;
    s.line = static_cast<std::uint8_t>(line);
    s.flops = flops;
    s.sram_read_bytes = sram_read_elems * elem_;
    sink_.on_step(s);
  }

  void skip(std::int64_t i, std::int64_t j, int line) {
    Step s = tile(Tensor::S, i, j);
    s.kind = StepKind::skip;
    s.line = static_cast<std::uint8_t>(line);
    sink_.on_step(s);
  }

  std::int64_t d() const { return d_; }

private:
  // The rectangle a tensor's block occupies: Q, O, S, P and the statistics by row block i;
  // K and V by row block j; S and P by column block j.
  Step tile(Tensor t, std::int64_t i, std::int64_t j) const {
    Step s;
    s.tensor = t;
    s.i = static_cast<std::int32_t>(i);
    s.j = static_cast<std::int32_t>(j);
    const bool by_j = t == Tensor::K || t == Tensor::V;
    s.row0 = by_j ? grid.col_begin(j) : grid.row_begin(i);
    s.rows = by_j ? grid.cols(j) : grid.rows(i);
    if (t == Tensor::S || t == Tensor::P) {
      s.col0 = grid.col_begin(j);
      s.cols = grid.cols(j);
    } else {
      s.cols = is_stat(t) ? 1 : d_;
    }
    return s;
  }

  void move(StepKind kind, Tensor t, std::int64_t i, std::int64_t j, int line) {
    Step s = tile(t, i, j);
    s.kind = kind;
    s.line = static_cast<std::uint8_t>(line);
    s.bytes = s.rows * s.cols * (is_stat(t) ? kStatBytes : elem_);
    sink_.on_step(s);
  }

  std::int64_t d_, elem_;
  StepSink& sink_;
};

}  // namespace

// [SECTION] standard (Algorithm 0)
//
// The paper's model reads each of Q, K, V once (Θ(Nd + N²)), so K_j and V_j are loaded during
// the first row block only and later row blocks reuse them. Causal masking does not shrink it:
// S and P stay N × N.
void emit_standard(const AttentionProblem& p, Blocks b, StepSink& sink) {
  Emitter e(p, b, sink);
  const BlockGrid& g = e.grid;
  const std::int64_t d = e.d();
  for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 1: S = QKᵀ, written to HBM
    e.load(Tensor::Q, i, -1, 1);
    for (std::int64_t j = 0; j < g.Tc; ++j) {
      if (i == 0) e.load(Tensor::K, -1, j, 1);
      e.compute(FlopKind::matmul, Tensor::S, i, j, 1, 2 * g.rows(i) * g.cols(j) * d, (g.rows(i) + g.cols(j)) * d);
      e.store(Tensor::S, i, j, 1);
    }
  }
  for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 2: P = softmax(S), read and written through HBM
    for (std::int64_t j = 0; j < g.Tc; ++j) e.load(Tensor::S, i, j, 2);
    e.compute(FlopKind::non_matmul, Tensor::P, i, -1, 2, kSoftmaxOps * g.rows(i) * g.N);
    for (std::int64_t j = 0; j < g.Tc; ++j) e.store(Tensor::P, i, j, 2);
  }
  for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 3: O = PV
    for (std::int64_t j = 0; j < g.Tc; ++j) {
      e.load(Tensor::P, i, j, 3);
      if (i == 0) e.load(Tensor::V, -1, j, 3);
      e.compute(FlopKind::matmul, Tensor::O, i, j, 3, 2 * g.rows(i) * g.cols(j) * d,
                g.rows(i) * g.cols(j) + g.cols(j) * d);
    }
    e.store(Tensor::O, i, -1, 3);
  }
}

// [SECTION] flash1 (FlashAttention, Algorithm 1)
void emit_flash1(const AttentionProblem& p, Blocks b, StepSink& sink) {
  Emitter e(p, b, sink);
  const BlockGrid& g = e.grid;
  const std::int64_t d = e.d();
  for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 2: O ← 0, ℓ ← 0, m ← −∞ in HBM
    e.store(Tensor::O, i, -1, 2);
    e.store(Tensor::l, i, -1, 2);
    e.store(Tensor::m, i, -1, 2);
  }
  for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 5
    e.load(Tensor::K, -1, j, 6);             // line 6: load K_j, V_j
    e.load(Tensor::V, -1, j, 6);
    for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 7
      if (g.skipped(i, j)) {
        e.skip(i, j, 7);
        continue;
      }
      const std::int64_t r = g.rows(i), c = g.cols(j);
      e.load(Tensor::Q, i, -1, 8);  // line 8: load Q_i, O_i, ℓ_i, m_i
      e.load(Tensor::O, i, -1, 8);
      e.load(Tensor::l, i, -1, 8);
      e.load(Tensor::m, i, -1, 8);
      e.compute(FlopKind::matmul, Tensor::S, i, j, 9, 2 * r * c * d, (r + c) * d);  // line 9: S_ij = Q_i K_jᵀ
      e.compute(FlopKind::non_matmul, Tensor::P, i, j, 10, kScoreOps * r * c);       // line 10: m̃, P̃, ℓ̃
      e.compute(FlopKind::non_matmul, Tensor::m, i, -1, 11, kFlash1StatOps * r);     // line 11: m_new, ℓ_new
      e.compute(FlopKind::matmul, Tensor::O, i, j, 12, 2 * r * c * d, c * d);        // line 12: P̃_ij V_j
      e.compute(FlopKind::non_matmul, Tensor::O, i, -1, 12, kFlash1RescaleOps * r * d);
      e.store(Tensor::O, i, -1, 12);  // line 12: write O_i
      e.store(Tensor::l, i, -1, 13);  // line 13: write ℓ_i, m_i
      e.store(Tensor::m, i, -1, 13);
    }
  }
}

// [SECTION] flash2 (FlashAttention-2, Algorithm 1)
void emit_flash2(const AttentionProblem& p, Blocks b, StepSink& sink) {
  Emitter e(p, b, sink);
  const BlockGrid& g = e.grid;
  const std::int64_t d = e.d();
  for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 3: one CTA per Q_i
    const std::int64_t r = g.rows(i);
    e.load(Tensor::Q, i, -1, 4);  // line 4; line 5 initialises O_i, ℓ_i, m_i on chip
    for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 6
      if (g.skipped(i, j)) {
        e.skip(i, j, 6);
        continue;
      }
      const std::int64_t c = g.cols(j);
      e.load(Tensor::K, -1, j, 7);  // line 7: load K_j, V_j
      e.load(Tensor::V, -1, j, 7);
      e.compute(FlopKind::matmul, Tensor::S, i, j, 8, 2 * r * c * d, (r + c) * d);              // line 8
      e.compute(FlopKind::non_matmul, Tensor::P, i, j, 9, kScoreOps * r * c + kFlash2StatOps * r);  // line 9
      e.compute(FlopKind::non_matmul, Tensor::O, i, -1, 10, r * d);  // line 10: diag(e^(m_i − m_i'))·O_i
      e.compute(FlopKind::matmul, Tensor::O, i, j, 10, 2 * r * c * d, c * d);  // line 10: + P̃_ij V_j
    }
    e.compute(FlopKind::non_matmul, Tensor::O, i, -1, 12, r * d);  // line 12: O_i ← diag(ℓ_i)⁻¹ O_i
    e.compute(FlopKind::non_matmul, Tensor::lse, i, -1, 13, 2 * r);  // line 13: L_i = m_i + log ℓ_i
    e.store(Tensor::O, i, -1, 14);    // line 14
    e.store(Tensor::lse, i, -1, 15);  // line 15
  }
}

void emit_steps(Algo algo, const AttentionProblem& p, Blocks b, StepSink& sink) {
  switch (algo) {
    case Algo::standard: return emit_standard(p, b, sink);
    case Algo::flash1: return emit_flash1(p, b, sink);
    case Algo::flash2: return emit_flash2(p, b, sink);
  }
}

}  // namespace hbmlab
