// flash1: FlashAttention, the FlashAttention paper's Algorithm 1 as printed. K/V blocks in the
// outer loop, Q blocks inside; O, ℓ and m live in HBM and are read and written back on every inner
// step, so Q and O are read Tc times. S and P never leave the chip: Θ(N²d²/M) accesses.
// Run: hbmlab simulate --algo flash1
//
// [SECTION] Identity and blocks
// [SECTION] Steps (lines 2 to 13)
// [SECTION] Closed form
// [SECTION] Numerics
// [SECTION] Launch plan: one CTA per (batch, head)
// [SECTION] The window
#include <algorithm>

#include <fmt/format.h>

#include "sim/algo/emitter.hpp"
#include "sim/algo/tiled_room.hpp"
#include "sim/common/units.hpp"
#include "sim/numerics/tiles.hpp"

namespace hbmlab {
namespace {

// Some row block keeps the pair (i, j) of column j: its K_j, V_j are loaded (line 6).
bool column_kept(const BlockGrid& g, std::int64_t j) {
  for (std::int64_t i = 0; i < g.Tr; ++i)
    if (!g.skipped(i, j)) return true;
  return false;
}

// Line 11 per row: m_new = max (1); two exponents of differences (4); ℓ_new (3).
constexpr std::int64_t kStatOps = 8;
// Line 12 per element of O_i: ℓ_i·e^(m_i−m_new)·O_i (2), e^(m̃−m_new)·(P̃V) (1), add (1), ÷ℓ_new (1).
constexpr std::int64_t kRescaleOps = 5;

class Flash1 final : public TiledAttention {
public:
  // [SECTION] Identity and blocks

  std::string_view name() const override { return "flash1"; }
  std::string_view paper_name() const override { return "FlashAttention (FlashAttention paper, Algorithm 1)"; }

  // Line 1: Bc = ⌈M/(4d)⌉, Br = min(⌈M/(4d)⌉, d), clamped to N.
  Blocks paper_blocks(std::int64_t M, std::int64_t d, std::int64_t N) const override {
    const PaperRule r = paper_rule(M, d, N);
    return {r.small, r.big};
  }

  // [SECTION] Steps (lines 2 to 13)

