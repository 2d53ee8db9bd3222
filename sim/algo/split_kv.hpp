// What the split-KV decoding rooms share (flash-decoding, flashdecoding++): GQA-packed instances, the
// K/V cache cut into S splits, the split kernel and the combine kernel as step streams, their closed
// form, bound, numerics and launch plans. Each room says which path its splits take: the synchronised
// one (a running max per split, partials combined by log-sum-exp) or FlashDecoding++'s unified max.
//
// One instance is one (batch, K/V head): its CTAs read the Q rows of all g = H/HKV query heads that
// share the K/V head (g·NQ rows, position-major, BlockGrid::group), so K and V are read once per K/V
// head. CTA (s, i) of the split kernel takes row block Q_i against the K/V blocks of split s; CTA i
// of the combine kernel reads every split's partials of Q_i and writes O_i. S = 1 writes O and L
// directly, with no combine (FlashAttention-2's forward with the group packed).
//
// [SECTION] Identity, instances and blocks
// [SECTION] Steps
// [SECTION] Closed form, bound, non-matmul work
// [SECTION] Numerics
// [SECTION] Launch plans
// [SECTION] The window
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "sim/algo/emitter.hpp"
#include "sim/algo/flashdecoding_pp/flashdecoding_pp.hpp"
#include "sim/algo/tiled_room.hpp"
#include "sim/common/error.hpp"
#include "sim/numerics/tiles.hpp"

namespace hbmlab {

class SplitKvAttention : public TiledAttention {
public:
  // [SECTION] Identity, instances and blocks

  std::int64_t heads_per_instance(const AttentionProblem& p) const override { return p.heads / p.Hkv(); }
  ShapeSupport supports() const override { return {.query_len = true, .kv_heads = true, .splits = true}; }

  // Q_i (Br×d) stays on chip like flash2's, so flash2's rule: Br = ⌈M/(4d)⌉ (then clamped to the g·NQ
  // query rows), Bc = min(⌈M/(4d)⌉, d, N). At d = 128 that is FlashAttention's split-KV K/V block, 128.
  Blocks paper_blocks(std::int64_t M, std::int64_t d, std::int64_t N) const override {
    const PaperRule r = paper_rule(M, d, N);
    return {r.big, r.small};
  }

  // Q_i, K_j, V_j in the problem dtype; the partial output accumulates in fp32 (O_part is fp32 in HBM
  // too) with ℓ and m.
  std::int64_t working_set_bytes(const AttentionProblem& p, Blocks b) const override {
    return p.elem_bytes() * (b.Br + 2 * b.Bc) * p.head_dim + kStatBytes * (b.Br * p.head_dim + 2 * b.Br);
  }

  // The default split count fills every SM once: ⌈SMs / (B·HKV·Tr)⌉ CTAs per instance and row block
  // (⌈SMs / (B·HKV)⌉ when decoding, Tr = 1), at most one K/V block each.
  AttentionProblem prepare(const AttentionProblem& p, Blocks b, const GpuSpec& gpu) const override {
    const BlockGrid g = grid(p, b);
    if (p.kv_splits > g.Tc)
      fail_input("--splits: {} splits is more than the Tc = {} K/V blocks of Bc = {} rows (N = {}): at most {}",
                 p.kv_splits, g.Tc, g.Bc, g.N, g.Tc);
    AttentionProblem out = p;
    if (p.kv_splits == 0)
      out.kv_splits = std::clamp<std::int64_t>(ceil_div(gpu.sm_count, instances(p) * g.Tr), 1, g.Tc);
    return out;
  }

protected:
  // How a split computes its partial: a running max rescaled block by block (Flash-Decoding), or the
  // unified max φ with no rescale (FlashDecoding++).
  enum class Path { synchronised, unified };

  // Lines of the split kernel (1 to 9) and of the combine (10 to 12), as each room's header lists them;
  // FlashDecoding++'s fallback runs the synchronised path again with lines offset (Lines).
  struct Lines {
    int split = 0;    // added to lines 1–9
    int combine = 0;  // added to lines 10–12
  };

