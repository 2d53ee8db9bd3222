// flash2: FlashAttention-2, the FlashAttention-2 paper's Algorithm 1. The loops swap: each Q_i
// (one CTA) stays on chip while K_j, V_j stream past, O_i, ℓ_i, m_i stay in registers and O_i is
// rescaled once at the end; K and V are read Tr times, O written once.
// Run: hbmlab simulate --algo flash2
//
// [SECTION] Identity and blocks
// [SECTION] Steps (lines 3 to 15)
// [SECTION] Closed form
// [SECTION] Numerics
// [SECTION] Launch plan: one CTA per Q_i
// [SECTION] The window
#include <algorithm>

#include <fmt/format.h>

#include "sim/algo/emitter.hpp"
#include "sim/algo/tiled_room.hpp"
#include "sim/numerics/tiles.hpp"

namespace hbmlab {
namespace {

// Line 9 per row: max with m_i (1), e^(m_i − m_i') (2), ℓ_i update multiply-add (2).
constexpr std::int64_t kStatOps = 5;

// The steps of one CTA at a time, regrouped into the plan's phases: the prologue (line 4), one
// segment per unskipped K_j (lines 7 to 10) and the epilogue (lines 12 to 15), so that the K/V
// order can be reversed as FlashAttention-2's kernel visits it. Only one CTA's steps are kept.
class Programs final : public StepSink {
public:
  Programs(PlanBuilder& builder, bool kv_descending) : builder_(builder), kv_descending_(kv_descending) {}
  void on_step(const Step& s) override {
    if (s.kind == StepKind::skip) return;
    if (s.kind == StepKind::load && s.tensor == Tensor::Q) {
      finish();
      prologue_.push_back(s);
    } else if (s.line >= 12) {
      epilogue_.push_back(s);
    } else if (s.kind == StepKind::load && s.tensor == Tensor::K) {
      segments_.push_back({s});
    } else {
      segments_.back().push_back(s);
    }
  }
  // Builds the CTA of the Q_i seen so far, if any.
  void finish() {
    if (prologue_.empty()) return;
    if (kv_descending_) std::reverse(segments_.begin(), segments_.end());
    builder_.begin_program();
    builder_.begin_phase();
    for (const Step& s : prologue_) builder_.access(s, s.bytes);
    for (std::size_t n = 0; n < segments_.size(); ++n) {
      if (n > 0) builder_.begin_phase();
      for (const Step& s : segments_[n]) work(s);
    }
    for (const Step& s : epilogue_) work(s);
    prologue_.clear();
    segments_.clear();
    epilogue_.clear();
  }

private:
  void work(const Step& s) {
    if (s.kind == StepKind::compute) builder_.compute(s);
    else builder_.access(s, s.bytes);
  }
  PlanBuilder& builder_;
  bool kv_descending_;
  std::vector<Step> prologue_, epilogue_;
  std::vector<std::vector<Step>> segments_;
};

class Flash2 final : public TiledAttention {
public:
  // [SECTION] Identity and blocks

  std::string_view name() const override { return "flash2"; }
  std::string_view paper_name() const override { return "FlashAttention-2 (FlashAttention-2 paper, Algorithm 1)"; }

  // flash2 keeps Q_i resident across its inner loop, so the paper's roles swap: Br = ⌈M/(4d)⌉,
  // Bc = min(Br, d), clamped to N. With the literal rule its K/V traffic would not fall as SRAM grows.
  Blocks paper_blocks(std::int64_t M, std::int64_t d, std::int64_t N) const override {
    const PaperRule r = paper_rule(M, d, N);
    return {r.big, r.small};
  }

  // [SECTION] Steps (lines 3 to 15)

