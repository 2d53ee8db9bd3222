// standard: standard attention, the FlashAttention paper's Algorithm 0. S = QKᵀ is written to HBM,
// read back for P = softmax(S), which is written and read back for O = PV: Θ(Nd + N²) accesses.
// Run: hbmlab simulate --algo standard
//
// [SECTION] Identity, blocks and SRAM
// [SECTION] Steps (lines 1 to 3)
// [SECTION] Closed form and bound
// [SECTION] Numerics
// [SECTION] Launch plan: three kernels
// [SECTION] The window
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "sim/algo/algorithm.hpp"
#include "sim/algo/emitter.hpp"
#include "sim/algo/library_gemm.hpp"
#include "sim/common/error.hpp"
#include "sim/numerics/tiles.hpp"

namespace hbmlab {
namespace {

class Standard final : public Algorithm {
public:
  // [SECTION] Identity, blocks and SRAM

  std::string_view name() const override { return "standard"; }
  std::string_view paper_name() const override { return "standard attention (FlashAttention paper, Algorithm 0)"; }

  // One GEMM tile set: Q_i and K_j with S_ij (or P_ij, V_j and O_i).
  std::int64_t working_set_bytes(const AttentionProblem& p, Blocks b) const override {
    const std::int64_t d = p.head_dim;
    return p.elem_bytes() * std::max(b.Br * d + b.Bc * d + b.Br * b.Bc, b.Br * b.Bc + b.Bc * d + b.Br * d);
  }

  // The paper's rule (Algorithm 1, line 1): Bc = ⌈M/(4d)⌉, Br = min(Bc, d), clamped to N.
  Blocks paper_blocks(std::int64_t M, std::int64_t d, std::int64_t N) const override {
    const PaperRule r = paper_rule(M, d, N);
    return {r.small, r.big};
  }

