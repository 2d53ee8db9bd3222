// What the tiled (FlashAttention) rooms share: the SRAM working set of one CTA, the bound
// Θ(N²d²/M) and its exponents (and 1 in a block mask's density s), and the caption under the SRAM
// box; and what their backward passes share (TiledBackward).
#pragma once

#include <algorithm>

#include <fmt/format.h>

#include "sim/algo/algorithm.hpp"
#include "sim/common/units.hpp"

namespace hbmlab {

class TiledAttention : public Algorithm {
public:
  // Q_i, O_i (Br×d) and K_j, V_j (Bc×d) in the problem dtype and ℓ_i, m_i (Br) in fp32; S_ij and
  // P̃_ij stay in registers, as FlashAttention's kernels keep them.
  std::int64_t working_set_bytes(const AttentionProblem& p, Blocks b) const override {
    return p.elem_bytes() * (2 * b.Br * p.head_dim + 2 * b.Bc * p.head_dim) + kStatBytes * 2 * b.Br;
  }

  Bound bound(const AttentionProblem& p, std::int64_t M) const override { return tiled_bound(p, M); }

  double expected_exponent(SweepAxis axis) const override {
    switch (axis) {
      case SweepAxis::N: return 2.0;
      case SweepAxis::d: return 2.0;
      case SweepAxis::M: return -1.0;
      case SweepAxis::s: return 1.0;  // Proposition 4: the N²d²s/M term, where it dominates Nd
    }
    return 0;
  }

protected:
  // The block pairs a grid keeps, summed: what the closed forms and the non-matmul work of the tiled
  // rooms are made of. Without a block mask each row block keeps a prefix of the K/V blocks (all of
  // them, or up to the causal diagonal: visited_blocks); with one, pair by pair.
  struct Visits {
    std::int64_t scores = 0;   // Σ rows(i)·cols(j): the S_ij entries computed (a matmul is 2·d FLOPs each)
    std::int64_t rows = 0;     // Σ rows(i): each kept pair reads its Q_i (Tc·NQ with nothing skipped)
    std::int64_t keys = 0;     // Σ cols(j): each kept pair reads its K_j, V_j (Tr·N with nothing skipped)
    std::int64_t kv_rows = 0;  // Σ cols(j) over the columns with a kept pair: K_j, V_j read once per column
  };
  static Visits visits(const BlockGrid& g) {
    Visits v;
    if (!g.mask) {
      for (std::int64_t i = 0; i < g.Tr; ++i) {
        const std::int64_t blocks = visited_blocks(g, i), keys = std::min(g.N, blocks * g.Bc);
        v.scores += g.rows(i) * keys;
        v.rows += blocks * g.rows(i);
        v.keys += keys;
      }
      v.kv_rows = g.N;
      return v;
    }
    for (std::int64_t j = 0; j < g.Tc; ++j) {
      bool any = false;
      for (std::int64_t i = 0; i < g.Tr; ++i)
        if (!g.skipped(i, j)) {
          any = true;
          v.scores += g.rows(i) * g.cols(j);
          v.rows += g.rows(i);
          v.keys += g.cols(j);
        }
      if (any) v.kv_rows += g.cols(j);
    }
    return v;
  }

  // The launch every tiled room starts its plan from: one program per instance (B·H here; B·HKV for a
  // GQA-packed room, which sets its own), shared memory = the SRAM working set, and the g = H/HKV query
  // heads of a K/V head next to one another so that the L2 may catch a K/V head read again.
  KernelPlan tiled_plan(const AttentionProblem& p, Blocks b, std::string name, std::string overlap,
                        bool double_buffered) const {
    KernelPlan plan;
    plan.name = std::move(name);
    plan.overlap = std::move(overlap);
    plan.double_buffered = double_buffered;
    plan.instances = p.instances();
    plan.kv_group = p.heads / p.Hkv();
    plan.smem_bytes_per_cta = working_set_bytes(p, b);
    return plan;
  }

  static constexpr std::string_view kRegistersNote = "S_ij and P̃_ij stay in registers: never written to HBM.";
};

// The backward of a tiled room (FlashAttention paper, Algorithm 4; FlashAttention-2 paper,
// Algorithm 2): K_j, V_j stay on chip with their gradient accumulators while the Q_i stream past,
// and S_ij, P_ij, dP_ij, dS_ij are recomputed on chip, never stored. Theorem 5: Θ(N²d²/M) accesses,
// the same bound and exponents as the forward.
class TiledBackward : public TiledAttention {
public:
  Pass pass() const override { return Pass::backward; }

  // Algorithm 4 line 2 prints the forward's rule, Bc = ⌈M/(4d)⌉, Br = min(Bc, d). But the backward
  // holds eight B × d tiles where the forward holds four (K_j, V_j, dK_j, dV_j against Q_i, O_i,
  // dO_i, dQ_i), so that rule asks for up to 2M elements. Halving Bc keeps the backward within M as
  // the forward's rule keeps the forward: Bc = ⌈M/(8d)⌉, Br = min(Bc, d), clamped to N. Theorem 5
  // needs only Bc = Θ(M/d), so the exponents stay those of the bound.
  Blocks paper_blocks(std::int64_t M, std::int64_t d, std::int64_t N) const override {
    const PaperRule r = paper_rule(M, d, N, 8);
    return {r.small, r.big};
  }

  ShapeSupport supports() const override { return {.block_mask = true}; }

protected:
  static constexpr std::string_view kRecomputeNote =
      "S_ij, P_ij, dP_ij and dS_ij are recomputed in registers: never written to HBM.";
  static constexpr std::string_view kReadyNote =
      "ready: Q, K, V, O, dO and the forward's row statistics are in HBM; nothing has moved yet";

  // What the tiled backward rooms add to the shared narration: the gradient set to zero in HBM (a store
  // at `zero_line`) and, with each V_j load, the on-chip accumulators of dK_j and dV_j set to zero at
  // `accumulator_line` (named as the paper prints them: dK̃, dṼ in Algorithm 4).
  std::string narrate_backward(const Step& s, int zero_line, int accumulator_line, std::string_view dK,
                               std::string_view dV) const {
    if (s.kind == StepKind::store && s.line == zero_line)
      return fmt::format("line {}: initialise {} ← 0 in HBM ({})", zero_line, block_name(s),
                         format_bytes(static_cast<double>(s.bytes)));
    if (s.kind == StepKind::load && s.tensor == Tensor::V)
      return TiledAttention::narrate(s) + fmt::format("; line {}: {}_{}, {}_{} ← 0 on chip", accumulator_line, dK, s.j + 1, dV, s.j + 1);
    return TiledAttention::narrate(s);
  }

  // One (batch, head)'s O and its statistics (fp32, `stats` values per row) that the forward keeps.
  static ForwardState kept_by_forward(const AttentionProblem& p, std::string_view tensors, std::int64_t stats) {
    const std::int64_t O_bytes = p.Nq() * p.head_dim * p.elem_bytes(), stat_bytes = stats * p.Nq() * kStatBytes;
    return {tensors, O_bytes + stat_bytes, stat_bytes};
  }
};

}  // namespace hbmlab
