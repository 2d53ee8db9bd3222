// flashdecoding++: FlashDecoding++ (Hong et al., "FlashDecoding++: Faster Large Language Model
// Inference on GPUs", 2023), Section 3's asynchronised softmax with a unified max: every split uses
// one max φ chosen ahead instead of its own running max, so no block waits for a new max, nothing is
// rescaled, and the splits' partial sums simply add. A row whose scores leave φ's safe range falls
// back to the synchronised path (Flash-Decoding's) and its splits are recomputed.
// Run: hbmlab simulate --scenario llama3-8b-decode-128k --algo flashdecoding++ [--unified-max PHI]
//
// The lines, as this room numbers them (same launches and bytes as flash-decoding). Split kernel,
// CTA (b, HKV head, split s, row block i):
//   1 load Q_i;  2 on chip: O ← 0, ℓ ← 0 (m is φ throughout);  3 for each K/V block j of split s:
//   4 load K_j, V_j;  5 S_ij = Q_i K_jᵀ;  6 P̃ = e^(S_ij − φ), ℓ += rowsum P̃, and every score checked
//   against φ's safe range;  7 O += P̃ V_j (no rescale);  8 (S = 1 only) O_i ← diag(ℓ)⁻¹O, L = φ + log ℓ;
//   9 write O_part_s = Σ e^(x − φ)·v and ℓ_s (in lse_part's place), fp32; or, with S = 1, O_i and L_i.
// Combine kernel, CTA (b, HKV head, i): 10 load every split's ℓ_s; ℓ = Σ_s ℓ_s;
//   11 load every O_part; O_i = Σ_s O_part_s / ℓ;  12 write O_i.
// Fallback, for the row blocks with a row out of the safe range: lines 13–21 are lines 1–9 on the
// synchronised path (a running max, rescales, LSE_s), and 22–24 the log-sum-exp combine of
// flash-decoding's lines 10–12.
//
// [SECTION] The unified max and the fallback rule
// [SECTION] The room
#include "sim/algo/flashdecoding_pp/flashdecoding_pp.hpp"

#include "sim/algo/split_kv.hpp"

namespace hbmlab {

// [SECTION] The unified max and the fallback rule

double default_unified_max(std::int64_t N) { return N > 1 ? std::sqrt(2.0 * std::log(double(N))) : 0.0; }

bool rows_fall_back(std::int64_t N, double phi, Dtype dtype) {
  const SafeRange range = unified_max_safe_range(dtype);
  const double row_max = default_unified_max(N);
  return row_max - phi > range.above || phi - row_max > range.below;
}

namespace {

// Fallback lines: the synchronised split kernel as 13–21 and its combine as 22–24.
constexpr int kFallbackOffset = 12;

// [SECTION] The room

class FlashDecodingPP final : public SplitKvAttention {
public:
  std::string_view name() const override { return "flashdecoding++"; }
  std::string_view paper_name() const override {
    return "FlashDecoding++ (asynchronised softmax with a unified max, Hong et al. 2023)";
  }
  ShapeSupport supports() const override {
    return {.query_len = true, .kv_heads = true, .splits = true, .unified_max = true};
  }

  AttentionProblem prepare(const AttentionProblem& p, Blocks b, const GpuSpec& gpu) const override {
    AttentionProblem out = SplitKvAttention::prepare(p, b, gpu);
    if (!out.unified_max) out.unified_max = default_unified_max(p.seq_len);
    return out;
  }

  // The row blocks the counts recompute: all or none (rows_fall_back).
  std::vector<std::int64_t> recomputed_blocks(const AttentionProblem& p, const BlockGrid& g) const {
    const double phi = p.unified_max.value_or(default_unified_max(p.seq_len));
    return rows_fall_back(p.seq_len, phi, p.dtype) ? all_row_blocks(g) : std::vector<std::int64_t>{};
  }

  // Unified split kernel; the synchronised one again for the recomputed row blocks; the combine, on
  // the synchronised path for those blocks. CTAs numbered in launch order across the kernels.
  void emit_with(const AttentionProblem& p, Blocks b, std::span<const std::int64_t> recomputed, StepSink& sink) const {
    Emitter e(p, grid(p, b), sink);
    const BlockGrid& g = e.grid;
    emit_split(e, Path::unified, {}, all_row_blocks(g), 0);
    const auto n = static_cast<std::int32_t>(recomputed.size());
    const auto split_ctas = static_cast<std::int32_t>(g.splits * g.Tr);
    if (n > 0) emit_split(e, Path::synchronised, {kFallbackOffset, kFallbackOffset}, recomputed, split_ctas);
    if (g.splits > 1)
      for (std::int64_t i = 0; i < g.Tr; ++i) {
        const bool again = std::find(recomputed.begin(), recomputed.end(), i) != recomputed.end();
        emit_combine(e, again ? Path::synchronised : Path::unified, again ? Lines{0, kFallbackOffset} : Lines{}, i,
                     static_cast<std::int32_t>(split_ctas + g.splits * n + i));
      }
  }

