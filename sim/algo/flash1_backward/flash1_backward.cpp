// flash1 backward: FlashAttention's backward pass, the FlashAttention paper's Algorithm 4 without
// dropout. K_j, V_j stay on chip with their accumulators dK̃_j, dṼ_j while every Q_i streams past;
// S_ij and P_ij are recomputed from the ℓ and m the forward kept, and dQ_i is read and written back
// on every inner step, so Q, O, dO and dQ are read Tc times: Θ(N²d²/M) accesses (Theorem 5).
// Run: hbmlab simulate --algo flash1 --pass backward
//
// [SECTION] Identity, blocks and SRAM
// [SECTION] Steps (lines 5 to 24)
// [SECTION] Closed form
// [SECTION] Numerics
// [SECTION] Launch plan: one CTA per (batch, head)
// [SECTION] The window
#include <fmt/format.h>

#include "sim/algo/emitter.hpp"
#include "sim/algo/tiled_room.hpp"
#include "sim/common/error.hpp"
#include "sim/common/units.hpp"
#include "sim/numerics/tiles.hpp"

namespace hbmlab {
namespace {

// Line 13 per score: subtract m_i, exponentiate, multiply by 1/ℓ_i. Line 20: subtract D_i, multiply.
constexpr std::int64_t kRecomputeOps = 3, kDsOps = 2;

bool column_kept(const BlockGrid& g, std::int64_t j) {
  for (std::int64_t i = 0; i < g.Tr; ++i)
    if (!g.skipped(i, j)) return true;
  return false;
}

class Flash1Backward final : public TiledBackward {
public:
  // [SECTION] Identity, blocks and SRAM

  std::string_view name() const override { return "flash1"; }
  std::string_view display_name() const override { return "flash1 backward"; }
  std::string_view paper_name() const override {
    return "FlashAttention backward (FlashAttention paper, Algorithm 4, no dropout)";
  }

  // More than the forward holds: K_j, V_j and the accumulators dK̃_j, dṼ_j (Bc×d each, line 8), and
  // Q_i, O_i, dO_i, dQ_i (Br×d each, line 10) in the problem dtype; ℓ_i, m_i (line 10) and D_i
  // (line 19) in fp32. S_ij, P_ij, dP_ij and dS_ij stay in registers.
  std::int64_t working_set_bytes(const AttentionProblem& p, Blocks b) const override {
    return p.elem_bytes() * (4 * b.Bc * p.head_dim + 4 * b.Br * p.head_dim) + kStatBytes * 3 * b.Br;
  }

  // [SECTION] Steps (lines 5 to 24)

  void emit(const AttentionProblem& p, Blocks b, StepSink& sink) const override {
    Emitter e(p, b, sink);
    const BlockGrid& g = e.grid;
    const std::int64_t d = e.d();
    for (std::int64_t i = 0; i < g.Tr; ++i) e.store(Tensor::dQ, i, -1, 5);  // line 5: dQ ← 0 in HBM
    for (std::int64_t j = 0; j < g.Tc; ++j) {                                // line 5: dK, dV ← 0 in HBM
      e.store(Tensor::dK, -1, j, 5);
      e.store(Tensor::dV, -1, j, 5);
    }
    for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 6
      if (column_kept(g, j)) {                 // a column the block mask empties is never loaded
        e.load(Tensor::K, -1, j, 7);           // line 7: load K_j, V_j; line 8: dK̃_j, dṼ_j ← 0 on chip
        e.load(Tensor::V, -1, j, 7);
      }
      const std::int64_t c = g.cols(j);
      for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 9
        if (g.skipped(i, j)) {
          e.skip(i, j, 9);
          continue;
        }
        const std::int64_t r = g.rows(i);
        for (Tensor t : {Tensor::Q, Tensor::O, Tensor::dO, Tensor::dQ, Tensor::l, Tensor::m})
          e.load(t, i, -1, 10);  // line 10: load Q_i, O_i, dO_i, dQ_i, ℓ_i, m_i
        e.compute(FlopKind::matmul, Tensor::S, i, j, 11, 2 * r * c * d, (r + c) * d);  // line 11: S_ij = τQ_i K_jᵀ
        e.compute(FlopKind::non_matmul, Tensor::P, i, j, 13, kRecomputeOps * r * c);    // line 13: P_ij
        e.compute(FlopKind::matmul, Tensor::dV, i, j, 16, 2 * r * c * d, r * d);        // line 16: dṼ_j += P_ijᵀ dO_i
        e.compute(FlopKind::matmul, Tensor::dP, i, j, 17, 2 * r * c * d, (r + c) * d);  // line 17: dP_ij = dO_i V_jᵀ
        e.compute(FlopKind::non_matmul, Tensor::D, i, -1, 19, 2 * r * d);              // line 19: D_i
        e.compute(FlopKind::non_matmul, Tensor::dS, i, j, 20, kDsOps * r * c);          // line 20: dS_ij
        e.compute(FlopKind::matmul, Tensor::dQ, i, j, 21, 2 * r * c * d, c * d);        // line 21: dQ_i += τdS_ij K_j
        e.store(Tensor::dQ, i, -1, 21);                                                 //          written to HBM
        e.compute(FlopKind::matmul, Tensor::dK, i, j, 22, 2 * r * c * d, r * d);        // line 22: dK̃_j += τdS_ijᵀ Q_i
      }
      e.store(Tensor::dK, -1, j, 24);  // line 24: write dK_j ← dK̃_j, dV_j ← dṼ_j
      e.store(Tensor::dV, -1, j, 24);
    }
  }

