// flash-decoding: Flash-Decoding (Dao, Haziza, Massa, Sizov, "Flash-Decoding for long-context
// inference", 2023): the K/V cache split into S chunks so that B·HKV·S CTAs fill the GPU, each a
// FlashAttention-2 pass over its chunk, then a small kernel combining the partials by log-sum-exp.
// Run: hbmlab simulate --scenario llama3-8b-decode-128k --algo flash-decoding [--splits S]
//
// The lines, as this room numbers them (the blog post prints none). Split kernel, CTA (b, HKV head,
// split s, row block i), the Q rows of the group's g query heads packed:
//   1 load Q_i;  2 on chip: O_i ← 0, ℓ ← 0, m ← −∞;  3 for each K/V block j of split s:
//   4 load K_j, V_j;  5 S_ij = Q_i K_jᵀ;  6 m' = max(m, rowmax S_ij), P̃ = e^(S_ij − m'),
//   ℓ ← e^(m − m')ℓ + rowsum P̃;  7 O_i ← diag(e^(m − m'))O_i + P̃ V_j, m ← m';
//   8 O_i ← diag(ℓ)⁻¹O_i, LSE_s = m + log ℓ;  9 write O_part and lse_part of split s (fp32), or, with
//   S = 1, O_i and L_i.
// Combine kernel, CTA (b, HKV head, i): 10 load every split's lse_part; LSE = log Σ_s e^(LSE_s);
//   11 load every O_part; O_i = Σ_s e^(LSE_s − LSE)·O_part_s;  12 write O_i.
//
// [SECTION] Identity
// [SECTION] Steps, closed form, numerics
// [SECTION] Launch plan: the split kernel and the combine
// [SECTION] The window
#include "sim/algo/split_kv.hpp"

namespace hbmlab {
namespace {

class FlashDecoding final : public SplitKvAttention {
public:
  // [SECTION] Identity

  std::string_view name() const override { return "flash-decoding"; }
  std::string_view paper_name() const override {
    return "Flash-Decoding (split-KV with a log-sum-exp combine, Dao et al. 2023)";
  }
  // PyTorch's FlashAttention-2 on a decode step runs Flash-Decoding: its split and combine kernels, or
  // its forward kernel alone with one split.
  std::span<const std::string_view> external_kernels() const override {
    static constexpr std::string_view kernels[] = {"flash_fwd_splitkv_kernel", "flash_fwd_splitkv_combine_kernel",
                                                   "flash_fwd_kernel"};
    return kernels;
  }

  // [SECTION] Steps, closed form, numerics

  void emit(const AttentionProblem& p, Blocks b, StepSink& sink) const override {
    Emitter e(p, grid(p, b), sink);
    const BlockGrid& g = e.grid;
    emit_split(e, Path::synchronised, {}, all_row_blocks(g), 0);
    if (g.splits > 1)
      for (std::int64_t i = 0; i < g.Tr; ++i) emit_combine(e, Path::synchronised, {}, i, static_cast<std::int32_t>(g.splits * g.Tr + i));
  }

  Counts closed_form(const AttentionProblem& p, Blocks b) const override { return split_kv_form(p, grid(p, b), {}); }

  NonMatmulOps non_matmul_ops(const AttentionProblem& p, Blocks b) const override {
    NonMatmulOps ops = split_kv_ops(p, grid(p, b), Path::synchronised, {});
    ops.note = grid(p, b).splits > 1
                   ? "each split keeps its own running max; the combine rescales every partial by e^(LSE_s − LSE)"
                   : "one split: FlashAttention-2's forward over the whole cache, a running max and its rescales";
    return ops;
  }

  TiledResult run_tiled(Precision precision, const Inputs& in, const BlockGrid& g,
                        const TiledOptions& options) const override {
    return run_split(precision, in, g, options, Path::synchronised, 0);
  }

  // [SECTION] Launch plan: the split kernel and the combine

