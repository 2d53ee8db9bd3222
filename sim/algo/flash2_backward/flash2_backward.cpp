// flash2 backward: FlashAttention-2's backward pass, the FlashAttention-2 paper's Algorithm 2.
// D = rowsum(dO ∘ O) is computed once first and kept in HBM, so the inner loop reads Q_i, dO_i,
// dQ_i, L_i and D_i but never O_i; P_ij = exp(S_ij − L_i) needs only the log-sum-exp L the forward
// kept. K/V blocks outer (one CTA each when launched), dQ_i read and written on every inner step.
// Run: hbmlab simulate --algo flash2 --pass backward
//
// [SECTION] Identity, blocks and SRAM
// [SECTION] Steps (lines 3 to 18)
// [SECTION] Closed form
// [SECTION] Numerics
// [SECTION] Launch plan: D kernel, one CTA per K_j, V_j, dQ conversion
// [SECTION] The window
#include <fmt/format.h>

#include "sim/algo/emitter.hpp"
#include "sim/algo/tiled_room.hpp"
#include "sim/common/error.hpp"
#include "sim/common/units.hpp"
#include "sim/numerics/tiles.hpp"

namespace hbmlab {
namespace {

// Line 11 per score: subtract L_i, exponentiate. Line 14: subtract D_i, multiply.
constexpr std::int64_t kRecomputeOps = 2, kDsOps = 2;

bool column_kept(const BlockGrid& g, std::int64_t j) {
  for (std::int64_t i = 0; i < g.Tr; ++i)
    if (!g.skipped(i, j)) return true;
  return false;
}

// The room's steps regrouped into FlashAttention-2's three launches. Kernel 0 (its
// flash_bwd_dot_do_o kernel): one CTA per row block computes D_i (line 4) and clears the fp32 dQ
// accumulator (line 3). Kernel 1: one CTA per K_j, V_j (lines 5 to 18), grid order j; its dQ_i
// read and write are fp32 atomic adds through the L2, counted as a read and a write of the dQ_i
// tile in fp32 and marked as a reduction (TileAccess::reduction). Kernel 2: one CTA per row block converts dQ to the dtype. Each access carries what
// the paper's count charges for it (the dtype's bytes for dQ, nothing for the conversion), so with
// the L2 off DRAM traffic is the room's count exactly.
class Launches final : public StepSink {
public:
  Launches(std::vector<KernelPlan>& plans, const AttentionProblem& p, const BlockGrid& g, std::int64_t sector)
      : g_(g), main_plan_(plans[1]), d_kernel_(plans[0], p, g.Tc, sector), main_(plans[1], p, g.Tc, sector),
        convert_(plans[2], p, g.Tc, sector), dQ_init_(static_cast<std::size_t>(g.Tr)) {}

  void on_step(const Step& s) override {
    if (s.kind == StepKind::skip) return;
    if (s.line == 3) {  // dQ ← 0: the D kernel's CTA of that row block clears it
      dQ_init_[s.i] = s;
    } else if (s.line == 4) {
      if (s.kind == StepKind::load && s.tensor == Tensor::O) d_kernel_.begin_program();
      feed(d_kernel_, s);
      if (s.kind == StepKind::store) feed(d_kernel_, dQ_init_[s.i]);  // after D_i, dQaccum_i ← 0
    } else {
      if (s.j >= 0 && s.j != j_) {  // a new K/V block: its own CTA
        j_ = s.j;
        main_.begin_program();
        worked_ = false;
      }
      feed(main_, s);
      if (s.tensor == Tensor::dQ && s.kind != StepKind::compute) main_plan_.accesses.back().reduction = true;
    }
  }

