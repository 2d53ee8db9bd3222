// flash3: FlashAttention-3 forward, the FlashAttention-3 paper's Algorithm 1 (Hopper). Its HBM
// traffic is FlashAttention-2's for the same blocks: one CTA per Q_i, K_j and V_j read once per row
// block, O_i and L_i written once. What changes is inside the SM, and this room says so in its own
// words, working set and launch plan: a producer warpgroup moves Q_i and the K_j, V_j blocks with the
// tensor copy engine (TMA) into a ring of `stages` shared-memory buffers; two consumer warpgroups
// take turns issuing their GEMMs (pingpong), and within each the softmax of S_ij runs while the
// previous P̃ V product is still in flight (intra-warpgroup overlap).
// Run: hbmlab simulate --algo flash3
//
// A thin room: the steps, closed form, numerics and the per-CTA programs are flash2's (the same
// lines of the same loop, so the counts agree by construction; a test holds them equal), narrated
// here in FlashAttention-3's terms; the working set counts the K/V ring and the launch plan names
// the warpgroups.
//
// [SECTION] Identity, blocks and the K/V ring
// [SECTION] Steps, counts and numerics: flash2's
// [SECTION] Launch plan: one producer and two consumer warpgroups per Q_i
// [SECTION] The window
#include <algorithm>

#include <fmt/format.h>

#include "sim/algo/emitter.hpp"
#include "sim/algo/tiled_room.hpp"
#include "sim/algo/warp_layout.hpp"

namespace hbmlab {

const Algorithm& flash2_room();           // sim/algo/flash2
const Algorithm& flash2_backward_room();  // sim/algo/flash2_backward

namespace {

class Flash3 final : public TiledAttention {
public:
  // [SECTION] Identity, blocks and the K/V ring

  std::string_view name() const override { return "flash3"; }
  std::string_view paper_name() const override { return "FlashAttention-3 (FlashAttention-3 paper, Algorithm 1)"; }
  ShapeSupport supports() const override { return flash2().supports(); }  // NQ < N, HKV < H, block masks

  // K/V ring depth of hbmlab's kernel (gpu/flash3.cu): 3 stages at d ≤ 64, 2 above (d = 128 needs
  // 32 KiB per K_j or V_j, and Q_i plus two of each fill 160 KiB of the H100's 227).
  static std::int64_t stages(std::int64_t d) { return d <= 64 ? 3 : 2; }
  // Consumer warpgroups of 64 rows of Q_i: Br/64 (the kernel's 192 rows at d = 64 are three, so the
  // tensor cores run one's GEMMs while two compute their softmax), at least one.
  static std::int64_t consumer_warpgroups(Blocks b) { return std::max<std::int64_t>(1, b.Br / 64); }

  // Q_i and O_i (Br × d; O_i in the consumers' registers, written back through Q_i's buffer), the
  // ring of `stages` K_j, V_j pairs (Bc × d each), ℓ_i and m_i.
  std::int64_t working_set_bytes(const AttentionProblem& p, Blocks b) const override {
    return p.elem_bytes() * (2 * b.Br * p.head_dim + 2 * stages(p.head_dim) * b.Bc * p.head_dim) + kStatBytes * 2 * b.Br;
  }
  Blocks paper_blocks(std::int64_t M, std::int64_t d, std::int64_t N) const override {
    return flash2().paper_blocks(M, d, N);
  }
  std::optional<Pipeline> pipeline(const AttentionProblem& p, Blocks b) const override {
    return Pipeline{stages(p.head_dim), consumer_warpgroups(b)};
  }

  // [SECTION] Steps, counts and numerics: flash2's

  void emit(const AttentionProblem& p, Blocks b, StepSink& sink) const override { flash2().emit(p, b, sink); }
  Counts closed_form(const AttentionProblem& p, Blocks b) const override { return flash2().closed_form(p, b); }
  NonMatmulOps non_matmul_ops(const AttentionProblem& p, Blocks b) const override {
    NonMatmulOps ops = flash2().non_matmul_ops(p, b);
    ops.note = "one CTA per Q_i: the softmax of one consumer warpgroup hides under the other's GEMMs";
    return ops;
  }
  TiledResult run_tiled(Precision precision, const Inputs& in, const BlockGrid& g,
                        const TiledOptions& options) const override {
    return flash2().run_tiled(precision, in, g, options);
  }