  // [SECTION] Steps
  //
  // The split kernel: CTA (s, i), in launch order s·n + k for the k-th of the n row blocks given.
  // A CTA whose K/V blocks the causal mask hides all from Q_i loads nothing and writes an empty
  // partial (O_part = 0, LSE = −∞), as FlashAttention's split-KV kernel does, so the combine still
  // finds S partials.
  void emit_split(Emitter& e, Path path, Lines lines, std::span<const std::int64_t> row_blocks, std::int32_t cta0) const {
    const BlockGrid& g = e.grid;
    const std::int64_t d = e.d(), n = static_cast<std::int64_t>(row_blocks.size());
    const bool partial = g.splits > 1;
    const int L = lines.split;
    for (std::int64_t s = 0; s < g.splits; ++s)
      for (std::int64_t k = 0; k < n; ++k) {
        const std::int64_t i = row_blocks[k], r = g.rows(i);
        e.cta = static_cast<std::int32_t>(cta0 + s * n + k);
        bool loaded = false;
        for (std::int64_t j = g.split_begin(s); j < g.split_begin(s + 1); ++j) {  // line 3
          if (g.skipped(i, j)) {
            e.skip(i, j, L + 3);
            continue;
          }
          if (!loaded) e.load(Tensor::Q, i, -1, L + 1);  // line 1; line 2 starts O_i, ℓ, m on chip
          loaded = true;
          const std::int64_t c = g.cols(j);
          e.load(Tensor::K, -1, j, L + 4);  // line 4
          e.load(Tensor::V, -1, j, L + 4);
          e.compute(FlopKind::matmul, Tensor::S, i, j, L + 5, 2 * r * c * d, (r + c) * d);  // line 5
          if (path == Path::synchronised) {
            e.compute(FlopKind::non_matmul, Tensor::P, i, j, L + 6, kScoreOps * r * c + kSyncStatOps * r);  // line 6
            e.compute(FlopKind::non_matmul, Tensor::O, i, -1, L + 7, r * d);  // line 7: O_i ← diag(e^(m − m'))O_i
          } else {
            e.compute(FlopKind::non_matmul, Tensor::P, i, j, L + 6, kUnifiedScoreOps * r * c);  // line 6
          }
          e.compute(FlopKind::matmul, Tensor::O, i, j, L + 7, 2 * r * c * d, c * d);  // line 7: + P̃_ij V_j
        }
        // Line 8: the synchronised path normalises and takes LSE_s = m + log ℓ; the unified path keeps
        // Σ e^(x − φ)·v and ℓ_s = Σ e^(x − φ) as they are, unless it writes O directly (S = 1).
        if (loaded && (path == Path::synchronised || !partial)) {
          e.compute(FlopKind::non_matmul, Tensor::O, i, -1, L + 8, r * d);
          e.compute(FlopKind::non_matmul, partial ? Tensor::lse_part : Tensor::lse, i, partial ? s : -1, L + 8, 2 * r);
        }
        if (partial) {
          e.store(Tensor::O_part, i, s, L + 9);  // line 9
          e.store(Tensor::lse_part, i, s, L + 9);
        } else {
          e.store(Tensor::O, i, -1, L + 9);
          e.store(Tensor::lse, i, -1, L + 9);
        }
      }
  }

  // The combine, CTA `cta` for row block i (S > 1): every split's lse_part then O_part, then O_i.
  // `split_by_split` (a launch plan of PyTorch's combine, LaunchOverride::combine_split_by_split):
  // line 11 as S load-then-add steps, the same bytes and FLOPs, each waiting on its own load.
  void emit_combine(Emitter& e, Path path, Lines lines, std::int64_t i, std::int32_t cta,
                    bool split_by_split = false) const {
    const BlockGrid& g = e.grid;
    const std::int64_t r = g.rows(i), S = g.splits, d = e.d();
    const int L = lines.combine;
    e.cta = cta;
    for (std::int64_t s = 0; s < S; ++s) e.load(Tensor::lse_part, i, s, L + 10);  // line 10
    // Synchronised: LSE = m + log Σ_s e^(LSE_s − m), m = max_s LSE_s (4S + 2 per row). Unified:
    // ℓ = Σ_s ℓ_s (S per row).
    e.compute(FlopKind::non_matmul, Tensor::lse, i, -1, L + 10, path == Path::synchronised ? r * (4 * S + 2) : r * S);
    // Synchronised: O_i = Σ_s e^(LSE_s − LSE)·O_part_s (weights 2S, then 2S·d per row). Unified:
    // O_i = Σ_s O_part_s / ℓ (S·d + d per row).
    const std::int64_t flops = path == Path::synchronised ? r * (2 * S + 2 * S * d) : r * (S * d + d);
    if (split_by_split) {
      for (std::int64_t s = 0; s < S; ++s) {
        e.load(Tensor::O_part, i, s, L + 11);
        e.compute(FlopKind::non_matmul, Tensor::O, i, -1, L + 11, flops / S + (s < flops % S ? 1 : 0));
      }
    } else {
      for (std::int64_t s = 0; s < S; ++s) e.load(Tensor::O_part, i, s, L + 11);  // line 11
      e.compute(FlopKind::non_matmul, Tensor::O, i, -1, L + 11, flops);
    }
    e.store(Tensor::O, i, -1, L + 12);  // line 12
  }