  void emit(const AttentionProblem& p, Blocks b, StepSink& sink) const override {
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
        e.compute(FlopKind::matmul, Tensor::S, i, j, 8, 2 * r * c * d, (r + c) * d);             // line 8
        e.compute(FlopKind::non_matmul, Tensor::P, i, j, 9, kScoreOps * r * c + kStatOps * r);  // line 9
        e.compute(FlopKind::non_matmul, Tensor::O, i, -1, 10, r * d);  // line 10: diag(e^(m_i − m_i'))·O_i
        e.compute(FlopKind::matmul, Tensor::O, i, j, 10, 2 * r * c * d, c * d);  // line 10: + P̃_ij V_j
      }
      e.compute(FlopKind::non_matmul, Tensor::O, i, -1, 12, r * d);    // line 12: O_i ← diag(ℓ_i)⁻¹ O_i
      e.compute(FlopKind::non_matmul, Tensor::lse, i, -1, 13, 2 * r);  // line 13: L_i = m_i + log ℓ_i
      e.store(Tensor::O, i, -1, 14);    // line 14
      e.store(Tensor::lse, i, -1, 15);  // line 15
    }
  }

  // [SECTION] Closed form
  //
  // Not causal: Q read NQ·d, K and V read Tr·N·d, O written NQ·d, L written NQ. Causal: each row
  // block reads the K/V blocks up to the diagonal (from its position); a block mask: the kept pairs.
  // Every Q_i is read and every O_i, L_i written, whatever the mask keeps (docs/design.md#block-sparse).
  Counts closed_form(const AttentionProblem& p, Blocks b) const override {
    const std::int64_t d = p.head_dim, e = p.elem_bytes(), Nq = p.Nq();
    const Visits v = visits(BlockGrid(p, b));
    const std::int64_t kv_rows = v.keys;  // each row block reads the K_j, V_j it keeps
    Counts c;
    c.matmul_flops = 4 * v.scores * d;
    add_traffic(c, Tensor::Q, Nq * d, 0, e);
    add_traffic(c, Tensor::K, kv_rows * d, 0, e);
    add_traffic(c, Tensor::V, kv_rows * d, 0, e);
    add_traffic(c, Tensor::O, 0, Nq * d, e);
    add_traffic(c, Tensor::lse, 0, Nq, kStatBytes);
    return c;
  }

  // Per kept pair: e^x per score and e^(m_i − m_i') per row (line 9); O_i rescaled on chip (line 10);
  // one max update per row. The division by ℓ_i happens once, after the loop (line 12).
  NonMatmulOps non_matmul_ops(const AttentionProblem& p, Blocks b) const override {
    const Visits v = visits(grid(p, b));
    return {v.scores + v.rows, v.rows * p.head_dim, v.rows, 1,
            "one CTA per Q_i: K/V blocks follow one another through its running max"};
  }

  // [SECTION] Numerics