  // [SECTION] Launch plan: one producer and two consumer warpgroups per Q_i
  //
  // flash2's CTA programs (the same accesses in the same order), launched as FlashAttention-3's
  // kernel is: warpgroup 0 the producer, one consumer warpgroup per 64 rows of Q_i, the working set above
  // in shared memory, the K/V loads of the ring in flight while both consumers compute.
  std::vector<KernelPlan> plan_kernels(const AttentionProblem& p, Blocks b, const GpuSpec& gpu,
                                       const EngineOptions& options) const override {
    std::vector<KernelPlan> plans = flash2().plan_kernels(p, b, gpu, options);
    for (KernelPlan& plan : plans) {
      plan.name = "flash3 forward";
      // The kernel hands out the row blocks of one (batch, head) from the last one down: under a causal
      // mask the longest rows go first (gpu/flash3.cu's tile order), so the CTAs resident together
      // start their sweeps over K_j, V_j close together and the short rows fill the tail.
      if (p.causal) std::reverse(plan.programs.begin(), plan.programs.end());
      plan.overlap = fmt::format(
          "producer warpgroup (TMA) keeps {} K/V stages in flight; {} consumer warpgroups alternate their "
          "wgmma GEMMs (pingpong) and overlap each softmax with the previous P̃V product",
          stages(p.head_dim), consumer_warpgroups(b));
      // hbmlab's kernel walks tiles persistently (v4; two by two under a causal mask) and launches one
      // CTA per tile with a block mask (v3, gpu/flash3.cu); a record's grid says which rung it timed
      // (LaunchOverride::ctas). FlashAttention-3's and cuDNN's kernels are persistent.
      if (options.launch.ctas) plan.persistent = *options.launch.ctas < plan.tiles();
      else plan.persistent = !(options.launch.hbmlab_kernels && p.block_mask);
      if (options.launch.hbmlab_kernels) charge_whole_tiles(p, b, plan);
      if (options.launch.hbmlab_kernels && plan.persistent) walk_as_v4(p, plan, gpu, options.launch);
      if (!options.launch.threads_per_cta) plan.threads_per_cta = 128 * (1 + consumer_warpgroups(b));
      if (!options.launch.smem_bytes_per_cta) plan.smem_bytes_per_cta = working_set_bytes(p, b);
      // The kernel's own on-chip traffic: wgmma's operands from shared memory, not flash2's ldmatrix.
      if (p.elem_bytes() == 2)
        plan.on_chip = wgmma_forward_kernel(
            plan, {.Bc = b.Bc, .d = p.head_dim, .warpgroups = consumer_warpgroups(b), .elem_bytes = p.elem_bytes()});
    }
    return plans;
  }
  std::int64_t roofline_ctas_per_instance(const BlockGrid& g) const override { return g.Tr; }
  std::span<const KernelTile> hbmlab_kernel_tiles() const override { return kernel_tiles::flash3; }  // gpu/flash3.cu
  KernelTakes hbmlab_kernel_takes() const override { return kernel_takes::flash3; }
  // Its threads are its warpgroups, one producer and Br/64 consumers, which its on-chip counts and
  // pipeline follow: --block-rows changes them, a thread count alone would describe no kernel.
  bool takes_launch_threads() const override { return false; }
  // cuDNN's Hopper forward (PyTorch's cuDNN SDPA backend on sm_90): the same structure, a producer
  // warpgroup and consumer warpgroups on wgmma, so its records are read as this room.
  std::span<const std::string_view> external_kernels() const override {
    static constexpr std::string_view kernels[] = {"sdpa_sm90_flash_fprop_wgmma"};
    return kernels;
  }

  // [SECTION] The window