  static std::vector<std::int64_t> all_row_blocks(const BlockGrid& g) {
    std::vector<std::int64_t> rows(static_cast<std::size_t>(g.Tr));
    for (std::int64_t i = 0; i < g.Tr; ++i) rows[i] = i;
    return rows;
  }

  // [SECTION] Closed form, bound, non-matmul work
  //
  // docs/design.md#decoding, per (batch, K/V head): each split CTA with work reads its Q_i (S·g·NQ·d
  // in all when nothing is skipped), the K/V blocks it keeps (Tr·N·d each: N·d when g·NQ ≤ Br);
  // S > 1 writes O_part (S·g·NQ·d) and lse_part (S·g·NQ), both fp32, which the combine reads back
  // before writing O (g·NQ·d); S = 1 writes O and lse (g·NQ). `recomputed` row blocks (FlashDecoding++'s
  // fallback) run the split kernel a second time.
  static Counts split_kv_form(const AttentionProblem& p, const BlockGrid& g, std::span<const std::int64_t> recomputed) {
    const std::int64_t d = p.head_dim, e = p.elem_bytes(), S = g.splits, R = g.Nq;
    Counts c;
    auto split_kernel = [&](std::int64_t i) {
      for (std::int64_t s = 0; s < S; ++s) {
        std::int64_t keys = 0;
        for (std::int64_t j = g.split_begin(s); j < g.split_begin(s + 1); ++j) keys += g.skipped(i, j) ? 0 : g.cols(j);
        if (keys > 0) add_traffic(c, Tensor::Q, g.rows(i) * d, 0, e);
        add_traffic(c, Tensor::K, keys * d, 0, e);
        add_traffic(c, Tensor::V, keys * d, 0, e);
        c.matmul_flops += 4 * g.rows(i) * keys * d;
      }
      if (S > 1) {
        add_traffic(c, Tensor::O_part, 0, S * g.rows(i) * d, kStatBytes);
        add_traffic(c, Tensor::lse_part, 0, S * g.rows(i), kStatBytes);
      } else {
        add_traffic(c, Tensor::O, 0, g.rows(i) * d, e);
        add_traffic(c, Tensor::lse, 0, g.rows(i), kStatBytes);
      }
    };
    for (std::int64_t i = 0; i < g.Tr; ++i) split_kernel(i);
    for (std::int64_t i : recomputed) split_kernel(i);
    if (S > 1) {
      add_traffic(c, Tensor::O_part, S * R * d, 0, kStatBytes);
      add_traffic(c, Tensor::lse_part, S * R, 0, kStatBytes);
      add_traffic(c, Tensor::O, 0, R * d, e);
    }
    return c;
  }

  // Θ(NQ·N·d²/M + N·d) over the whole problem: B·H query heads make ⌈g·NQ/Br⌉ passes of ~M/(4d)
  // rows over their group's K/V, and each of the B·HKV K/V heads is read at least once, which no
  // exact algorithm avoids. With NQ = N it is flash2's N²d²/M plus the cache.
  Bound bound(const AttentionProblem& p, std::int64_t M) const override {
    const double N = double(p.seq_len), Nq = double(p.Nq()), d = double(p.head_dim);
    const double value = double(p.instances()) * Nq * N * d * d / double(M) + double(instances(p)) * N * d;
    return {p.Nq() == p.seq_len ? "N^2 d^2 / M + N d" : "NQ N d^2 / M + N d", "Θ", value, 0};
  }