  TiledResult run_tiled(Precision precision, const Inputs& in, const BlockGrid& g,
                        const TiledOptions& options) const override {
    return tiled::in_precision(precision, [&](auto zero) {
      using T = decltype(zero);
      const tiled::Tiles<T> t(in);
      const std::int64_t d = t.d;
      TiledResult result = tiled::empty_result(in);
      std::vector<T> S_row, acc(static_cast<std::size_t>(d));
      for (std::int64_t q : tiled::rows_to_compute(in, options)) {
        const std::int64_t i = q / g.Br;
        std::fill(acc.begin(), acc.end(), T(0));  // line 5: O_i ← 0, ℓ_i ← 0, m_i ← −∞ on chip
        T l = 0, m = -std::numeric_limits<T>::infinity();
        for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 6
          if (g.skipped(i, j)) continue;
          const std::int64_t c0 = g.col_begin(j);
          t.scores(q, c0, g.cols(j), g.causal, S_row);  // line 8
          T m_new = m;  // line 9: m_i' = max(m_i, rowmax(S_ij))
          for (T x : S_row) m_new = std::max(m_new, x);
          if (m_new == -std::numeric_limits<T>::infinity()) continue;  // every key so far masked
          const T alpha = tiled::exp_diff(m, m_new);
          T rowsum = 0;
          for (T& x : S_row) rowsum += (x = tiled::exp_diff(x, m_new));
          const T l_old = l;
          l = alpha * l + rowsum;
          for (T& x : acc) x *= alpha;  // line 10: O_i ← diag(e^(m_i − m_i'))O_i + P̃_ij V_j
          t.add_pv(S_row, c0, acc);
          if (options.watch_row && q == *options.watch_row) {
            SoftmaxEvent e{j, double(m), double(m_new), double(l_old), double(l), double(alpha), {}, -1, false, {}};
            for (T x : acc) e.O_partial.push_back(double(x / l));
            result.watch.push_back(std::move(e));
          }
          m = m_new;
        }
        // line 12: O_i ← diag(ℓ_i)⁻¹ O_i; a row that saw no key (every block masked) stays 0.
        for (std::int64_t x = 0; x < d; ++x) result.O(q, x) = l > 0 ? double(acc[x] / l) : 0.0;
      }
      return result;
    });
  }

  // [SECTION] Launch plan: one CTA per Q_i
  //
  // The CTAs run the room's own steps, so with the L2 off the engine moves what the core counts.
  // LaunchOverride::kv_descending visits K_j, V_j from the last block down.
  std::vector<KernelPlan> plan_kernels(const AttentionProblem& p, Blocks b, const GpuSpec& gpu,
                                       const EngineOptions& options) const override {
    KernelPlan plan = tiled_plan(p, b, "flash2 forward",
                                 "double-buffered: K_{j+1}, V_{j+1} load while S_ij, P̃_ij V_j compute (FlashAttention-2 "
                                 "prefetches the next K/V block with cp.async)",
                                 true);
    const BlockGrid g(p, b);
    PlanBuilder builder(plan, p, g.Tc, gpu.l2_sector_bytes);
    Programs programs(builder, options.launch.kv_descending);
    emit(p, b, programs);
    programs.finish();
    apply_launch(plan, options.launch);
    // FA2's warp layout; PyTorch's kernel stages O through shared memory, gpu/flash2.cu does not.
    if (p.elem_bytes() == 2)
      plan.on_chip = fa2_forward_kernel(plan, {.Br = b.Br, .Bc = b.Bc, .d = p.head_dim, .warps = plan.threads_per_cta / 32,
                                               .staged_output_bytes = options.launch.hbmlab_kernels ? 0 : 2});
    if (options.launch.hbmlab_kernels && p.dtype == Dtype::fp16 && !p.block_mask)
      plan.measured_issue_cycles = hbmlab_issue_cycles(p.head_dim, b, p.causal);
    return {std::move(plan)};
  }

  // gpu/flash2.cu's warps with one CTA an SM, one warp a sub-partition, wait out this many SM clocks a
  // K/V block beyond what the engine's pipes and latencies give its step: the measured step less the
  // engine's (assets/measurements/h200-flash2-residency.txt, fp16: 3,543 − 3,345 at d = 64, 128 × 128;
  // 3,585 − 2,637 at d = 128, 128 × 64, whose compiler issues most ldmatrix just before their MMAs).
  // The causal kernel is another build, with more instructions a step. Two CTAs an SM hide it under each
  // other's work. 0 for a kernel not measured (the bf16 and block-masked builds).
  static double hbmlab_issue_cycles(std::int64_t d, Blocks b, bool causal) {
    struct Shape {
      std::int64_t d, Br, Bc;
      double full, causal;
    };
    static constexpr Shape measured[] = {{64, 128, 128, 198, 426},  {64, 128, 64, 87, 355},  {64, 64, 64, 85, 323},
                                         {128, 128, 64, 948, 1207}, {128, 128, 32, 270, 460}, {128, 64, 64, 36, 201}};
    for (const Shape& s : measured)
      if (s.d == d && s.Br == b.Br && s.Bc == b.Bc) return causal ? s.causal : s.full;
    return 0;
  }

  std::int64_t roofline_ctas_per_instance(const BlockGrid& g) const override { return g.Tr; }
  bool has_kv_order() const override { return true; }
  std::span<const KernelTile> hbmlab_kernel_tiles() const override { return kernel_tiles::flash2; }  // gpu/flash2.cu
  KernelTakes hbmlab_kernel_takes() const override { return kernel_takes::flash2; }
  // NQ < N: the queries are the last NQ positions. HKV < H: each query head reads its K/V head itself
  // (no packing): K and V are read H/HKV times per K/V head, and the L2 may catch the repeats.
  ShapeSupport supports() const override { return {.query_len = true, .kv_heads = true, .block_mask = true}; }
  // PyTorch's FlashAttention-2 forward kernel (Flash_fwd_kernel_traits<d, Br, Bc, warps, ...>).
  std::span<const std::string_view> external_kernels() const override {
    static constexpr std::string_view kernels[] = {"flash_fwd_kernel"};
    return kernels;
  }

  // [SECTION] The window

  const WindowTraits& window() const override {
    static const WindowTraits traits{
        .label = "flash2 (FA-2)",
        .colour = {120, 220, 130},
        .partner = "flash1",
        .visit_order = "visit order: along each row (Q_i outer; K_j, V_j inner)",
        .sram_note = kRegistersNote,
        .cta_per_row_block = true,
    };
    return traits;
  }

  void on_chip(const Step& s, const Step*, const AttentionProblem& p, Sram& sram) const override {
    const std::int64_t d = p.head_dim;
    auto stat = [&](Tensor t) { return Tile{t, s.i, -1, s.row0, s.rows, 0, 1, s.rows * kStatBytes}; };
    if (s.kind == StepKind::load && s.tensor == Tensor::Q) sram.clear();  // a new CTA (line 3)
    if (s.kind == StepKind::load || s.kind == StepKind::store) sram.put(Tile::of(s));
    if (s.kind == StepKind::compute && s.line == 9 && !sram.find(Tensor::m)) {  // line 5: ℓ_i, m_i on chip
      sram.put(stat(Tensor::l));
      sram.put(stat(Tensor::m));
    }
    if (s.kind == StepKind::compute && s.tensor == Tensor::O && !sram.find(Tensor::O))  // line 5: O_i on chip
      sram.put({Tensor::O, s.i, -1, s.row0, s.rows, 0, d, s.rows * d * p.elem_bytes()});
    if (s.kind == StepKind::compute && s.tensor == Tensor::lse) {  // line 13: L_i replaces ℓ_i, m_i
      sram.drop(Tensor::l);
      sram.drop(Tensor::m);
      sram.put(stat(Tensor::lse));
    }
  }

protected:
  std::string compute_text(const Step& s) const override {
    const int i = s.i + 1, j = s.j + 1;
    switch (s.line) {
      case 8: return fmt::format("S_{},{} = Q_{} K_{}ᵀ on chip", i, j, i, j);
      case 9: return "m_i' = max(m_i, rowmax(S_ij)), P̃ = exp(S_ij − m_i'), ℓ_i ← e^(m_i − m_i')ℓ_i + rowsum(P̃)";
      case 10:
        return s.flop_kind == FlopKind::matmul ? fmt::format("O_{} += P̃_{},{} V_{} on chip", i, i, j, j)
                                               : fmt::format("O_{} ← diag(e^(m_i − m_i'))·O_{}", i, i);
      case 12: return fmt::format("O_{} ← diag(ℓ_{})⁻¹·O_{} (once, after the loop)", i, i, i);
      default: return fmt::format("L_{} = m_{} + log(ℓ_{})", i, i, i);
    }
  }
};

}  // namespace

const Algorithm& flash2_room() {
  static const Flash2 room;
  return room;
}

}  // namespace hbmlab