  const WindowTraits& window() const override {
    static const WindowTraits traits{
        .label = "flash3 (FA-3)",
        .colour = {90, 200, 230},
        .partner = "flash2",
        .visit_order = "visit order: along each row (Q_i outer; K_j, V_j through the TMA ring)",
        .sram_note = kRegistersNote,
        .cta_per_row_block = true,
    };
    return traits;
  }
  void on_chip(const Step& s, const Step* previous, const AttentionProblem& p, Sram& sram) const override {
    flash2().on_chip(s, previous, p, sram);
  }

protected:
  // The paper's Algorithm 1 (consumer warpgroup) in the words of its lines; the step's line
  // numbers are flash2's, which the two algorithms share.
  std::string compute_text(const Step& s) const override {
    const int i = s.i + 1, j = s.j + 1;
    switch (s.line) {
      case 8: return fmt::format("wait for K_{} in the ring; S_{},{} = Q_{} K_{}ᵀ (wgmma, SS)", j, i, j, i, j);
      case 9:
        return "m_i' = max(m_i, rowmax(S_ij)), P̃ = exp(S_ij − m_i'), ℓ_i ← e^(m_i − m_i')ℓ_i + rowsum(P̃) "
               "(under the other warpgroup's GEMMs)";
      case 10:
        return s.flop_kind == FlopKind::matmul
                   ? fmt::format("wait for V_{}; O_{} += P̃_{},{} V_{} (wgmma, P̃ from registers); release the stage", j, i,
                                 i, j, j)
                   : fmt::format("O_{} ← diag(e^(m_i − m_i'))·O_{} (after the previous P̃V lands)", i, i);
      case 12: return fmt::format("O_{} ← diag(ℓ_{})⁻¹·O_{} (epilogue, once)", i, i, i);
      default: return fmt::format("L_{} = m_{} + log(ℓ_{}); O_{} leaves through shared memory (TMA store)", i, i, i, i);
    }
  }

private:
  static const Algorithm& flash2() { return flash2_room(); }

  // hbmlab's kernels (every rung, v3 and v4 alike) compute whole tiles: the copy engine fills the rows
  // of a ragged last Q_i and K_j, V_j past N with zeros, and the consumers multiply them and mask the
  // keys past N (gpu/flash3.cu). So a pair of the ragged last row block costs Br rows of work, and a
  // pair with the ragged last K/V block Bc keys: its products 4·r·Bc·d FLOPs and its softmax
  // kScoreOps·r·Bc, not the real rows' and keys' share flash2's steps charge. (A ragged row block
  // charged less would also run ahead of the others: with a static order the same CTAs would take it
  // every time, e.g. Tr = 11 and a grid of 132 = 12·11.)
  static void charge_whole_tiles(const AttentionProblem& p, Blocks b, KernelPlan& plan) {
    const auto Tr = static_cast<std::int64_t>(plan.programs.size());
    const std::int64_t Tc = ceil_div(p.seq_len, b.Bc), last_cols = p.seq_len - (Tc - 1) * b.Bc;
    if (last_cols < b.Bc)
      for (CtaPhase& phase : plan.phases) {
        const auto first = plan.accesses.begin() + phase.first_access;
        const bool last_kv = std::any_of(first, first + phase.access_count, [&](const TileAccess& a) {
          return a.tensor == Tensor::K && !a.store && a.tile == Tc - 1;
        });
        if (!last_kv || phase.matmul_flops == 0) continue;
        // The phase's products are S = Q_i K_jᵀ and P̃ V_j, 2·r·c·d each: r·c scores.
        const std::int64_t rows = phase.matmul_flops / (4 * last_cols * p.head_dim), pad = b.Bc - last_cols;
        phase.matmul_flops += 4 * rows * pad * p.head_dim;
        phase.non_matmul_flops += kScoreOps * rows * pad;
      }
    if (const std::int64_t last_rows = p.Nq() - (Tr - 1) * b.Br; Tr > 0 && last_rows > 0 && last_rows < b.Br) {
      const CtaProgram& last = plan.programs[p.causal ? 0 : Tr - 1];  // Q_{Tr−1}: first in a causal plan
      for (std::int32_t n = last.first_phase; n < last.first_phase + last.phase_count; ++n) {
        CtaPhase& phase = plan.phases[n];
        phase.matmul_flops = phase.matmul_flops * b.Br / last_rows;
        phase.non_matmul_flops = phase.non_matmul_flops * b.Br / last_rows;
      }
    }
  }