  // [SECTION] Steps (lines 1 to 3)
  //
  // The paper's model reads each of Q, K, V once (Θ(Nd + N²)), so K_j and V_j are loaded during
  // the first row block only and later row blocks reuse them. Causal masking does not shrink it:
  // S and P stay N × N.
  void emit(const AttentionProblem& p, Blocks b, StepSink& sink) const override {
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

  // [SECTION] Closed form and bound

  // 4Nd + 4N² elements, causal or not. With NQ query rows: Q and O NQ·d, K and V N·d, S and P NQ × N.
  Counts closed_form(const AttentionProblem& p, Blocks) const override {
    const std::int64_t N = p.seq_len, Nq = p.Nq(), d = p.head_dim, e = p.elem_bytes();
    Counts c;
    add_traffic(c, Tensor::Q, Nq * d, 0, e);
    add_traffic(c, Tensor::K, N * d, 0, e);
    add_traffic(c, Tensor::S, Nq * N, Nq * N, e);
    add_traffic(c, Tensor::P, Nq * N, Nq * N, e);
    add_traffic(c, Tensor::V, N * d, 0, e);
    add_traffic(c, Tensor::O, 0, Nq * d, e);
    c.matmul_flops = 4 * Nq * N * d;
    return c;
  }

  // Line 2 takes e^x once per score; nothing is rescaled; three kernels.
  NonMatmulOps non_matmul_ops(const AttentionProblem& p, Blocks) const override {
    return {p.Nq() * p.seq_len, 0, 0, 3, "no running max: the whole row of S goes through HBM and back"};
  }

  Bound bound(const AttentionProblem& p, std::int64_t) const override { return materialised_bound(p); }
  double expected_exponent(SweepAxis axis) const override { return axis == SweepAxis::N ? 2.0 : 0.0; }

  // [SECTION] Numerics

  TiledResult run_tiled(Precision precision, const Inputs& in, const BlockGrid& g,
                        const TiledOptions& options) const override {
    return tiled::in_precision(precision, [&](auto zero) {
      using T = decltype(zero);
      const tiled::Tiles<T> t(in);
      TiledResult result = tiled::empty_result(in);
      std::vector<T> s, block;
      for (std::int64_t q : tiled::rows_to_compute(in, options)) {
        s.clear();
        for (std::int64_t j = 0; j < g.Tc; ++j) {  // line 1: S row, block by block
          t.scores(q, g.col_begin(j), g.cols(j), g.causal, block);
          s.insert(s.end(), block.begin(), block.end());
        }
        T mx = -std::numeric_limits<T>::infinity();  // line 2: P = softmax(S)
        for (T x : s) mx = std::max(mx, x);
        T sum = 0;
        for (T& x : s) sum += (x = tiled::exp_diff(x, mx));
        for (T& x : s) x /= sum;
        std::vector<T> o(static_cast<std::size_t>(t.d), T(0));  // line 3: O = PV
        t.add_pv(s, 0, o);
        for (std::int64_t x = 0; x < t.d; ++x) result.O(q, x) = o[x];
      }
      return result;
    });
  }

  // [SECTION] Launch plan: three kernels
  //
  // Algorithm 0 as a library would run it: a batched GEMM for S = QKᵀ with 128 × 128 CTA tiles, a
  // row softmax, and a GEMM for O = PV. A GEMM CTA reads its Q_i and K_j tiles whatever other CTAs
  // read: the L2 catches the re-reads. The paper's model counts each of Q, K, V once, so those
  // re-reads carry paper_bytes = 0 and the L2-off mode recovers the count. With
  // LaunchOverride::hbmlab_kernels, gpu/standard.cu as written: 4-warp WMMA CTAs with the recorded
  // Br × Bc tiles, and a softmax CTA per row of S.
  std::vector<KernelPlan> plan_kernels(const AttentionProblem& p, Blocks chosen, const GpuSpec& gpu,
                                       const EngineOptions& options) const override {
    const bool hbmlab_kernels = options.launch.hbmlab_kernels;
    const Blocks t = hbmlab_kernels ? chosen : library_tiles(*this, p, chosen, gpu, options);
    AttentionProblem full = p;  // S and P stay NQ × N even when causal (docs/design.md#standard-attention)
    full.causal = false;
    full.block_mask.reset();
    const BlockGrid g(full, t);
    const std::int64_t d = p.head_dim, e = p.elem_bytes();
    const std::int64_t sector = gpu.l2_sector_bytes;
    const LibraryTiles tiles{g, d, e};
    auto tile_step = [&](StepKind kind, Tensor tensor, std::int64_t i, std::int64_t j) { return tiles.tile(kind, tensor, i, j); };
    auto flops = [&](FlopKind kind, std::int64_t n, std::int64_t sram_elems) { return tiles.flops(kind, n, sram_elems); };
    std::vector<KernelPlan> plans(3);

    KernelPlan& qk = plans[0];
    library_gemm(qk, "GEMM S = QKᵀ", working_set_bytes(p, t));
    PlanBuilder b1(qk, p, g.Tc, sector);
    for (std::int64_t i = 0; i < g.Tr; ++i)
      for (std::int64_t j = 0; j < g.Tc; ++j) {  // blockIdx.x over the columns of S
        b1.begin_program();
        const Step q = tile_step(StepKind::load, Tensor::Q, i, j), kt = tile_step(StepKind::load, Tensor::K, i, j);
        b1.access(q, j == 0 ? q.bytes : 0);
        b1.access(kt, i == 0 ? kt.bytes : 0);
        b1.compute(flops(FlopKind::matmul, 2 * g.rows(i) * g.cols(j) * d, (g.rows(i) + g.cols(j)) * d));
        b1.access(tile_step(StepKind::store, Tensor::S, i, j), g.rows(i) * g.cols(j) * e);
      }

    KernelPlan& sm = plans[1];
    sm.name = "softmax P = softmax(S)";
    sm.overlap = "streaming: the next S tile loads while this one is exponentiated";
    sm.smem_bytes_per_cta = t.Br * t.Bc * e;
    sm.threads_per_cta = kLibraryThreads;
    PlanBuilder b2(sm, p, g.Tc, sector);
    for (std::int64_t i = 0; i < g.Tr; ++i) {
      b2.begin_program();
      for (std::int64_t j = 0; j < g.Tc; ++j) {
        b2.begin_phase();
        const Step s = tile_step(StepKind::load, Tensor::S, i, j), pt = tile_step(StepKind::store, Tensor::P, i, j);
        b2.access(s, s.bytes);
        b2.compute(flops(FlopKind::non_matmul, kSoftmaxOps * g.rows(i) * g.cols(j), 0));  // as line 2 counts
        b2.access(pt, pt.bytes);
      }
    }

    KernelPlan& pv = plans[2];
    library_gemm(pv, "GEMM O = PV", e * (t.Br * t.Bc + t.Bc * d + t.Br * d),
                 "double-buffered GEMM main loop over the blocks P_ij, V_j");
    PlanBuilder b3(pv, p, g.Tc, sector);
    for (std::int64_t i = 0; i < g.Tr; ++i) {
      b3.begin_program();
      for (std::int64_t j = 0; j < g.Tc; ++j) {
        b3.begin_phase();
        const Step pt = tile_step(StepKind::load, Tensor::P, i, j), v = tile_step(StepKind::load, Tensor::V, i, j);
        b3.access(pt, pt.bytes);
        b3.access(v, i == 0 ? v.bytes : 0);
        b3.compute(flops(FlopKind::matmul, 2 * g.rows(i) * g.cols(j) * d, g.rows(i) * g.cols(j) + g.cols(j) * d));
      }
      const Step o = tile_step(StepKind::store, Tensor::O, i, -1);
      b3.access(o, o.bytes);
    }
    for (KernelPlan& k : plans) {
      k.instances = p.instances();
      k.kv_group = p.heads / p.Hkv();
    }
    if (!hbmlab_kernels) return plans;

    // gpu/standard.cu: 4-warp WMMA CTAs, one Br × Bc tile of S or Br × d of O each. Its rows are
    // copied 16 bytes at a time and multiplied 16 columns at a time: d a multiple of 16, which every
    // d it is compiled for is (simulate() and validate refuse any other d first).
    static_assert([] {
      for (const KernelTile& k : kernel_tiles::standard)
        if (k.d % 16 != 0) return false;
      return true;
    }());
    // Its softmax_kernel holds a row of S in fp32 in shared memory: N bounds it, not the blocks
    // (kernel_takes::standard; simulate() and the commands ask first, a record meets it here).
    const std::int64_t cta_bytes = options.sram_bytes_per_block_of(gpu);
    if (const std::optional<KernelMiss> miss = hbmlab_kernel_miss(p, cta_bytes))
      fail_input("--hbmlab-kernels: standard's CUDA kernel in gpu/ {}", miss->refusal);
    constexpr std::int64_t kPad = 8;
    qk.name = "qk_kernel S = QKᵀ";
    qk.overlap = "none inside a CTA: Q_i, K_j load, the tile is computed, S_ij is stored; CTAs on an SM run in step";
    qk.library_gemm = false;
    qk.double_buffered = false;
    qk.threads_per_cta = 128;
    // Its copy loops keep four 16-byte loads a thread in flight (the SASS: 4 LDG.128, then their 4
    // STS.128), Q_i's rows and then K_j's: a round trip per 8 KiB of the CTA's 128 threads. Its CTAs
    // are alike and start together, so they run in step (docs/design.md, "CTAs in step").
    qk.bytes_in_flight_per_cta = 128 * 4 * 16;
    qk.ctas_in_step = true;
    qk.global_via_registers = true;
    qk.smem_bytes_per_cta = std::max((t.Br + t.Bc) * (d + kPad) * e, t.Br * (t.Bc + 4) * 4);
    pv.name = "pv_kernel O = PV";
    pv.overlap = "double-buffered: cp.async fetches P_i,j+1 and V_j+1 during the MMAs on P_ij, V_j";
    pv.library_gemm = false;
    pv.threads_per_cta = 128;
    pv.smem_bytes_per_cta = std::max(2 * (t.Br * (t.Bc + kPad) + t.Bc * (d + kPad)) * e, t.Br * (d + 4) * 4);
    // softmax_kernel: one CTA per row of S. The row comes in as one 16-byte vector per thread (up to
    // 4 in flight), then two block-wide reductions (max, sum) with their barriers, then P goes out.
    // Its row is a row of each of S_i's tiles as qk_kernel stored them, and of P_i's as pv_kernel
    // loads them (TileAccess::slice_rows), so the L2 carries S and P from kernel to kernel; where S is
    // over four times the L2, none of it survives to the softmax and a key of its own for each row is
    // as exact, at a Tc-th of the lookups.
    const bool slices = p.instances() * p.Nq() * p.seq_len * e <= 4 * gpu.l2_effective_bytes &&
                        std::max(t.Br, t.Bc * e) <= std::numeric_limits<std::int16_t>::max();  // TileAccess's fields
    sm = KernelPlan{};
    sm.name = "softmax_kernel P = softmax(S)";
    sm.overlap = "none inside a CTA: the row loads, is reduced twice, P is stored; CTAs on an SM run in step";
    sm.double_buffered = false;
    sm.instances = p.instances();
    sm.kv_group = p.heads / p.Hkv();
    const std::int64_t threads = std::min<std::int64_t>(256, std::max<std::int64_t>(64, (p.seq_len / 8 + 31) / 32 * 32));
    sm.threads_per_cta = threads;
    sm.smem_bytes_per_cta = p.seq_len * 4;
    sm.bytes_in_flight_per_cta = threads * 16 * 4;
    sm.ctas_in_step = true;
    sm.holds_gpu_clock = true;
    sm.global_via_registers = true;
    PlanBuilder rows(sm, p, g.Tc, sector);
    for (std::int64_t r = 0; r < p.Nq(); ++r) {
      rows.begin_program();
      rows.begin_phase();
      for (Tensor tensor : {Tensor::S, Tensor::P}) {
        Step row;
        row.kind = tensor == Tensor::S ? StepKind::load : StepKind::store;
        row.tensor = tensor;
        row.i = static_cast<std::int32_t>(slices ? r / t.Br : g.Tr + r);  // own row keys follow the tile keys
        row.j = 0;
        row.rows = 1;
        row.cols = p.seq_len;
        row.bytes = p.seq_len * e;
        rows.access(row, row.bytes);
        if (slices) {
          TileAccess& a = sm.accesses.back();
          a.slice_row = static_cast<std::int16_t>(r % t.Br);
          a.slice_rows = static_cast<std::int16_t>(g.rows(r / t.Br));
          a.slice_col_bytes = static_cast<std::int16_t>(t.Bc * e);
        }
        if (tensor == Tensor::S) rows.compute(flops(FlopKind::non_matmul, kSoftmaxOps * p.seq_len, 0));
      }
    }
    // Their warp layouts (sim/algo/warp_layout.hpp), for the self-attention shapes the kernels run
    // (NQ = N, a multiple of 8: the 16-byte paths) in 16-bit dtypes.
    // Only for tiles a CTA holds: the engine refuses the others, and counting a tile set of
    // millions of columns first would take minutes (a measurement record may give any Bc).
    const bool fits = qk.smem_bytes_per_cta <= cta_bytes && pv.smem_bytes_per_cta <= cta_bytes;
    if (e == 2 && p.Nq() == p.seq_len && p.seq_len % 8 == 0 && fits) {
      const StandardLayout layout{.N = p.seq_len, .Br = t.Br, .Bc = t.Bc, .d = d, .elem_bytes = e};
      qk.on_chip = standard_qk_kernel(qk, layout);
      sm.on_chip = standard_softmax_kernel(sm, layout);
      pv.on_chip = standard_pv_kernel(pv, layout);
    }
    return plans;
  }

  // Its largest kernel, S = QKᵀ, has one CTA per tile of S.
  std::int64_t roofline_ctas_per_instance(const BlockGrid& g) const override { return g.Tr * g.Tc; }
  bool takes_launch() const override { return false; }  // its GEMMs' tiles and threads are the library's
  // gpu/standard.cu. Its default, 64 × 64 at d = 64 and 128, matters most here: the paper's rule gives
  // a Bc of hundreds of columns, whose double-buffered P_ij, V_j tiles (pv_kernel) no CTA holds.
  std::span<const KernelTile> hbmlab_kernel_tiles() const override { return kernel_tiles::standard; }
  KernelTakes hbmlab_kernel_takes() const override { return kernel_takes::standard; }
  // NQ < N: S and P are NQ × N. HKV < H: each query head reads its K/V head's K and V itself.
  ShapeSupport supports() const override { return {.query_len = true, .kv_heads = true}; }

  // [SECTION] The window

  const WindowTraits& window() const override {
    static const WindowTraits traits{
        .label = "standard (Alg. 0)",
        .colour = {230, 90, 80},
        .partner = "flash1",
        .scores_in_hbm = true,
        .running_softmax = false,
        .row_softmax_line = 2,
        .softmax_note = "Standard attention does not keep a running max: line 2 reads the whole row of S back "
                        "from HBM and takes its softmax at once.",
        .visit_order = "",
        .sram_note = "S_ij, P_ij and O_i are staged in SRAM; S and P go back to HBM.",
        .cta_per_row_block = false,
    };
    return traits;
  }

  // Three kernels (lines 1, 2, 3): nothing stays on chip from one to the next.
  void on_chip(const Step& s, const Step* prev, const AttentionProblem& p, Sram& sram) const override {
    if (prev && prev->line != s.line) sram.clear();
    if (s.kind == StepKind::load || s.kind == StepKind::store) sram.put(Tile::of(s));
    if (s.kind == StepKind::store && s.tensor == Tensor::P) sram.drop(Tensor::S);  // S_ij consumed
    if (s.kind == StepKind::compute && s.line == 1) {  // S_ij = Q_i K_jᵀ in SRAM
      Tile t = Tile::of(s);
      t.bytes = t.rows * t.cols * p.elem_bytes();
      sram.put(t);
    }
    if (s.kind == StepKind::compute && s.line == 3)  // O_i accumulates on chip
      sram.put({Tensor::O, s.i, -1, s.row0, s.rows, 0, p.head_dim, s.rows * p.head_dim * p.elem_bytes()});
  }

protected:
  std::string compute_text(const Step& s) const override {
    const int i = s.i + 1, j = s.j + 1;
    if (s.line == 1) return fmt::format("S_{},{} = Q_{} K_{}ᵀ", i, j, i, j);
    if (s.line == 2) return fmt::format("P_{} = softmax(S_{}) row by row", i, i);
    return fmt::format("O_{} += P_{},{} V_{}", i, i, j, j);
  }
};

}  // namespace

const Algorithm& standard_room() {
  static const Standard room;
  return room;
}

}  // namespace hbmlab