  // Split kernel: e^x per score (and the synchronised path's e^(m − m') per row and block, with O_i
  // rescaled and a max update); the synchronised combine's weights e^(LSE_s − LSE) rescale each
  // split's partial; the unified combine adds them. `recomputed` row blocks (FlashDecoding++'s
  // fallback) run the synchronised split kernel again, one more launch.
  static NonMatmulOps split_kv_ops(const AttentionProblem& p, const BlockGrid& g, Path path,
                                   std::span<const std::int64_t> recomputed) {
    const std::int64_t d = p.head_dim, S = g.splits;
    auto synchronised = [&](std::int64_t i, NonMatmulOps& ops) {
      for (std::int64_t j = 0; j < g.Tc; ++j)
        if (!g.skipped(i, j)) {
          ops.exponentials += g.rows(i) * g.cols(j) + g.rows(i);
          ops.rescaled_elements += g.rows(i) * d;
          ops.max_updates += g.rows(i);
        }
      if (S > 1) {
        ops.exponentials += S * g.rows(i);
        ops.rescaled_elements += S * g.rows(i) * d;
      }
    };
    NonMatmulOps ops;
    ops.kernels = S > 1 ? 2 : 1;
    for (std::int64_t i = 0; i < g.Tr; ++i) {
      if (path == Path::synchronised) {
        synchronised(i, ops);
      } else {
        for (std::int64_t j = 0; j < g.Tc; ++j) ops.exponentials += g.skipped(i, j) ? 0 : g.rows(i) * g.cols(j);
      }
    }
    for (std::int64_t i : recomputed) synchronised(i, ops);
    if (!recomputed.empty()) ops.kernels += 1;
    return ops;
  }

  // [SECTION] Numerics
  //
  // One head of the group (the heads differ only in their numbers): each query row through S splits of
  // the K/V blocks, then the combine. Returns false when the unified path must fall back: a score more
  // than `range.above` over φ (e^(x − φ) could overflow) or every score more than `range.below` under
  // it (every term would leave the dtype's normal numbers).
  template <class T>
  static bool split_row(const tiled::Tiles<T>& t, const BlockGrid& g, std::int64_t q, Path path, T phi, SafeRange range,
                        std::vector<T>& out, std::vector<SoftmaxEvent>* watch) {
    const std::int64_t d = t.d, i = q / g.Br, S = g.splits;
    constexpr T kMinusInf = -std::numeric_limits<T>::infinity();
    std::vector<T> S_row, acc(static_cast<std::size_t>(d)), lse(static_cast<std::size_t>(S), kMinusInf), ell(S, T(0));
    std::vector<std::vector<T>> O_part(static_cast<std::size_t>(S), std::vector<T>(static_cast<std::size_t>(d), T(0)));
    T row_max = kMinusInf;
    for (std::int64_t s = 0; s < S; ++s) {
      std::fill(acc.begin(), acc.end(), T(0));  // line 2: O, ℓ ← 0, m ← −∞ (unified: m is φ throughout)
      T l = 0, m = path == Path::unified ? phi : kMinusInf;
      for (std::int64_t j = g.split_begin(s); j < g.split_begin(s + 1); ++j) {  // line 3
        if (g.skipped(i, j)) continue;
        const std::int64_t c0 = g.col_begin(j);
        t.scores(q, c0, g.cols(j), g.causal, S_row);  // line 5
        T m_new = m, alpha = 1;
        if (path == Path::synchronised) {  // line 6: m' = max(m, rowmax S_ij)
          for (T x : S_row) m_new = std::max(m_new, x);
          if (m_new == kMinusInf) continue;
          alpha = tiled::exp_diff(m, m_new);
        } else {
          for (T x : S_row) row_max = std::max(row_max, x);
          if (row_max - phi > T(range.above)) return false;  // overflow risk: fall back
        }
        T rowsum = 0;
        for (T& x : S_row) rowsum += (x = tiled::exp_diff(x, m_new));
        const T l_old = l;
        l = alpha * l + rowsum;
        if (path == Path::synchronised)
          for (T& x : acc) x *= alpha;  // line 7: O ← diag(e^(m − m'))O + P̃ V_j
        t.add_pv(S_row, c0, acc);
        if (watch) {
          SoftmaxEvent ev{j, double(m), double(m_new), double(l_old), double(l), double(alpha), {}, s, false, {}};
          if (path == Path::unified && l_old == 0) ev.m_old = -std::numeric_limits<double>::infinity();
          for (T x : acc) ev.O_partial.push_back(l > 0 ? double(x / l) : 0.0);
          watch->push_back(std::move(ev));
        }
        m = m_new;
      }
      ell[s] = l;
      if (l > 0) {  // line 8
        lse[s] = m + std::log(l);
        for (std::int64_t x = 0; x < d; ++x) O_part[s][x] = path == Path::synchronised ? acc[x] / l : acc[x];
      }
    }
    out.assign(static_cast<std::size_t>(d), T(0));
    if (path == Path::unified) {  // lines 10–11: ℓ = Σ ℓ_s, O = Σ O_part_s / ℓ, no rescale
      if (row_max != kMinusInf && phi - row_max > T(range.below)) return false;  // underflow: fall back
      T l = 0;
      for (T x : ell) l += x;
      for (std::int64_t s = 0; s < S; ++s)
        for (std::int64_t x = 0; x < d; ++x) out[x] += O_part[s][x];
      if (l > 0)
        for (T& x : out) x /= l;
      if (watch && S > 1) watch->push_back(combine_event(g, lse, l, phi, out));
      return true;
    }
    if (S == 1) {
      out = O_part[0];
      return true;
    }
    T m = kMinusInf;  // line 10: LSE = m + log Σ_s e^(LSE_s − m)
    for (T x : lse) m = std::max(m, x);
    if (m == kMinusInf) return true;  // no key at all: O stays 0
    T sum = 0;
    for (T x : lse) sum += tiled::exp_diff(x, m);
    const T LSE = m + std::log(sum);
    for (std::int64_t s = 0; s < S; ++s) {  // line 11: O = Σ_s e^(LSE_s − LSE)·O_part_s
      const T w = tiled::exp_diff(lse[s], LSE);
      for (std::int64_t x = 0; x < d; ++x) out[x] += w * O_part[s][x];
    }
    if (watch) watch->push_back(combine_event(g, lse, std::exp(LSE - m), m, out));
    return true;
  }