  Counts form_with(const AttentionProblem& p, Blocks b, std::span<const std::int64_t> recomputed) const {
    return split_kv_form(p, grid(p, b), recomputed);
  }

  void emit(const AttentionProblem& p, Blocks b, StepSink& sink) const override {
    emit_with(p, b, recomputed_blocks(p, grid(p, b)), sink);
  }

  Counts closed_form(const AttentionProblem& p, Blocks b) const override {
    return form_with(p, b, recomputed_blocks(p, grid(p, b)));
  }

  NonMatmulOps non_matmul_ops(const AttentionProblem& p, Blocks b) const override {
    const BlockGrid g = grid(p, b);
    NonMatmulOps ops = split_kv_ops(p, g, Path::unified, recomputed_blocks(p, g));
    ops.note = ops.kernels > (g.splits > 1 ? 2 : 1)
                   ? "every row left φ's safe range: its splits ran again on the synchronised path (the fallback)"
                   : g.splits > 1 ? "one unified max φ: no running max to wait for, no rescale, the splits' sums simply add"
                                  : "one unified max φ: no running max to wait for and no rescale";
    return ops;
  }

  TiledResult run_tiled(Precision precision, const Inputs& in, const BlockGrid& g,
                        const TiledOptions& options) const override {
    const std::optional<double> phi = options.problem ? options.problem->unified_max : std::nullopt;
    return run_split(precision, in, g, options, Path::unified, phi.value_or(default_unified_max(in.K.rows)));
  }

  // Kernels: the unified split kernel; the fallback's synchronised split kernel, launched on every step
  // (the CTAs of a row block that stayed in φ's range read its flag and leave); the combine.
  std::vector<KernelPlan> plan_kernels(const AttentionProblem& p, Blocks b, const GpuSpec& gpu,
                                       const EngineOptions& options) const override {
    const BlockGrid g = grid(p, b);
    const std::vector<std::int64_t> again = recomputed_blocks(p, g);
    std::vector<KernelPlan> plans;
    auto build = [&](KernelPlan plan, auto&& steps) {
      plans.push_back(std::move(plan));
      PlanBuilder builder(plans.back(), p, g.Tc, gpu.l2_sector_bytes);
      CtaPrograms programs(builder);
      Emitter e(p, g, programs);
      steps(e);
    };
    // gpu/flash_decoding.cu's kernels, the only ones of this room: their warp layouts.
    const bool layout = has_decode_layout(p, b);
    const DecodeSplitLayout split{.Br = b.Br, .Bc = b.Bc, .d = p.head_dim, .unified = true};
    std::int64_t again_rows = 0;  // real rows of the recomputed row blocks, per instance
    for (std::int64_t i : again) again_rows += std::min(b.Br, packed_rows(p) - i * b.Br);
    build(split_plan(p, b, gpu, "flashdecoding++ split-KV"),
          [&](Emitter& e) { emit_split(e, Path::unified, {}, all_row_blocks(g), 0); });
    apply_launch(plans.back(), options.launch);
    if (layout) {
      plans.back().on_chip = decode_split_kernel(plans.back(), split, g.splits * packed_rows(p) * instances(p));
      plans.back().measured_cta_cycles = kDecodeSplitCtaCycles;
    }
    if (!again.empty()) {
      build(split_plan(p, b, gpu, "flashdecoding++ fallback"),
            [&](Emitter& e) { emit_split(e, Path::synchronised, {kFallbackOffset, kFallbackOffset}, again, 0); });
      apply_launch(plans.back(), options.launch);
      DecodeSplitLayout synchronised = split;
      synchronised.unified = false;
      if (layout) {
        plans.back().on_chip = decode_split_kernel(plans.back(), synchronised, g.splits * again_rows * instances(p));
        plans.back().measured_cta_cycles = kDecodeSplitCtaCycles;
      }
    } else {
      // No row left the range: the fallback's launch still runs, each CTA reading its flag and leaving.
      // A launch and nothing more (the flag's round trip is left out).
      KernelPlan check = split_plan(p, b, gpu, "flashdecoding++ fallback (no row)");
      apply_launch(check, options.launch);
      check.overlap = "none: each CTA reads its row block's flag and leaves";
      for (std::int64_t c = 0; c < g.splits * g.Tr; ++c) {
        check.programs.push_back({static_cast<std::int32_t>(check.phases.size()), 1});
        check.phases.push_back({});
      }
      plans.push_back(std::move(check));
    }
    if (g.splits > 1)
      build(combine_plan(p, b, g, instances(p), "flashdecoding++ combine", CombineLoop::hbmlab), [&](Emitter& e) {
        for (std::int64_t i = 0; i < g.Tr; ++i) {
          const bool sync = std::find(again.begin(), again.end(), i) != again.end();
          emit_combine(e, sync ? Path::synchronised : Path::unified, sync ? Lines{0, kFallbackOffset} : Lines{}, i,
                       static_cast<std::int32_t>(i), true);
        }
      });
    if (g.splits > 1 && layout)
      plans.back().on_chip = decode_combine_kernel(g.splits, again_rows * instances(p),
                                                   (packed_rows(p) - again_rows) * instances(p));
    return plans;
  }