  std::vector<KernelPlan> plan_kernels(const AttentionProblem& p, Blocks b, const GpuSpec& gpu,
                                       const EngineOptions& options) const override {
    const BlockGrid g = grid(p, b);
    std::vector<KernelPlan> plans;
    plans.push_back(split_plan(p, b, gpu, "flash-decoding split-KV"));
    {
      PlanBuilder builder(plans.back(), p, g.Tc, gpu.l2_sector_bytes);
      CtaPrograms programs(builder);
      Emitter e(p, g, programs);
      emit_split(e, Path::synchronised, {}, all_row_blocks(g), 0);
    }
    apply_launch(plans.back(), options.launch);
    // FA2's split-KV kernel has the forward's warp layout; its partial O (fp32 with several splits)
    // is staged through shared memory. gpu/flash_decoding.cu's splits the keys over its warps instead,
    // and its combine uses registers only; FA2's combine's layout is not described.
    const bool ours = options.launch.hbmlab_kernels && has_decode_layout(p, b);
    if (ours) {
      plans.back().on_chip = decode_split_kernel(plans.back(), {.Br = b.Br, .Bc = b.Bc, .d = p.head_dim},
                                                 g.splits * packed_rows(p) * instances(p));
      plans.back().measured_cta_cycles = kDecodeSplitCtaCycles;
    }
    else if (p.elem_bytes() == 2) {
      plans.back().on_chip = fa2_forward_kernel(plans.back(), {.Br = b.Br, .Bc = b.Bc, .d = p.head_dim,
                                                               .warps = plans.back().threads_per_cta / 32,
                                                               .staged_output_bytes = g.splits > 1 ? 4 : 2});
      // PyTorch's split kernel runs only with S > 1 (one split is its flash_fwd_kernel, not measured so).
      if (options.launch.pytorch_decode_kernels && g.splits > 1)
        plans.back().measured_cta_cycles = kPytorchSplitCtaCycles;
    }
    if (g.splits > 1) {
      const CombineLoop loop = combine_loop(options.launch);
      plans.push_back(combine_plan(p, b, g, instances(p), "flash-decoding combine", loop));
      PlanBuilder builder(plans.back(), p, g.Tc, gpu.l2_sector_bytes);
      CtaPrograms programs(builder);
      Emitter e(p, g, programs);
      for (std::int64_t i = 0; i < g.Tr; ++i)
        emit_combine(e, Path::synchronised, {}, i, static_cast<std::int32_t>(i), loop != CombineLoop::all_at_once);
      if (ours) plans.back().on_chip = decode_combine_kernel(g.splits, packed_rows(p) * instances(p), 0);
    }
    return plans;
  }

  // [SECTION] The window

  const WindowTraits& window() const override {
    static const WindowTraits traits{
        .label = "flash-decoding (split-KV)",
        .colour = {250, 200, 70},
        .partner = "flashdecoding++",
        .visit_order = "visit order: the splits' K/V blocks in parallel CTAs, one running max each; then the combine",
        .sram_note = "S_ij and P̃_ij stay in registers; each split's O_part and LSE_s go to HBM for the combine.",
    };
    return traits;
  }

  void on_chip(const Step& s, const Step* previous, const AttentionProblem& p, Sram& sram) const override {
    split_kv_on_chip(s, previous, p, sram, Path::synchronised);
  }

protected:
  std::string compute_text(const Step& s) const override {
    const int i = s.i + 1, j = s.j + 1;
    switch (s.line) {
      case 5: return fmt::format("S_{},{} = Q_{} K_{}ᵀ on chip", i, j, i, j);
      case 6: return "m' = max(m, rowmax(S_ij)), P̃ = exp(S_ij − m'), ℓ ← e^(m − m')ℓ + rowsum(P̃)";
      case 7:
        return s.flop_kind == FlopKind::matmul ? fmt::format("O_{} += P̃_{},{} V_{} on chip", i, i, j, j)
                                               : fmt::format("O_{} ← diag(e^(m − m'))·O_{}", i, i);
      case 8:
        return s.tensor == Tensor::O ? fmt::format("O_{} ← diag(ℓ)⁻¹·O_{}", i, i)
                                     : fmt::format("LSE_s = m + log ℓ for the rows of Q_{}", i);
      case 10: return fmt::format("LSE = log Σ_s exp(LSE_s) over the splits of Q_{}'s rows", i);
      default: return fmt::format("O_{} = Σ_s exp(LSE_s − LSE)·O_part_s: each split's partial rescaled and summed", i);
    }
  }
};

}  // namespace

const Algorithm& flash_decoding_room() {
  static const FlashDecoding room;
  return room;
}

}  // namespace hbmlab