  // The watched row after the combine: m_new = the largest split max (or φ), l_new = the total sum
  // relative to it, split_weights[s] = e^(LSE_s − LSE).
  template <class T>
  static SoftmaxEvent combine_event(const BlockGrid& g, const std::vector<T>& lse, T l, T m, const std::vector<T>& out) {
    SoftmaxEvent ev;
    ev.j = g.Tc - 1;
    ev.m_old = ev.m_new = double(m);
    ev.l_old = ev.l_new = double(l);
    ev.rescale = 1;
    ev.combine = true;
    const double LSE = double(m) + std::log(double(l));
    for (T x : lse) ev.split_weights.push_back(x == -std::numeric_limits<T>::infinity() ? 0.0 : std::exp(double(x) - LSE));
    for (T x : out) ev.O_partial.push_back(double(x));
    return ev;
  }

  // The rows of `in` through `path` (with the synchronised path again for a row the unified one
  // cannot take: FlashDecoding++'s fallback, reported in recomputed_rows).
  static TiledResult run_split(Precision precision, const Inputs& in, BlockGrid g, const TiledOptions& options, Path path,
                               double phi) {
    const AttentionProblem* p = options.problem;
    g.splits = std::clamp<std::int64_t>(p ? p->kv_splits : 0, 1, g.Tc);
    const SafeRange range = unified_max_safe_range(p ? p->dtype : Dtype::fp32);
    return tiled::in_precision(precision, [&](auto zero) {
      using T = decltype(zero);
      const tiled::Tiles<T> t(in);
      TiledResult result = tiled::empty_result(in);
      std::vector<T> out;
      for (std::int64_t q : tiled::rows_to_compute(in, options)) {
        const bool watched = options.watch_row && q == *options.watch_row;
        std::vector<SoftmaxEvent> events;
        if (!split_row(t, g, q, path, T(phi), range, out, watched ? &events : nullptr)) {
          result.recomputed_rows.push_back(q);
          events.clear();
          split_row(t, g, q, Path::synchronised, T(phi), range, out, watched ? &events : nullptr);
        }
        for (std::int64_t x = 0; x < t.d; ++x) result.O(q, x) = double(out[x]);
        if (watched) result.watch = std::move(events);
      }
      return result;
    });
  }