  // Kernel 2: dQ_i read from the fp32 accumulator and written in the dtype (keyed apart from the
  // accumulator's tiles). Neither is in the paper's count.
  void finish() {
    for (std::int64_t i = 0; i < g_.Tr; ++i) {
      convert_.begin_program();
      Step acc = dQ_init_[i];
      acc.kind = StepKind::load;
      acc.bytes = acc.rows * acc.cols * kStatBytes;
      convert_.access(acc, 0);  // a cast, no arithmetic the count charges: its time is the bytes'
      Step out = dQ_init_[i];
      out.i = static_cast<std::int32_t>(g_.Tr + i);
      convert_.access(out, 0);
    }
  }

private:
  // As PlanBuilder::on_step (a load after compute or a store opens a phase), with dQ in fp32.
  void feed(PlanBuilder& b, const Step& s) {
    if (s.kind == StepKind::load && worked_) {
      b.begin_phase();
      worked_ = false;
    }
    if (s.kind == StepKind::compute) {
      b.compute(s);
      worked_ = true;
      return;
    }
    if (s.tensor == Tensor::dQ) {
      Step fp32 = s;
      fp32.bytes = s.rows * s.cols * kStatBytes;
      b.access(fp32, s.bytes);
    } else {
      b.access(s, s.bytes);
    }
    if (s.kind == StepKind::store) worked_ = true;
  }

  const BlockGrid& g_;
  KernelPlan& main_plan_;
  PlanBuilder d_kernel_, main_, convert_;
  std::vector<Step> dQ_init_;
  std::int64_t j_ = -1;
  bool worked_ = false;
};

class Flash2Backward final : public TiledBackward {
public:
  // [SECTION] Identity, blocks and SRAM

  std::string_view name() const override { return "flash2"; }
  std::string_view display_name() const override { return "flash2 backward"; }
  std::string_view paper_name() const override {
    return "FlashAttention-2 backward (FlashAttention-2 paper, Algorithm 2)";
  }
  // PyTorch's FlashAttention-2 backward: D = rowsum(dO ∘ O), the main loop over K_j, V_j
  // (Flash_bwd_kernel_traits<d, Br, Bc, warps, ...>) and the dQ conversion.
  std::span<const std::string_view> external_kernels() const override {
    static constexpr std::string_view kernels[] = {"flash_bwd_dq_dk_dv_loop", "flash_bwd_dot_do_o",
                                                   "flash_bwd_convert_dq"};
    return kernels;
  }

  // More than the forward holds: K_j, V_j and the accumulators dK_j, dV_j (Bc×d each, line 7), and
  // Q_i, dO_i, dQ_i (Br×d each, line 9) in the problem dtype; L_i, D_i (line 9) in fp32. No O_i: D
  // replaces it. S_ij, P_ij, dP_ij and dS_ij stay in registers.
  std::int64_t working_set_bytes(const AttentionProblem& p, Blocks b) const override {
    return p.elem_bytes() * (4 * b.Bc * p.head_dim + 3 * b.Br * p.head_dim) + kStatBytes * 2 * b.Br;
  }

  // [SECTION] Steps (lines 3 to 18)

