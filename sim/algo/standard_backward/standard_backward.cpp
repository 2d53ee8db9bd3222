// standard backward: standard attention's backward pass, the FlashAttention paper's Algorithm 3.
// It needs the forward's P (N × N) in HBM, and the N × N matrices dP and dS each cross HBM too:
// P is read twice, dS written once and read twice. Θ(Nd + N²) accesses, causal or not.
// Run: hbmlab simulate --algo standard --pass backward
//
// [SECTION] Identity, blocks and SRAM
// [SECTION] Steps (lines 1 to 5)
// [SECTION] Closed form and bound
// [SECTION] Numerics
// [SECTION] Launch plan: five kernels
// [SECTION] The window
#include <algorithm>

#include <fmt/format.h>

#include "sim/algo/algorithm.hpp"
#include "sim/algo/emitter.hpp"
#include "sim/algo/library_gemm.hpp"
#include "sim/common/error.hpp"
#include "sim/numerics/tiles.hpp"

namespace hbmlab {
namespace {

// Line 3 per element of the row: P ∘ dP and its sum (2); then dS = P ∘ (dP − D): subtract, multiply (2).
constexpr std::int64_t kRowsumOps = 2, kDsOps = 2;

class StandardBackward final : public Algorithm {
public:
  // [SECTION] Identity, blocks and SRAM

  std::string_view name() const override { return "standard"; }
  Pass pass() const override { return Pass::backward; }
  std::string_view display_name() const override { return "standard backward"; }
  std::string_view paper_name() const override { return "standard attention backward (FlashAttention paper, Algorithm 3)"; }

  // One GEMM's tile set (lines 1, 2, 4, 5: an N × N block, a Br × d block and a Bc × d block, as
  // P_ij, dO_i, dV_j), or line 3's element-wise tiles P_ij, dP_ij, dS_ij with the row sums D_i in
  // fp32: one more N × N tile than the forward's softmax holds.
  std::int64_t working_set_bytes(const AttentionProblem& p, Blocks b) const override {
    const std::int64_t d = p.head_dim;
    return std::max(p.elem_bytes() * (b.Br * b.Bc + b.Br * d + b.Bc * d), p.elem_bytes() * 3 * b.Br * b.Bc + kStatBytes * b.Br);
  }

  // The forward's rule (Algorithm 1, line 1): Bc = ⌈M/(4d)⌉, Br = min(Bc, d), clamped to N.
  Blocks paper_blocks(std::int64_t M, std::int64_t d, std::int64_t N) const override {
    const PaperRule r = paper_rule(M, d, N);
    return {r.small, r.big};
  }