  std::string narrate(const Step& s) const override { return narrate_backward(s, 5, 8, "dK̃", "dṼ"); }

  // [SECTION] Closed form
  //
  // docs/design.md#backward: writes dQ, dK, dV = 0 (N·d each); K, V read N·d; per visited pair, Q, O,
  // dO and dQ read and dQ written (Tc·N·d without a mask), ℓ and m read (Tc·N); dK, dV written once
  // more at line 24. Causal: each row block visits the blocks up to the diagonal (from its position);
  // a block mask: the kept pairs, and K_j, V_j only for a column with one.
  Counts closed_form(const AttentionProblem& p, Blocks b) const override {
    const std::int64_t N = p.seq_len, d = p.head_dim, e = p.elem_bytes();
    const Visits v = visits(BlockGrid(p, b));
    const std::int64_t visited_rows = v.rows, kv_rows = v.kv_rows;
    Counts c;
    c.matmul_flops = 10 * v.scores * d;  // five matmuls per kept pair
    add_traffic(c, Tensor::K, kv_rows * d, 0, e);
    add_traffic(c, Tensor::V, kv_rows * d, 0, e);
    for (Tensor t : {Tensor::Q, Tensor::O, Tensor::dO}) add_traffic(c, t, visited_rows * d, 0, e);
    add_traffic(c, Tensor::dQ, visited_rows * d, N * d + visited_rows * d, e);
    add_traffic(c, Tensor::l, visited_rows, 0, kStatBytes);
    add_traffic(c, Tensor::m, visited_rows, 0, kStatBytes);
    add_traffic(c, Tensor::dK, 0, 2 * N * d, e);
    add_traffic(c, Tensor::dV, 0, 2 * N * d, e);
    return c;
  }

  // [SECTION] Numerics