  void emit(const AttentionProblem& p, Blocks b, StepSink& sink) const override {
    Emitter e(p, b, sink);
    const BlockGrid& g = e.grid;
    const std::int64_t d = e.d();
    for (std::int64_t i = 0; i < g.Tr; ++i) e.store(Tensor::dQ, i, -1, 3);  // line 3: dQ ← 0 in HBM
    for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 4: D = rowsum(dO ∘ O), written to HBM
      e.load(Tensor::O, i, -1, 4);
      e.load(Tensor::dO, i, -1, 4);
      e.compute(FlopKind::non_matmul, Tensor::D, i, -1, 4, 2 * g.rows(i) * d);
      e.store(Tensor::D, i, -1, 4);
    }
    for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 5
      if (column_kept(g, j)) {                 // a column the block mask empties is never loaded
        e.load(Tensor::K, -1, j, 6);           // line 6: load K_j, V_j; line 7: dK_j, dV_j ← 0 on chip
        e.load(Tensor::V, -1, j, 6);
      }
      const std::int64_t c = g.cols(j);
      for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 8
        if (g.skipped(i, j)) {
          e.skip(i, j, 8);
          continue;
        }
        const std::int64_t r = g.rows(i);
        for (Tensor t : {Tensor::Q, Tensor::dO, Tensor::dQ, Tensor::lse, Tensor::D})
          e.load(t, i, -1, 9);  // line 9: load Q_i, dO_i, dQ_i, L_i, D_i (not O_i: D replaces it)
        e.compute(FlopKind::matmul, Tensor::S, i, j, 10, 2 * r * c * d, (r + c) * d);  // line 10: S_ij = Q_i K_jᵀ
        e.compute(FlopKind::non_matmul, Tensor::P, i, j, 11, kRecomputeOps * r * c);    // line 11: P_ij
        e.compute(FlopKind::matmul, Tensor::dV, i, j, 12, 2 * r * c * d, r * d);        // line 12: dV_j += P_ijᵀ dO_i
        e.compute(FlopKind::matmul, Tensor::dP, i, j, 13, 2 * r * c * d, (r + c) * d);  // line 13: dP_ij = dO_i V_jᵀ
        e.compute(FlopKind::non_matmul, Tensor::dS, i, j, 14, kDsOps * r * c);          // line 14: dS_ij
        e.compute(FlopKind::matmul, Tensor::dQ, i, j, 15, 2 * r * c * d, c * d);        // line 15: dQ_i += dS_ij K_j
        e.store(Tensor::dQ, i, -1, 15);                                                 //          written back
        e.compute(FlopKind::matmul, Tensor::dK, i, j, 16, 2 * r * c * d, r * d);        // line 16: dK_j += dS_ijᵀ Q_i
      }
      e.store(Tensor::dK, -1, j, 18);  // line 18: write dK_j, dV_j
      e.store(Tensor::dV, -1, j, 18);
    }
  }

  std::string narrate(const Step& s) const override { return narrate_backward(s, 3, 7, "dK", "dV"); }

  // [SECTION] Closed form
  //
  // docs/design.md#backward: O and dO read once (N·d) for D, D written (N, fp32), dQ ← 0 written (N·d);
  // per visited pair Q_i, dO_i, dQ_i, L_i, D_i read and dQ_i written (Tc·N·d and Tc·N without a
  // mask); K, V read and dK, dV written once (N·d). Causal and block masks as in flash1's backward.
  Counts closed_form(const AttentionProblem& p, Blocks b) const override {
    const std::int64_t N = p.seq_len, d = p.head_dim, e = p.elem_bytes();
    const Visits v = visits(BlockGrid(p, b));
    const std::int64_t visited_rows = v.rows, kv_rows = v.kv_rows;
    Counts c;
    c.matmul_flops = 10 * v.scores * d;  // five matmuls per kept pair
    add_traffic(c, Tensor::O, N * d, 0, e);
    add_traffic(c, Tensor::dO, N * d + visited_rows * d, 0, e);
    add_traffic(c, Tensor::D, visited_rows, N, kStatBytes);
    add_traffic(c, Tensor::dQ, visited_rows * d, N * d + visited_rows * d, e);
    add_traffic(c, Tensor::Q, visited_rows * d, 0, e);
    add_traffic(c, Tensor::lse, visited_rows, 0, kStatBytes);
    add_traffic(c, Tensor::K, kv_rows * d, 0, e);
    add_traffic(c, Tensor::V, kv_rows * d, 0, e);
    add_traffic(c, Tensor::dK, 0, N * d, e);
    add_traffic(c, Tensor::dV, 0, N * d, e);
    return c;
  }

  // [SECTION] Numerics

  TiledResult run_tiled(Precision precision, const Inputs& in, const BlockGrid& g,
                        const TiledOptions& options) const override {
    return tiled::in_precision(precision, [&](auto zero) {
      using T = decltype(zero);
      const tiled::Tiles<T> t(in);
      const std::vector<std::int64_t> rows = tiled::rows_to_compute(in, options);
      const tiled::ForwardRows<T> hbm_fwd = tiled::forward_rows(t, rows, g);  // O and L from the forward
      tiled::GradientTiles<T> hbm(t);                                                // line 3: dQ ← 0
      std::vector<T> hbm_D(static_cast<std::size_t>(t.Nq), T(0));
      for (std::int64_t q : rows) hbm_D[q] = tiled::rowsum_dO_O(t, hbm_fwd, q);  // line 4: D, once
      const auto by_block = tiled::rows_by_block(g, rows);
      std::vector<T> P_row;
      for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 5; dK_j, dV_j accumulate in their own rows
        const std::int64_t c0 = g.col_begin(j);
        for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 8
          if (g.skipped(i, j)) continue;
          for (std::int64_t q : by_block[i]) {
            t.scores(q, c0, g.cols(j), g.causal, P_row);  // line 10 (masked: −∞)
            const bool saw_keys = hbm_fwd.l[q] > 0;       // else L_i = −∞: the row has no softmax at all
            for (T& x : P_row) x = saw_keys ? tiled::exp_diff(x, hbm_fwd.L[q]) : T(0);  // line 11
            hbm.add_block(t, q, c0, P_row, hbm_D[q]);  // lines 12 to 16
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

  // [SECTION] Launch plan: D kernel, one CTA per K_j, V_j, dQ conversion
  //
  // As FlashAttention-2 launches its backward (Launches above). The paper's count and the launch
  // differ in the fp32 dQ accumulator (twice the bytes for fp16/bf16, and the conversion kernel's
  // read and write), which paper_bytes leaves out: `--no-l2` gives the count, the L2 model the rest.
  // gpu/flash2_backward.cu launches these three kernels in this grid order; with
  // LaunchOverride::hbmlab_kernels its D and conversion kernels hold no shared memory (each thread
  // streams its 16-byte chunks through registers), and the main kernel takes the recorded launch.
  std::vector<KernelPlan> plan_kernels(const AttentionProblem& p, Blocks b, const GpuSpec& gpu,
                                       const EngineOptions& options) const override {
    const BlockGrid g(p, b);
    const std::int64_t d = p.head_dim, e = p.elem_bytes();
    std::vector<KernelPlan> plans(3);
    KernelPlan& dot = plans[0];
    dot.name = "D = rowsum(dO ∘ O)";
    dot.overlap = "streaming: each CTA reads O_i and dO_i, writes D_i and clears its fp32 dQ_i";
    dot.double_buffered = false;
    dot.smem_bytes_per_cta = 2 * b.Br * d * e;
    KernelPlan& main = plans[1];
    main.name = "flash2 backward";
    main.overlap = "double-buffered: Q_i+1, dO_i+1 load while block (i, j) computes (FlashAttention-2 prefetches "
                   "with cp.async); dQ_i added with fp32 atomics in the L2";
    main.double_buffered = true;
    main.smem_bytes_per_cta = working_set_bytes(p, b);
    KernelPlan& convert = plans[2];
    convert.name = fmt::format("dQ fp32 → {}", to_string(p.dtype));
    convert.overlap = "streaming: each CTA converts one dQ_i";
    convert.double_buffered = false;
    convert.smem_bytes_per_cta = b.Br * d * kStatBytes;
    if (options.launch.hbmlab_kernels) dot.smem_bytes_per_cta = convert.smem_bytes_per_cta = 0;
    Launches launches(plans, p, g, gpu.l2_sector_bytes);
    emit(p, b, launches);
    launches.finish();
    apply_launch(main, options.launch);
    // How the warps add their dQ_i into the accumulator: gpu/flash2_backward.cu adds each thread's
    // MMA fragment as float2 (a warp instruction covers 8 rows, 32 bytes of each: one sector per
    // request); FlashAttention-2 adds one float a thread, 32 threads along a row (a 128-byte line).
    main.reduction_requests = options.launch.hbmlab_kernels ? ReductionRequests::sectors : ReductionRequests::lines;
    for (KernelPlan& k : plans) k.instances = p.instances();
    // The main kernel's warp layout: gpu/flash2_backward.cu's, or FA2's (8 warps, and its dQ
    // conversion through shared memory). Both D kernels, and hbmlab's conversion, use registers only
    // (ncu counts no shared-memory wavefront in either D kernel: assets/measurements/h100-onchip-backward-ncu.csv).
    dot.on_chip = registers_only_kernel("a thread per 16-byte chunk of O_i and dO_i, shuffles across a row: no shared memory");
    if (e == 2 && options.launch.hbmlab_kernels) {
      main.on_chip = hbmlab_backward_kernel(main, {.Br = b.Br, .Bc = b.Bc, .d = d});
      convert.on_chip = registers_only_kernel("a thread per 8 elements of dQ, fp32 in, the dtype out: no shared memory");
    } else if (e == 2) {
      const std::int64_t warps = options.launch.threads_per_cta ? *options.launch.threads_per_cta / 32 : 8;
      main.on_chip = fa2_backward_kernel(main, Fa2BackwardLayout::for_blocks(b.Br, b.Bc, d, warps));
      convert.on_chip = fa2_convert_dq_kernel(convert, b.Br, d, e);
    }
    return plans;
  }

  std::int64_t roofline_ctas_per_instance(const BlockGrid& g) const override { return g.Tc; }
  std::span<const KernelTile> hbmlab_kernel_tiles() const override {  // gpu/flash2_backward.cu
    return kernel_tiles::flash2_backward;
  }

  std::optional<ForwardState> forward_state(const AttentionProblem& p) const override {
    return kept_by_forward(p, "O, L", 1);
  }

  // [SECTION] The window

  const WindowTraits& window() const override {
    static const WindowTraits traits{
        .label = "flash2 backward (FA-2 Alg. 2)",
        .colour = {80, 180, 95},
        .partner = "flash1",
        .running_softmax = false,
        .row_softmax_line = 11,
        .softmax_note = "The backward keeps no running max: line 11 recomputes P_ij = exp(S_ij − L_i) from the "
                        "log-sum-exp L = m + log ℓ that the forward left in HBM, one number per row.",
        .visit_order = "visit order: down each column (K_j, V_j outer, one CTA each; Q_i inner)",
        .sram_note = kRecomputeNote,
        .ready_note = kReadyNote,
        .cta_per_col_block = true,
    };
    return traits;
  }

  void on_chip(const Step& s, const Step*, const AttentionProblem&, Sram& sram) const override {
    // A new CTA: the D kernel's for each O_i (line 4), the main kernel's for each K_j (line 6).
    if (s.kind == StepKind::load && (s.tensor == Tensor::K || (s.line == 4 && s.tensor == Tensor::O))) sram.clear();
    if (s.kind == StepKind::load || s.kind == StepKind::store) sram.put(Tile::of(s));
    if (s.kind == StepKind::load && s.tensor == Tensor::V)  // line 7: dK_j, dV_j ← 0 beside K_j, V_j
      for (Tensor t : {Tensor::dK, Tensor::dV}) sram.put({t, -1, s.j, s.row0, s.rows, 0, s.cols, s.bytes});
    if (s.kind == StepKind::compute && s.tensor == Tensor::D)  // line 4: D_i on chip
      sram.put({Tensor::D, s.i, -1, s.row0, s.rows, 0, 1, s.rows * kStatBytes});
  }

protected:
  std::string compute_text(const Step& s) const override {
    const int i = s.i + 1, j = s.j + 1;
    switch (s.line) {
      case 4: return fmt::format("D_{0} = rowsum(dO_{0} ∘ O_{0})", i);
      case 10: return fmt::format("S_{},{} = Q_{} K_{}ᵀ on chip (recomputed)", i, j, i, j);
      case 11: return fmt::format("P_{0},{1} = exp(S_{0},{1} − L_{0}) on chip", i, j);
      case 12: return fmt::format("dV_{} += P_{},{}ᵀ dO_{} on chip", j, i, j, i);
      case 13: return fmt::format("dP_{},{} = dO_{} V_{}ᵀ on chip", i, j, i, j);
      case 14: return fmt::format("dS_{0},{1} = P_{0},{1} ∘ (dP_{0},{1} − D_{0}) on chip", i, j);
      case 15: return fmt::format("dQ_{0} ← dQ_{0} + dS_{0},{1} K_{1}", i, j);
      default: return fmt::format("dK_{} += dS_{},{}ᵀ Q_{} on chip", j, i, j, i);
    }
  }
};

}  // namespace

const Algorithm& flash2_backward_room() {
  static const Flash2Backward room;
  return room;
}

}  // namespace hbmlab