  // [SECTION] Launch plans
  //
  // One program per CTA of the step stream (Step::cta), phases as PlanBuilder cuts them: the loads of
  // a K/V block, the work on it, then the partial's stores.
  class CtaPrograms final : public StepSink {
  public:
    explicit CtaPrograms(PlanBuilder& builder) : builder_(builder) {}
    void on_step(const Step& s) override {
      if (s.kind == StepKind::skip) return;
      if (s.cta != cta_) {
        builder_.begin_program();
        cta_ = s.cta;
      }
      builder_.on_step(s);
    }

  private:
    PlanBuilder& builder_;
    std::int32_t cta_ = -2;
  };

  // Query rows per instance (one K/V head), GQA-packed: g·NQ.
  static std::int64_t packed_rows(const AttentionProblem& p) { return p.heads / p.Hkv() * p.Nq(); }
  // gpu/flash_decoding.cu's split kernel runs these blocks (16-bit dtypes, one or two m16 row groups,
  // Br clamped to the g·NQ packed rows counts as the groups it pads to; 16 keys a warp per k16 step;
  // d a multiple of 32): its warp layout describes them (DecodeSplitLayout).
  static bool has_decode_layout(const AttentionProblem& p, Blocks b) {
    return p.elem_bytes() == 2 && b.Br <= 32 && b.Bc % 64 == 0 && p.head_dim % 32 == 0;
  }

  // The split kernel, GQA-packed: every CTA reads one K/V head's split once for the g query heads of
  // its group. Double-buffered like flash2's CTA, whose prologue and epilogue it shares.
  KernelPlan split_plan(const AttentionProblem& p, Blocks b, const GpuSpec& gpu, std::string name) const {
    KernelPlan plan;
    plan.name = std::move(name);
    plan.overlap = "double-buffered: K_{j+1}, V_{j+1} load while S_ij, P̃_ij V_j compute, as in flash2's CTA";
    plan.double_buffered = true;
    plan.instances = instances(p);
    plan.smem_bytes_per_cta = working_set_bytes(p, b);
    (void)gpu;
    return plan;
  }

  // How a combine CTA walks the splits: every O_part loaded at once after the LSEs (the reference),
  // one split at a time as PyTorch's combine adds them (LaunchOverride::combine_split_by_split), or one
  // at a time as gpu/flash_decoding.cu's loop does: it loads O_part_s only once the split's weight
  // e^(LSE_s − LSE) is known not to be zero, so its S loads are S dependent round trips to the L2.
  enum class CombineLoop { all_at_once, pytorch, hbmlab };
  static CombineLoop combine_loop(const LaunchOverride& launch) {
    if (launch.hbmlab_kernels) return CombineLoop::hbmlab;
    return launch.combine_split_by_split ? CombineLoop::pytorch : CombineLoop::all_at_once;
  }

  // The combine kernel: one CTA per row block of a group, 128 threads, the splits' LSE in shared
  // memory beside an fp32 O_i (as FlashAttention's combine kernel keeps them). The weights need every
  // LSE_s before O_part is read. hbmlab's loop spends kCombineSplitCycles of its own on each split
  // besides the round trip: the split's LSE_s again (an L1 hit), its weight, the test.
  static KernelPlan combine_plan(const AttentionProblem& p, Blocks b, const BlockGrid& g, std::int64_t instances,
                                 std::string name, CombineLoop loop) {
    KernelPlan plan;
    plan.name = std::move(name);
    plan.overlap = loop == CombineLoop::all_at_once
                       ? "none inside a CTA: every split's LSE_s, then its O_part, then O_i"
                       : "none inside a CTA: every split's LSE_s, then one O_part after another, each waited for, then O_i";
    plan.double_buffered = false;
    plan.instances = instances;
    plan.smem_bytes_per_cta = kStatBytes * b.Br * (p.head_dim + g.splits);
    if (loop == CombineLoop::hbmlab) plan.measured_phase_cycles = kCombineSplitCycles;
    return plan;
  }

  std::int64_t roofline_ctas_per_instance(const BlockGrid& g) const override { return g.splits * g.Tr; }
  std::span<const KernelTile> hbmlab_kernel_tiles() const override {  // gpu/flash_decoding.cu, both rooms
    return kernel_tiles::split_kv;
  }
  KernelTakes hbmlab_kernel_takes() const override { return kernel_takes::split_kv; }