  void emit(const AttentionProblem& p, Blocks b, StepSink& sink) const override {
    Emitter e(p, b, sink);
    const BlockGrid& g = e.grid;
    const std::int64_t d = e.d();
    for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 2: O ← 0, ℓ ← 0, m ← −∞ in HBM
      e.store(Tensor::O, i, -1, 2);
      e.store(Tensor::l, i, -1, 2);
      e.store(Tensor::m, i, -1, 2);
    }
    for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 5
      if (column_kept(g, j)) {                 // a column the block mask empties is never loaded
        e.load(Tensor::K, -1, j, 6);           // line 6: load K_j, V_j
        e.load(Tensor::V, -1, j, 6);
      }
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
        e.compute(FlopKind::non_matmul, Tensor::m, i, -1, 11, kStatOps * r);           // line 11: m_new, ℓ_new
        e.compute(FlopKind::matmul, Tensor::O, i, j, 12, 2 * r * c * d, c * d);        // line 12: P̃_ij V_j
        e.compute(FlopKind::non_matmul, Tensor::O, i, -1, 12, kRescaleOps * r * d);
        e.store(Tensor::O, i, -1, 12);  // line 12: write O_i
        e.store(Tensor::l, i, -1, 13);  // line 13: write ℓ_i, m_i
        e.store(Tensor::m, i, -1, 13);
      }
    }
  }

  std::string narrate(const Step& s) const override {
    if (s.kind == StepKind::store && s.line == 2)
      return fmt::format("line 2: initialise {} ← {} in HBM ({})", block_name(s), s.tensor == Tensor::m ? "−∞" : "0",
                         format_bytes(static_cast<double>(s.bytes)));
    return TiledAttention::narrate(s);
  }

  // [SECTION] Closed form
  //
  // Not causal: Q and O read Tc·NQ·d, ℓ and m read Tc·NQ, O written (1 + Tc)·NQ·d, ℓ and m
  // (1 + Tc)·NQ; K and V read N·d. Causal: each row block i counts only the blocks it visits (from
  // the diagonal's position). A block mask: each kept pair counts, and K_j, V_j are read only for a
  // column with a kept pair (docs/design.md#block-sparse).
  Counts closed_form(const AttentionProblem& p, Blocks b) const override {
    const std::int64_t d = p.head_dim, e = p.elem_bytes(), Nq = p.Nq();
    const Visits v = visits(BlockGrid(p, b));
    const std::int64_t visited_rows = v.rows, kv_rows = v.kv_rows;
    Counts c;
    c.matmul_flops = 4 * v.scores * d;  // S_ij = Q_i K_jᵀ and P̃_ij V_j
    add_traffic(c, Tensor::K, kv_rows * d, 0, e);
    add_traffic(c, Tensor::V, kv_rows * d, 0, e);
    add_traffic(c, Tensor::Q, visited_rows * d, 0, e);
    add_traffic(c, Tensor::O, visited_rows * d, Nq * d + visited_rows * d, e);
    add_traffic(c, Tensor::l, visited_rows, Nq + visited_rows, kStatBytes);
    add_traffic(c, Tensor::m, visited_rows, Nq + visited_rows, kStatBytes);
    return c;
  }

  // Per kept pair: e^x per score and e^(m_i − m_new), e^(m̃ − m_new) per row (lines 10–11); O_i
  // rescaled (line 12); one max update per row.
  NonMatmulOps non_matmul_ops(const AttentionProblem& p, Blocks b) const override {
    const Visits v = visits(grid(p, b));
    return {v.scores + 2 * v.rows, v.rows * p.head_dim, v.rows, 1,
            "O_i, ℓ_i, m_i go back to HBM after every K/V block and are rescaled when read again"};
  }

  // [SECTION] Numerics

  TiledResult run_tiled(Precision precision, const Inputs& in, const BlockGrid& g,
                        const TiledOptions& options) const override {
    return tiled::in_precision(precision, [&](auto zero) {
      using T = decltype(zero);
      const tiled::Tiles<T> t(in);
      const std::int64_t d = t.d;
      const std::vector<std::int64_t> rows = tiled::rows_to_compute(in, options);
      TiledResult result = tiled::empty_result(in);
      // line 2: O ← 0, ℓ ← 0, m ← −∞ "in HBM"
      std::vector<T> hbm_O(static_cast<std::size_t>(g.Nq * d), T(0)), hbm_l(g.Nq, T(0)),
          hbm_m(g.Nq, -std::numeric_limits<T>::infinity());
      const auto by_block = tiled::rows_by_block(g, rows);
      std::vector<T> S_row, pv(static_cast<std::size_t>(d));
      for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 5
        const std::int64_t c0 = g.col_begin(j), c = g.cols(j);
        for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 7
          if (g.skipped(i, j)) continue;
          for (std::int64_t q : by_block[i]) {
            t.scores(q, c0, c, g.causal, S_row);  // line 9: S_ij = Q_i K_jᵀ
            T m_tilde = -std::numeric_limits<T>::infinity();  // line 10: m̃, P̃, ℓ̃
            for (T x : S_row) m_tilde = std::max(m_tilde, x);
            T l_tilde = 0;
            for (T& x : S_row) l_tilde += (x = tiled::exp_diff(x, m_tilde));
            const T m_i = hbm_m[q], l_i = hbm_l[q];  // line 11
            const T m_new = std::max(m_i, m_tilde);
            const T a = tiled::exp_diff(m_i, m_new), b = tiled::exp_diff(m_tilde, m_new);
            const T l_new = a * l_i + b * l_tilde;
            std::fill(pv.begin(), pv.end(), T(0));  // line 12
            t.add_pv(S_row, c0, pv);
            T* O_i = &hbm_O[q * d];
            if (l_new > 0)
              for (std::int64_t x = 0; x < d; ++x) O_i[x] = (l_i * a * O_i[x] + b * pv[x]) / l_new;
            hbm_l[q] = l_new;  // line 13
            hbm_m[q] = m_new;
            if (options.watch_row && q == *options.watch_row)
              result.watch.push_back({j, double(m_i), double(m_new), double(l_i), double(l_new), double(a),
                                      std::vector<double>(O_i, O_i + d), -1, false, {}});
          }
        }
      }
      for (std::int64_t q : rows)
        for (std::int64_t x = 0; x < d; ++x) result.O(q, x) = hbm_O[q * d + x];
      return result;
    });
  }

  // [SECTION] Launch plan: one CTA per (batch, head)
  //
  // The CTA runs the room's own step stream, so with the L2 off the engine moves what the core
  // counts; streamed, since a 64K-token problem has millions of steps.
  std::vector<KernelPlan> plan_kernels(const AttentionProblem& p, Blocks b, const GpuSpec& gpu,
                                       const EngineOptions& options) const override {
    KernelPlan plan = tiled_plan(p, b, "flash1 forward",
                                 "no overlap inside a CTA: Algorithm 1 loads Q_i, O_i, ℓ_i, m_i, computes, then writes "
                                 "O_i, ℓ_i, m_i (line 8 to 13); CTAs sharing an SM overlap one another",
                                 false);
    const BlockGrid g(p, b);
    PlanBuilder builder(plan, p, g.Tc, gpu.l2_sector_bytes);
    builder.begin_program();  // the K/V outer loop stays in one CTA
    emit(p, b, builder);
    apply_launch(plan, options.launch);
    if (options.launch.hbmlab_kernels) {
      // gpu/flash1.cu: S_ij and P̃_ij V_j as fp32 FMAs, each reading one operand of each side from
      // shared memory (8 bytes per FMA, 4 per FLOP: one broadcast, one conflict-free row); Q_i, O_i
      // come in 2-byte elements, two per operand in flight per thread (the compiler unrolls the load
      // loop once), so a CTA keeps threads × 8 bytes in flight.
      constexpr std::int64_t kSramBytesPerMatmulFlop = 4, kLoadBytesPerThread = 8;
      plan.matmul_on_fp32_units = true;
      // Its launch, where a record does not give it: 256 threads, and shared memory for K_j (rows
      // padded to d + 1), V_j, Q_i, O_i and S_ij in fp32 with ℓ_i, m_i and the two rescaling factors
      // (where a CTA of this run can have that much: --sram-bytes, else the GPU's).
      const std::int64_t d = p.head_dim;
      const std::int64_t kernel_smem = 4 * (b.Bc * (d + 1) + b.Bc * d + 2 * b.Br * d + b.Br * b.Bc + 4 * b.Br);
      if (!options.launch.threads_per_cta) plan.threads_per_cta = Flash1Layout::kThreads;
      if (!options.launch.smem_bytes_per_cta && kernel_smem <= options.sram_bytes_per_block_of(gpu))
        plan.smem_bytes_per_cta = kernel_smem;
      plan.bytes_in_flight_per_cta = plan.threads_per_cta * kLoadBytesPerThread;
      plan.overlap += "; Q_i, O_i load a few 2-byte elements per thread at a time";
      // Its products are bound by the shared-memory wavefronts its one CTA's 8 warps keep in flight,
      // at the share the preset gives (fp32_matmul_sram_share_per_cta, measured by
      // gpu/bench/smem_warps.cu); then its softmax, barriers and loads; CTAs sharing an SM run in
      // step (docs/design.md, "flash1's step taken apart").
      plan.sram_bound_work = true;
      plan.ctas_in_step = true;
      for (CtaPhase& ph : plan.phases) ph.sram_bytes += kSramBytesPerMatmulFlop * ph.matmul_flops;
      // Its warp layout, for the shapes it runs: self-attention, no block mask, Bc a multiple of 32.
      if (p.Nq() == p.seq_len && !p.block_mask && b.Bc % 32 == 0)
        plan.on_chip = flash1_kernel(plan, {.N = p.seq_len, .Br = b.Br, .Bc = b.Bc, .d = p.head_dim, .causal = p.causal});
    } else if (p.elem_bytes() == 2 && p.head_dim % 16 == 0 && plan.threads_per_cta >= 32 &&
               plan.threads_per_cta % 32 == 0) {
      // The FlashAttention paper's kernel: its warps split K_j, V_j and sum their partials through
      // shared memory (FlashAttention-2 paper, §3.3).
      plan.on_chip = flash1_warp_kernel(plan, p, b, {.d = p.head_dim, .warps = plan.threads_per_cta / 32});
    }
    return {std::move(plan)};
  }

  std::int64_t roofline_ctas_per_instance(const BlockGrid&) const override { return 1; }
  std::span<const KernelTile> hbmlab_kernel_tiles() const override { return kernel_tiles::flash1; }  // gpu/flash1.cu
  // NQ < N: the queries are the last NQ positions. HKV < H: each query head reads its K/V head itself.
  ShapeSupport supports() const override { return {.query_len = true, .kv_heads = true, .block_mask = true}; }

  // [SECTION] The window

  const WindowTraits& window() const override {
    static const WindowTraits traits{
        .label = "flash1 (Alg. 1)",
        .colour = {90, 170, 250},
        .partner = "flash2",
        .visit_order = "visit order: down each column (K_j, V_j outer; Q_i inner)",
        .sram_note = kRegistersNote,
    };
    return traits;
  }

  void on_chip(const Step& s, const Step*, const AttentionProblem&, Sram& sram) const override {
    if (s.kind == StepKind::load || s.kind == StepKind::store) sram.put(Tile::of(s));
  }

protected:
  std::string compute_text(const Step& s) const override {
    const int i = s.i + 1, j = s.j + 1;
    switch (s.line) {
      case 9: return fmt::format("S_{},{} = Q_{} K_{}ᵀ on chip", i, j, i, j);
      case 10: return fmt::format("m̃ = rowmax(S_{0},{1}), P̃ = exp(S_{0},{1} − m̃), ℓ̃ = rowsum(P̃)", i, j);
      case 11: return "m_new = max(m_i, m̃), ℓ_new = e^(m_i − m_new)·ℓ_i + e^(m̃ − m_new)·ℓ̃";
      default:
        return s.flop_kind == FlopKind::matmul
                   ? fmt::format("P̃_{},{} V_{} on chip", i, j, j)
                   : fmt::format("rescale: O_{} ← diag(ℓ_new)⁻¹(diag(ℓ_i)e^(m_i − m_new)O_i + e^(m̃ − m_new)P̃V)", i);
    }
  }
};

}  // namespace

const Algorithm& flash1_room() {
  static const Flash1 room;
  return room;
}

}  // namespace hbmlab