  // [SECTION] Steps (lines 1 to 5)
  //
  // As the forward's standard room, the paper's model reads each N × d input once per line (Θ(Nd +
  // N²)): a block of dO, V, K or Q loaded in the first pass over the other index is reused after.
  // S stays N × N when causal: nothing is skipped.
  void emit(const AttentionProblem& p, Blocks b, StepSink& sink) const override {
    Emitter e(p, b, sink);
    const BlockGrid& g = e.grid;
    const std::int64_t d = e.d();
    for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 1: dV = Pᵀ dO, written to HBM
      for (std::int64_t i = 0; i < g.Tr; ++i) {
        e.load(Tensor::P, i, j, 1);
        if (j == 0) e.load(Tensor::dO, i, -1, 1);
        e.compute(FlopKind::matmul, Tensor::dV, i, j, 1, 2 * g.rows(i) * g.cols(j) * d, g.rows(i) * (g.cols(j) + d));
      }
      e.store(Tensor::dV, -1, j, 1);
    }
    for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 2: dP = dO Vᵀ, written to HBM
      e.load(Tensor::dO, i, -1, 2);
      for (std::int64_t j = 0; j < g.Tc; ++j) {
        if (i == 0) e.load(Tensor::V, -1, j, 2);
        e.compute(FlopKind::matmul, Tensor::dP, i, j, 2, 2 * g.rows(i) * g.cols(j) * d, (g.rows(i) + g.cols(j)) * d);
        e.store(Tensor::dP, i, j, 2);
      }
    }
    for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 3: dS = P ∘ (dP − rowsum(P ∘ dP)), row by row
      for (std::int64_t j = 0; j < g.Tc; ++j) {
        e.load(Tensor::P, i, j, 3);
        e.load(Tensor::dP, i, j, 3);
      }
      e.compute(FlopKind::non_matmul, Tensor::D, i, -1, 3, kRowsumOps * g.rows(i) * g.N);
      for (std::int64_t j = 0; j < g.Tc; ++j) {
        e.compute(FlopKind::non_matmul, Tensor::dS, i, j, 3, kDsOps * g.rows(i) * g.cols(j));
        e.store(Tensor::dS, i, j, 3);
      }
    }
    for (std::int64_t i = 0; i < g.Tr; ++i) {  // line 4: dQ = dS K
      for (std::int64_t j = 0; j < g.Tc; ++j) {
        e.load(Tensor::dS, i, j, 4);
        if (i == 0) e.load(Tensor::K, -1, j, 4);
        e.compute(FlopKind::matmul, Tensor::dQ, i, j, 4, 2 * g.rows(i) * g.cols(j) * d, g.cols(j) * (g.rows(i) + d));
      }
      e.store(Tensor::dQ, i, -1, 4);
    }
    for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 5: dK = dSᵀ Q
      for (std::int64_t i = 0; i < g.Tr; ++i) {
        e.load(Tensor::dS, i, j, 5);
        if (j == 0) e.load(Tensor::Q, i, -1, 5);
        e.compute(FlopKind::matmul, Tensor::dK, i, j, 5, 2 * g.rows(i) * g.cols(j) * d, g.rows(i) * (g.cols(j) + d));
      }
      e.store(Tensor::dK, -1, j, 5);
    }
  }

  // [SECTION] Closed form and bound
  //
  // docs/design.md#backward: reads P 2N², dP N², dS 2N², dO 2Nd, V, K, Q Nd; writes dV, dQ, dK Nd and
  // dP, dS N². Four N × N × d matmuls (S is not recomputed: P comes from HBM). Causal or not.
  Counts closed_form(const AttentionProblem& p, Blocks) const override {
    const std::int64_t N = p.seq_len, d = p.head_dim, e = p.elem_bytes(), Nd = N * d, NN = N * N;
    Counts c;
    add_traffic(c, Tensor::P, 2 * NN, 0, e);
    add_traffic(c, Tensor::dP, NN, NN, e);
    add_traffic(c, Tensor::dS, 2 * NN, NN, e);
    add_traffic(c, Tensor::dO, 2 * Nd, 0, e);
    for (Tensor t : {Tensor::Q, Tensor::K, Tensor::V}) add_traffic(c, t, Nd, 0, e);
    for (Tensor t : {Tensor::dQ, Tensor::dK, Tensor::dV}) add_traffic(c, t, 0, Nd, e);
    c.matmul_flops = 8 * NN * d;
    return c;
  }

  Bound bound(const AttentionProblem& p, std::int64_t) const override { return materialised_bound(p); }
  double expected_exponent(SweepAxis axis) const override { return axis == SweepAxis::N ? 2.0 : 0.0; }

  // [SECTION] Numerics
  //
  // Each query row on its own (rows of P never interact): P_i as the forward stored it, then
  // Algorithm 3's lines in order, block by block over the keys.
  TiledResult run_tiled(Precision precision, const Inputs& in, const BlockGrid& g,
                        const TiledOptions& options) const override {
    return tiled::in_precision(precision, [&](auto zero) {
      using T = decltype(zero);
      const tiled::Tiles<T> t(in);
      const std::int64_t d = t.d;
      const std::vector<std::int64_t> rows = tiled::rows_to_compute(in, options);
      const tiled::ForwardRows<T> fwd = tiled::forward_rows(t, rows, g);
      tiled::GradientTiles<T> hbm(t);
      std::vector<T> P, dP, block;
      for (std::int64_t q : rows) {
        P.clear();  // the forward's row of P, from HBM
        for (std::int64_t j = 0; j < g.Tc; ++j) {
          t.scores(q, g.col_begin(j), g.cols(j), g.causal, block);
          for (T x : block) P.push_back(fwd.l[q] > 0 ? tiled::exp_diff(x, fwd.m[q]) / fwd.l[q] : T(0));
        }
        const T* dO_q = &t.dO[q * d];
        for (std::int64_t k = 0; k < t.N; ++k)  // line 1: dV += P_qᵀ dO_q
          for (std::int64_t x = 0; x < d; ++x) hbm.dV[k * d + x] += P[k] * dO_q[x];
        dP.assign(static_cast<std::size_t>(t.N), T(0));  // line 2: dP_q = dO_q Vᵀ
        for (std::int64_t k = 0; k < t.N; ++k)
          for (std::int64_t x = 0; x < d; ++x) dP[k] += dO_q[x] * t.V[k * d + x];
        T D = 0;  // line 3: dS_q = P_q ∘ (dP_q − Σ_l P_ql dP_ql), in place of dP
        for (std::int64_t k = 0; k < t.N; ++k) D += P[k] * dP[k];
        for (std::int64_t k = 0; k < t.N; ++k) dP[k] = P[k] * (dP[k] - D);
        for (std::int64_t k = 0; k < t.N; ++k)  // line 4: dQ_q = scale·dS_q K; line 5: dK += scale·dS_qᵀ Q_q
          for (std::int64_t x = 0; x < d; ++x) {
            hbm.dQ[q * d + x] += t.scale * dP[k] * t.K[k * d + x];
            hbm.dK[k * d + x] += t.scale * dP[k] * t.Q[q * d + x];
          }
      }
      TiledResult result = tiled::empty_result(in);
      for (std::int64_t q : rows)
        for (std::int64_t x = 0; x < d; ++x) result.O(q, x) = double(fwd.O[q * d + x]);
      result.grads = hbm.to_matrices(t);
      return result;
    });
  }

  // [SECTION] Launch plan: five kernels
  //
  // Algorithm 3 as a library would run it: GEMMs for dV = Pᵀ dO, dP = dO Vᵀ, dQ = dS K and
  // dK = dSᵀ Q with 128 × 128 tiles, and a softmax-backward kernel for line 3 (streaming tile by tile
  // as the forward's softmax kernel does, its row sums in registers). A GEMM CTA reads its operand
  // tiles whatever other CTAs read: the L2 catches the re-reads, which carry paper_bytes = 0, so the
  // L2-off mode recovers the room's count.
  std::vector<KernelPlan> plan_kernels(const AttentionProblem& p, Blocks chosen, const GpuSpec& gpu,
                                       const EngineOptions& options) const override {
    if (options.launch.hbmlab_kernels) fail_input("--hbmlab-kernels: hbmlab has no CUDA kernel for {}", display_name());
    const Blocks t = library_tiles(*this, p, chosen, gpu, options);  // NQ = N: the backward takes no --query-len
    const BlockGrid g(p.seq_len, t, false);  // S stays N × N even when causal (docs/design.md#standard-attention)
    const std::int64_t d = p.head_dim, e = p.elem_bytes(), sector = gpu.l2_sector_bytes;
    const LibraryTiles tiles{g, d, e};
    auto tile_step = [&](StepKind kind, Tensor tensor, std::int64_t i, std::int64_t j) { return tiles.tile(kind, tensor, i, j); };
    auto flops = [&](FlopKind kind, std::int64_t n, std::int64_t sram_elems) { return tiles.flops(kind, n, sram_elems); };
    auto gemm = [&](KernelPlan& k, std::string name) { library_gemm(k, std::move(name), e * (t.Br * t.Bc + t.Br * d + t.Bc * d)); };
    std::vector<KernelPlan> plans(5);

    gemm(plans[0], "GEMM dV = Pᵀ dO");  // line 1: one CTA per dV_j, over the row blocks i
    PlanBuilder b1(plans[0], p, g.Tc, sector);
    for (std::int64_t j = 0; j < g.Tc; ++j) {
      b1.begin_program();
      for (std::int64_t i = 0; i < g.Tr; ++i) {
        b1.begin_phase();
        const Step pt = tile_step(StepKind::load, Tensor::P, i, j), dO = tile_step(StepKind::load, Tensor::dO, i, j);
        b1.access(pt, pt.bytes);
        b1.access(dO, j == 0 ? dO.bytes : 0);
        b1.compute(flops(FlopKind::matmul, 2 * g.rows(i) * g.cols(j) * d, g.rows(i) * (g.cols(j) + d)));
      }
      const Step dV = tile_step(StepKind::store, Tensor::dV, -1, j);
      b1.access(dV, dV.bytes);
    }

    gemm(plans[1], "GEMM dP = dO Vᵀ");  // line 2: one CTA per tile of dP
    PlanBuilder b2(plans[1], p, g.Tc, sector);
    for (std::int64_t i = 0; i < g.Tr; ++i)
      for (std::int64_t j = 0; j < g.Tc; ++j) {
        b2.begin_program();
        const Step dO = tile_step(StepKind::load, Tensor::dO, i, j), v = tile_step(StepKind::load, Tensor::V, i, j);
        b2.access(dO, j == 0 ? dO.bytes : 0);
        b2.access(v, i == 0 ? v.bytes : 0);
        b2.compute(flops(FlopKind::matmul, 2 * g.rows(i) * g.cols(j) * d, (g.rows(i) + g.cols(j)) * d));
        const Step dP = tile_step(StepKind::store, Tensor::dP, i, j);
        b2.access(dP, dP.bytes);
      }

    KernelPlan& sm = plans[2];  // line 3: one CTA per row block of dS
    sm.name = "softmax backward dS";
    sm.overlap = "streaming: the next P, dP tiles load while this one is worked on";
    sm.smem_bytes_per_cta = 3 * t.Br * t.Bc * e;
    sm.threads_per_cta = kLibraryThreads;
    PlanBuilder b3(sm, p, g.Tc, sector);
    for (std::int64_t i = 0; i < g.Tr; ++i) {
      b3.begin_program();
      for (std::int64_t j = 0; j < g.Tc; ++j) {
        b3.begin_phase();
        const Step pt = tile_step(StepKind::load, Tensor::P, i, j), dP = tile_step(StepKind::load, Tensor::dP, i, j);
        b3.access(pt, pt.bytes);
        b3.access(dP, dP.bytes);
        b3.compute(flops(FlopKind::non_matmul, (kRowsumOps + kDsOps) * g.rows(i) * g.cols(j), 0));
        const Step dS = tile_step(StepKind::store, Tensor::dS, i, j);
        b3.access(dS, dS.bytes);
      }
    }

    gemm(plans[3], "GEMM dQ = dS K");  // line 4: one CTA per dQ_i, over the column blocks j
    PlanBuilder b4(plans[3], p, g.Tc, sector);
    for (std::int64_t i = 0; i < g.Tr; ++i) {
      b4.begin_program();
      for (std::int64_t j = 0; j < g.Tc; ++j) {
        b4.begin_phase();
        const Step dS = tile_step(StepKind::load, Tensor::dS, i, j), k = tile_step(StepKind::load, Tensor::K, i, j);
        b4.access(dS, dS.bytes);
        b4.access(k, i == 0 ? k.bytes : 0);
        b4.compute(flops(FlopKind::matmul, 2 * g.rows(i) * g.cols(j) * d, g.cols(j) * (g.rows(i) + d)));
      }
      const Step dQ = tile_step(StepKind::store, Tensor::dQ, i, -1);
      b4.access(dQ, dQ.bytes);
    }

    gemm(plans[4], "GEMM dK = dSᵀ Q");  // line 5: one CTA per dK_j, over the row blocks i
    PlanBuilder b5(plans[4], p, g.Tc, sector);
    for (std::int64_t j = 0; j < g.Tc; ++j) {
      b5.begin_program();
      for (std::int64_t i = 0; i < g.Tr; ++i) {
        b5.begin_phase();
        const Step dS = tile_step(StepKind::load, Tensor::dS, i, j), q = tile_step(StepKind::load, Tensor::Q, i, j);
        b5.access(dS, dS.bytes);
        b5.access(q, j == 0 ? q.bytes : 0);
        b5.compute(flops(FlopKind::matmul, 2 * g.rows(i) * g.cols(j) * d, g.rows(i) * (g.cols(j) + d)));
      }
      const Step dK = tile_step(StepKind::store, Tensor::dK, -1, j);
      b5.access(dK, dK.bytes);
    }
    for (KernelPlan& k : plans) k.instances = p.instances();
    return plans;
  }

  // Its largest kernel, dP = dO Vᵀ, has one CTA per tile of dP.
  std::int64_t roofline_ctas_per_instance(const BlockGrid& g) const override { return g.Tr * g.Tc; }
  bool takes_launch() const override { return false; }  // its GEMMs' tiles and threads are the library's

  std::optional<ForwardState> forward_state(const AttentionProblem& p) const override {
    const std::int64_t P_bytes = p.seq_len * p.seq_len * p.elem_bytes();
    return ForwardState{"P", P_bytes, P_bytes};
  }

  // [SECTION] The window

  const WindowTraits& window() const override {
    static const WindowTraits traits{
        .label = "standard backward (Alg. 3)",
        .colour = {180, 60, 55},
        .partner = "flash1",
        .scores_in_hbm = true,
        .running_softmax = false,
        .row_softmax_line = 0,
        .softmax_note = "the backward of standard attention takes no softmax: P comes back from HBM, where the "
                        "forward left it (N × N values per head)",
        .visit_order = "",
        .sram_note = "P_ij, dP_ij and dS_ij are staged in SRAM; all three N × N matrices go through HBM.",
        .hbm_scores = {Tensor::dP, Tensor::dS},
        .hbm_scores_titles = {"dP in HBM (line 2 writes it)", "dS in HBM (line 3 writes it)"},
        .ready_note = "ready: Q, K, V, dO and the forward's P are in HBM; nothing has moved yet",
    };
    return traits;
  }

  // Five kernels (lines 1 to 5): nothing stays on chip from one to the next. Results build up on
  // chip before their store: dV_j, dQ_i and dK_j accumulate, dP_ij and dS_ij are computed.
  void on_chip(const Step& s, const Step* prev, const AttentionProblem& p, Sram& sram) const override {
    if (prev && prev->line != s.line) sram.clear();
    if (s.kind == StepKind::load || s.kind == StepKind::store) sram.put(Tile::of(s));
    if (s.kind == StepKind::compute && s.tensor != Tensor::D) {
      Tile t = Tile::of(s);
      t.bytes = t.rows * t.cols * p.elem_bytes();
      sram.put(t);
    }
    if (s.kind == StepKind::compute && s.tensor == Tensor::D)  // line 3: the row sums D_i
      sram.put({Tensor::D, s.i, -1, s.row0, s.rows, 0, 1, s.rows * kStatBytes});
  }

protected:
  std::string compute_text(const Step& s) const override {
    const int i = s.i + 1, j = s.j + 1;
    switch (s.line) {
      case 1: return fmt::format("dV_{} += P_{},{}ᵀ dO_{}", j, i, j, i);
      case 2: return fmt::format("dP_{},{} = dO_{} V_{}ᵀ", i, j, i, j);
      case 3:
        return s.tensor == Tensor::D ? fmt::format("D_{0} = Σ_l P_{0},l dP_{0},l (row sums of P ∘ dP)", i)
                                     : fmt::format("dS_{0},{1} = P_{0},{1} ∘ (dP_{0},{1} − D_{0})", i, j);
      case 4: return fmt::format("dQ_{} += dS_{},{} K_{}", i, i, j, j);
      default: return fmt::format("dK_{} += dS_{},{}ᵀ Q_{}", j, i, j, i);
    }
  }
};

}  // namespace

const Algorithm& standard_backward_room() {
  static const StandardBackward room;
  return room;
}

}  // namespace hbmlab