  // [SECTION] The window
  //
  // SRAM of the SM running a step: a new CTA starts empty; the split CTA holds Q_i, K_j, V_j, its
  // accumulator (O_part in fp32, or O when S = 1) and ℓ, m; the combine CTA one split's lse_part and
  // O_part at a time, and O_i.
  void split_kv_on_chip(const Step& s, const Step* previous, const AttentionProblem& p, Sram& sram, Path path) const {
    const std::int64_t d = p.head_dim;
    if (!previous || previous->cta != s.cta) sram.clear();
    if (s.kind == StepKind::load || s.kind == StepKind::store) sram.put(Tile::of(s));
    if (s.kind != StepKind::compute) return;
    auto stat = [&](Tensor t, std::int32_t j) { return Tile{t, s.i, j, s.row0, s.rows, 0, 1, s.rows * kStatBytes}; };
    const bool split_kernel = sram.find(Tensor::Q) != nullptr;
    if (split_kernel && s.tensor == Tensor::P && !sram.find(Tensor::l)) {  // line 2: ℓ (and m) on chip
      sram.put(stat(Tensor::l, -1));
      if (path == Path::synchronised) sram.put(stat(Tensor::m, -1));
    }
    if (split_kernel && s.tensor == Tensor::O && !sram.find(Tensor::O) && !sram.find(Tensor::O_part)) {
      const bool partial = p.kv_splits > 1;  // line 2: the accumulator, fp32 when it becomes O_part
      sram.put({partial ? Tensor::O_part : Tensor::O, s.i, -1, s.row0, s.rows, 0, d,
                s.rows * d * (partial ? kStatBytes : p.elem_bytes())});
    }
    if (s.tensor == Tensor::lse_part || (split_kernel && s.tensor == Tensor::lse)) {  // line 8: LSE replaces ℓ, m
      sram.drop(Tensor::l);
      sram.drop(Tensor::m);
      sram.put(stat(s.tensor, s.j));
    }
    if (!split_kernel && s.tensor == Tensor::O && !sram.find(Tensor::O))  // line 11: O_i accumulates
      sram.put({Tensor::O, s.i, -1, s.row0, s.rows, 0, d, s.rows * d * p.elem_bytes()});
  }

  // Per score: rowmax 1, subtract-and-exp 2, rowsum 1 (kScoreOps); per row: max with m 1,
  // e^(m − m') 2, ℓ update 2.
  static constexpr std::int64_t kSyncStatOps = 5;
  // Per score with the unified max: the safe-range check (a max) 1, subtract-and-exp 2, rowsum 1.
  static constexpr std::int64_t kUnifiedScoreOps = 4;
  // gpu/flash_decoding.cu's combine, per split beyond its L2 round trip: measured 0.246 µs a split
  // (assets/measurements/h100-decode-latency.txt: 3.62 to 18.85 µs for S = 2 to 64, partials in the
  // L2), less the 0.182 µs the engine charges the split's load (l2_latency_ns and its bytes): 0.064 µs,
  // about 125 SM clocks at 1,980 MHz.
  static constexpr double kCombineSplitCycles = 125;
  // gpu/flash_decoding.cu's split kernel, once per CTA beyond its phases: one CTA alone with one K/V
  // block took 5.98 µs under ncu (h100-decode-latency.txt, cta-blocks, N = 64), of which the engine's
  // launch (kernel_overhead_ns) and the CTA's phases (Q_i, K_j, V_j, their products, the partial's
  // stores) give 3.81 µs: the 2.17 µs left, 4,300 SM clocks at 1,980 MHz, is the CTA's own chain that no
  // phase holds (the prologue, the four warps' merge of (m, ℓ, O) through shared memory and the
  // normalising loop, the stores' drain).
  static constexpr double kDecodeSplitCtaCycles = 4300;
  // PyTorch's split kernel (FlashAttention-2's flash_fwd_splitkv_kernel, 64 x 128 at d = 128, 4 warps),
  // once per CTA beyond its phases, measured the same way (gpu/bench/decode_sdpa_chain.sh,
  // assets/measurements/h100-decode-sdpa-chain.txt): a cache of 256 runs S = 2 CTAs of one K/V block each
  // (PyTorch runs no split kernel at S = 1), 6.66 µs under ncu, of which the engine's launch and the CTA's
  // phases give 4.64 µs: the 2.02 µs left, 4,000 SM clocks at 1,980 MHz, is the CTA's own chain (its
  // prologue, the partial's staging through shared memory and its stores, which no phase holds).
  static constexpr double kPytorchSplitCtaCycles = 4000;
};

}  // namespace hbmlab