  TiledResult run_tiled(Precision precision, const Inputs& in, const BlockGrid& g,
                        const TiledOptions& options) const override {
    return tiled::in_precision(precision, [&](auto zero) {
      using T = decltype(zero);
      const tiled::Tiles<T> t(in);
      const std::vector<std::int64_t> rows = tiled::rows_to_compute(in, options);
      const tiled::ForwardRows<T> hbm_fwd = tiled::forward_rows(t, rows, g);  // O, ℓ, m from the forward
      tiled::GradientTiles<T> hbm(t);                                                // line 5: dQ, dK, dV ← 0
      const auto by_block = tiled::rows_by_block(g, rows);
      std::vector<T> P_row;
      for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 6; dK̃_j, dṼ_j accumulate in hbm.dK, hbm.dV's rows of
        const std::int64_t c0 = g.col_begin(j);  // block j, which only this j touches (written at line 24)
        for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 9
          if (g.skipped(i, j)) continue;
          for (std::int64_t q : by_block[i]) {
            t.scores(q, c0, g.cols(j), g.causal, P_row);  // line 11: S_ij = τQ_i K_jᵀ (masked: −∞)
            const T m_q = hbm_fwd.m[q], l_q = hbm_fwd.l[q];
            for (T& x : P_row) x = l_q > 0 ? tiled::exp_diff(x, m_q) / l_q : T(0);  // line 13
            hbm.add_block(t, q, c0, P_row, tiled::rowsum_dO_O(t, hbm_fwd, q));      // lines 16 to 22
          }
        }
      }
      TiledResult result = tiled::empty_result(in);
      for (std::int64_t q : rows)
        for (std::int64_t x = 0; x < t.d; ++x) result.O(q, x) = double(hbm_fwd.O[q * t.d + x]);
      result.grads = hbm.to_matrices(t);
      return result;
    });
  }

  // [SECTION] Launch plan: one CTA per (batch, head)
  //
  // As Algorithm 4 is printed: one CTA walks the whole K/V outer loop, running the room's own step
  // stream (streamed, as the forward's), so with the L2 off the engine moves what the core counts.
  std::vector<KernelPlan> plan_kernels(const AttentionProblem& p, Blocks b, const GpuSpec& gpu,
                                       const EngineOptions& options) const override {
    if (options.launch.hbmlab_kernels) fail_input("--hbmlab-kernels: hbmlab has no CUDA kernel for {}", display_name());
    KernelPlan plan = tiled_plan(p, b, "flash1 backward",
                                 "no overlap inside a CTA: Algorithm 4 loads Q_i, O_i, dO_i, dQ_i, ℓ_i, m_i, computes, "
                                 "then writes dQ_i (lines 10 to 22); CTAs sharing an SM overlap one another",
                                 false);
    const BlockGrid g(p, b);
    PlanBuilder builder(plan, p, g.Tc, gpu.l2_sector_bytes);
    builder.begin_program();
    emit(p, b, builder);
    apply_launch(plan, options.launch);
    return {std::move(plan)};
  }

  std::int64_t roofline_ctas_per_instance(const BlockGrid&) const override { return 1; }

  std::optional<ForwardState> forward_state(const AttentionProblem& p) const override {
    return kept_by_forward(p, "O, ℓ, m", 2);
  }

  // [SECTION] The window

  const WindowTraits& window() const override {
    static const WindowTraits traits{
        .label = "flash1 backward (Alg. 4)",
        .colour = {60, 120, 200},
        .partner = "flash2",
        .running_softmax = false,
        .row_softmax_line = 13,
        .softmax_note = "The backward keeps no running max: line 13 recomputes P_ij = diag(ℓ_i)⁻¹exp(S_ij − m_i) "
                        "from the final ℓ and m that the forward left in HBM, the row's exact statistics.",
        .visit_order = "visit order: down each column (K_j, V_j outer; Q_i inner), as the forward",
        .sram_note = kRecomputeNote,
        .ready_note = kReadyNote,
    };
    return traits;
  }

  void on_chip(const Step& s, const Step*, const AttentionProblem&, Sram& sram) const override {
    if (s.kind == StepKind::load || s.kind == StepKind::store) sram.put(Tile::of(s));
    if (s.kind == StepKind::load && s.tensor == Tensor::V)  // line 8: dK̃_j, dṼ_j ← 0 beside K_j, V_j
      for (Tensor t : {Tensor::dK, Tensor::dV}) sram.put({t, -1, s.j, s.row0, s.rows, 0, s.cols, s.bytes});
    if (s.kind == StepKind::compute && s.tensor == Tensor::D)  // line 19: D_i on chip
      sram.put({Tensor::D, s.i, -1, s.row0, s.rows, 0, 1, s.rows * kStatBytes});
  }

protected:
  std::string compute_text(const Step& s) const override {
    const int i = s.i + 1, j = s.j + 1;
    switch (s.line) {
      case 11: return fmt::format("S_{},{} = τQ_{} K_{}ᵀ on chip (recomputed, masked)", i, j, i, j);
      case 13: return fmt::format("P_{0},{1} = diag(ℓ_{0})⁻¹exp(S_{0},{1} − m_{0}) on chip", i, j);
      case 16: return fmt::format("dṼ_{} += P_{},{}ᵀ dO_{} on chip", j, i, j, i);
      case 17: return fmt::format("dP_{},{} = dO_{} V_{}ᵀ on chip", i, j, i, j);
      case 19: return fmt::format("D_{0} = rowsum(dO_{0} ∘ O_{0}) on chip", i);
      case 20: return fmt::format("dS_{0},{1} = P_{0},{1} ∘ (dP_{0},{1} − D_{0}) on chip", i, j);
      case 21: return fmt::format("dQ_{0} ← dQ_{0} + τdS_{0},{1} K_{1}", i, j);
      default: return fmt::format("dK̃_{} += τdS_{},{}ᵀ Q_{} on chip", j, i, j, i);
    }
  }
};

}  // namespace

const Algorithm& flash1_backward_room() {
  static const Flash1Backward room;
  return room;
}

}  // namespace hbmlab