  // hbmlab's v4 (gpu/flash3.cu, tile_at and next_tile) walks its tiles in a static order, which the
  // plan spells out (KernelPlan::static_tiles): min(walkers, SMs) CTAs, or the record's grid. A head's
  // row blocks run from the last one down; under a causal mask (no block mask) CTA c takes them two
  // by two, positions 2c and 2c + 1 then 2c + 2·grid and 2c + 2·grid + 1, …, and a head's positions
  // are ordered longest, shortest, second longest, second shortest, … (every second head backwards
  // when Tr is odd), so each pair holds rows i and Tr − 1 − i.
  static void walk_as_v4(const AttentionProblem& p, KernelPlan& plan, const GpuSpec& gpu,
                         const LaunchOverride& launch) {
    const auto Tr = static_cast<std::int64_t>(plan.programs.size());
    const bool paired = p.causal && !p.block_mask;
    const std::vector<CtaProgram> by_row = [&] {  // back in row order: program i is Q_i
      std::vector<CtaProgram> rows = plan.programs;
      if (p.causal) std::reverse(rows.begin(), rows.end());
      return rows;
    }();
    for (std::int64_t q = 0; q < Tr; ++q) {
      const std::int64_t i = !paired ? Tr - 1 - q : q % 2 ? q / 2 : Tr - 1 - q / 2;
      plan.programs[q] = by_row[i];
    }
    const std::int64_t walkers = paired ? (plan.tiles() + 1) / 2 : plan.tiles();
    plan.static_tiles = {.ctas = launch.ctas.value_or(std::min(walkers, gpu.sm_count)),
                         .run = paired ? 2 : 1,
                         .reverse_odd_instances = paired && Tr % 2 == 1};
  }
};

// [SECTION] The backward pass: flash2's HBM accesses, FlashAttention-3's SM
//
// FlashAttention-3's backward (its paper's Algorithm 3) reads and writes what FlashAttention-2's does
// for the same blocks: K_j, V_j stay on chip with dK_j, dV_j while the Q_i, dO_i stream past, dQ is
// accumulated in HBM. So the steps, HBM counts, numerics and narration are flash2 backward's (a test
// holds the counts equal); what is this room's own is the inside of the SM, as hbmlab's kernel
// (gpu/flash3_backward.cu) runs it: a producer warpgroup brings Q_i, dO_i into a two-stage ring by
// TMA, two consumer warpgroups of Bc/2 keys each compute the five products with wgmma (operands from
// shared memory, P and dS from registers for dV and dK, dS staged through shared memory for dQ), so
// its working set, threads, registers, on-chip counts and GEMM rate are its own.
class Flash3Backward final : public TiledBackward {
public:
  std::string_view name() const override { return "flash3"; }
  std::string_view display_name() const override { return "flash3 backward"; }
  std::string_view paper_name() const override {
    return "FlashAttention-3 backward (FlashAttention-3 paper, Algorithm 3; FlashAttention-2's HBM accesses)";
  }
  ShapeSupport supports() const override { return base().supports(); }
  // cuDNN's sm90 backward (PyTorch SDPA's cuDNN backend): its main kernel, a wgmma one with a producer
  // and two consumer warpgroups (hbmlab validate reads its records as this room, the three kernels summed).
  std::span<const std::string_view> external_kernels() const override {
    static constexpr std::string_view kernels[] = {"sdpa_sm90_flash_bprop"};
    return kernels;
  }
  // The kernel's shared memory: K_j and V_j (Bc × d each), two stages of Q_i and dO_i (Br × d each),
  // two dS_ijᵀ buffers (Bc × Br) and two of L_i, D_i (fp32). dK_j, dV_j stay in registers.
  std::int64_t working_set_bytes(const AttentionProblem& p, Blocks b) const override {
    const std::int64_t d = p.head_dim;
    return p.elem_bytes() * (2 * b.Bc * d + 2 * kStages * b.Br * d + 2 * b.Bc * b.Br) + kStatBytes * 2 * 2 * b.Br;
  }
  static constexpr std::int64_t kStages = 2;  // the Q_i, dO_i ring
  // Consumer warpgroups of 64 keys of K_j each (the kernel's Bc = 128: two), at least one.
  static std::int64_t consumer_warpgroups(Blocks b) { return std::max<std::int64_t>(1, b.Bc / 64); }
  // Registers per thread as ptxas allots them: the register file over the CTA's threads, in steps of
  // 8, at most 255 (the kernel's 384 threads: 168; at run time setmaxnreg gives the producer 24 and
  // the consumers 240).
  static std::int64_t registers(std::int64_t threads) { return std::min<std::int64_t>(255, 65536 / threads / 8 * 8); }
  std::optional<Pipeline> pipeline(const AttentionProblem&, Blocks b) const override {
    return Pipeline{kStages, consumer_warpgroups(b)};
  }
  Blocks paper_blocks(std::int64_t M, std::int64_t d, std::int64_t N) const override { return base().paper_blocks(M, d, N); }
  void emit(const AttentionProblem& p, Blocks b, StepSink& sink) const override { base().emit(p, b, sink); }
  std::string narrate(const Step& s) const override { return base().narrate(s); }
  Counts closed_form(const AttentionProblem& p, Blocks b) const override { return base().closed_form(p, b); }
  TiledResult run_tiled(Precision precision, const Inputs& in, const BlockGrid& g,
                        const TiledOptions& options) const override {
    return base().run_tiled(precision, in, g, options);
  }
  std::vector<KernelPlan> plan_kernels(const AttentionProblem& p, Blocks b, const GpuSpec& gpu,
                                       const EngineOptions& options) const override {
    std::vector<KernelPlan> plans = base().plan_kernels(p, b, gpu, options);
    KernelPlan& main = plans[1];  // flash2 backward's three: D, the main kernel, dQ's conversion
    main.name = "flash3 backward";
    main.overlap = fmt::format(
        "producer warpgroup (TMA) keeps {} Q_i/dO_i stages in flight; {} consumer warpgroups issue S, dP, dV, dK "
        "and dQ as wgmma; dQ_i added with fp32 atomics in the L2",
        kStages, consumer_warpgroups(b));
    // wgmma at the preset's gemm_efficiency, as flash3's forward and cuDNN's backward sustain it;
    // hbmlab's kernel (the records of gpu/flash3_backward.cu) from the SM's pipes with its counts: it
    // issues each step's products, elementwise work and dQ atomics one after the other in a
    // warpgroup (no pingpong, no overlap within a warpgroup), so its tensor cores wait on them.
    main.library_gemm = !options.launch.hbmlab_kernels;
    // hbmlab's kernel: both consumer warpgroups meet at a named barrier every step (dQ_i needs both
    // halves of dS_ij), so they run in step: S and dP, a wait; P and dS; dV, dK and dQ, a wait; the
    // atomics. Neither overlaps its FP32 work with a GEMM, and neither fills the other's waits.
    if (options.launch.hbmlab_kernels) main.wgmma_waits = 2;
    // dQ_i's fp32 adds keep flash2 backward's requests: hbmlab's kernel adds each thread's wgmma
    // fragment as float2 (8 rows of 32 bytes a warp instruction, one sector per request). cuDNN's
    // kernel also leaves dQ in fp32 (its convert_dq_to_16bits kernel casts it); how it adds is not in
    // its records, and it is read as whole lines, as FlashAttention-3 adds a tile of dQ_i at once.
    if (!options.launch.threads_per_cta) main.threads_per_cta = 128 * (1 + consumer_warpgroups(b));
    if (!options.launch.smem_bytes_per_cta) main.smem_bytes_per_cta = working_set_bytes(p, b);
    if (!options.launch.registers_per_thread) main.registers_per_thread = registers(main.threads_per_cta);
    if (p.elem_bytes() == 2)
      main.on_chip = wgmma_backward_kernel(
          main, {.Br = b.Br, .Bc = b.Bc, .d = p.head_dim, .warpgroups = consumer_warpgroups(b), .elem_bytes = p.elem_bytes()});
    return plans;
  }
  std::int64_t roofline_ctas_per_instance(const BlockGrid& g) const override { return base().roofline_ctas_per_instance(g); }
  std::span<const KernelTile> hbmlab_kernel_tiles() const override {  // gpu/flash3_backward.cu
    return kernel_tiles::flash3_backward;
  }
  // Its threads are one producer and two consumer warpgroups, as its on-chip counts take them.
  bool takes_launch_threads() const override { return false; }
  std::optional<ForwardState> forward_state(const AttentionProblem& p) const override { return base().forward_state(p); }
  const WindowTraits& window() const override {
    static const WindowTraits traits = [&] {
      WindowTraits t = base().window();
      t.label = "flash3 backward";
      t.colour = {90, 200, 230};
      t.partner = "flash2";
      return t;
    }();
    return traits;
  }
  void on_chip(const Step& s, const Step* previous, const AttentionProblem& p, Sram& sram) const override {
    base().on_chip(s, previous, p, sram);
  }

protected:
  std::string compute_text(const Step&) const override { return {}; }  // narrate() is flash2 backward's

private:
  static const Algorithm& base() { return flash2_backward_room(); }
};

}  // namespace

const Algorithm& flash3_room() {
  static const Flash3 room;
  return room;
}

const Algorithm& flash3_backward_room() {
  static const Flash3Backward room;
  return room;
}

}  // namespace hbmlab