  const WindowTraits& window() const override {
    static const WindowTraits traits{
        .label = "flashdecoding++ (unified max)",
        .colour = {240, 130, 200},
        .partner = "flash-decoding",
        .visit_order = "visit order: the splits' K/V blocks in parallel CTAs against one unified max φ; then the sums add",
        .sram_note = "S_ij and P̃_ij stay in registers; no running max: each split's Σ e^(x − φ)·v and ℓ_s go to HBM.",
    };
    return traits;
  }

  void on_chip(const Step& s, const Step* previous, const AttentionProblem& p, Sram& sram) const override {
    split_kv_on_chip(s, previous, p, sram, s.line > kFallbackOffset ? Path::synchronised : Path::unified);
  }

  std::string narrate(const Step& s) const override {
    const std::string text = SplitKvAttention::narrate(s);
    return s.line > kFallbackOffset ? "fallback, " + text : text;
  }

protected:
  std::string compute_text(const Step& s) const override {
    const int i = s.i + 1, j = s.j + 1;
    const bool fallback = s.line > kFallbackOffset;
    switch (fallback ? s.line - kFallbackOffset : s.line) {
      case 5: return fmt::format("S_{},{} = Q_{} K_{}ᵀ on chip", i, j, i, j);
      case 6:
        return fallback ? "synchronised: m' = max(m, rowmax(S_ij)), P̃ = exp(S_ij − m'), ℓ ← e^(m − m')ℓ + rowsum(P̃)"
                        : "P̃ = exp(S_ij − φ) with the unified max φ, ℓ += rowsum(P̃); scores checked against φ's safe range";
      case 7:
        if (s.flop_kind == FlopKind::matmul) return fmt::format("O_{} += P̃_{},{} V_{} on chip{}", i, i, j, j, fallback ? "" : " (no rescale)");
        return fmt::format("O_{} ← diag(e^(m − m'))·O_{}", i, i);
      case 8:
        if (s.tensor == Tensor::O) return fmt::format("O_{} ← diag(ℓ)⁻¹·O_{}", i, i);
        return fallback ? fmt::format("LSE_s = m + log ℓ for the rows of Q_{}", i) : fmt::format("L_{} = φ + log ℓ", i);
      case 10:
        return fallback ? fmt::format("LSE = log Σ_s exp(LSE_s) over the splits of Q_{}'s rows", i)
                        : fmt::format("ℓ = Σ_s ℓ_s over the splits of Q_{}'s rows: no max to agree on", i);
      default:
        return fallback ? fmt::format("O_{} = Σ_s exp(LSE_s − LSE)·O_part_s", i)
                        : fmt::format("O_{} = Σ_s O_part_s / ℓ: the splits' sums simply add", i);
    }
  }
};

const FlashDecodingPP& room() {
  static const FlashDecodingPP r;
  return r;
}

}  // namespace

void emit_flashdecoding_pp(const AttentionProblem& p, Blocks b, std::span<const std::int64_t> recomputed, StepSink& sink) {
  room().emit_with(p, b, recomputed, sink);
}

Counts flashdecoding_pp_form(const AttentionProblem& p, Blocks b, std::span<const std::int64_t> recomputed) {
  return room().form_with(p, b, recomputed);
}

const Algorithm& flashdecoding_pp_room() { return room(); }

}  // namespace hbmlab
