// The replay view model: checkpoints for cheap stepping back, SRAM residency, block states and
// the watched row's online softmax. Counts come from the core's IoCounter, never recomputed here.
//
// [SECTION] Counts and checks
// [SECTION] Building a replay
// [SECTION] Queries at a position
// [SECTION] Online softmax of the watched row
//
// Split-KV decoding restarts the running state in each split and ends with a combine event; the
// splits' partials are gathered here so that the window can show the combine one split at a time.
#include "sim/view/replay_view.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "sim/algo/flashdecoding_pp/flashdecoding_pp.hpp"
#include "sim/common/error.hpp"
#include "sim/common/limits.hpp"
#include "sim/engine/replay.hpp"

namespace hbmlab::view {

// [SECTION] Counts and checks

Counts add_counts(const Counts& a, const Counts& b) {
  Counts out = a;
  for (int t = 0; t < kTensorCount; ++t) {
    out.hbm[t].read_bytes += b.hbm[t].read_bytes;
    out.hbm[t].write_bytes += b.hbm[t].write_bytes;
    out.hbm[t].read_elems += b.hbm[t].read_elems;
    out.hbm[t].write_elems += b.hbm[t].write_elems;
  }
  out.matmul_flops += b.matmul_flops;
  out.non_matmul_flops += b.non_matmul_flops;
  out.sram_write_bytes += b.sram_write_bytes;
  out.sram_read_bytes += b.sram_read_bytes;
  out.steps += b.steps;
  out.skipped_blocks += b.skipped_blocks;
  return out;
}

const std::vector<Tensor>& tensors_in_use() {
  static const std::vector<Tensor> in_use = [] {
    Counts any;
    for (Pass pass : {Pass::forward, Pass::backward})
      for (Algo a : algorithms(pass)) {
        AttentionProblem p(1, 1, 16, 4);
        any = add_counts(any, count_instance(a, p, {4, 4}));
        p.kv_splits = 2;  // the split-KV rooms' partials
        if (a->supports().splits) any = add_counts(any, count_instance(a, p, {4, 4}));
      }
    std::vector<Tensor> out;
    for (Tensor t : kAllTensors)
      if (any.touches(t)) out.push_back(t);
    return out;
  }();
  return in_use;
}

void check_replayable(const ReplayRequest& request) {
  const SimulateRequest& r = request.sim;
  r.problem.validate();
  const std::int64_t sram_sm = r.sram_bytes.value_or(r.gpu.sram_bytes_per_sm);
  const std::int64_t sram_block = r.sram_bytes.value_or(r.gpu.sram_bytes_per_block);
  r.algo->check_problem(r.problem);
  const BlockChoice choice = choose_blocks(r.algo, r.problem, {sram_sm, sram_block}, r.block_rows, r.block_cols);
  const AttentionProblem p = r.algo->prepare(r.problem, choice.blocks, r.gpu);
  const BlockGrid grid = r.algo->grid(p, choice.blocks);
  if (p.block_mask) p.block_mask->check(grid);
  if (saturating_mul(grid.Tr, grid.Tc) > kMaxReplayPairs)
    fail_input("--block-rows/--block-cols: Tr×Tc = {}×{} = {} block pairs is too many to replay step by step "
               "(at most {}); choose larger blocks or a smaller N",
               grid.Tr, grid.Tc, saturating_mul(grid.Tr, grid.Tc), kMaxReplayPairs);
  if (grid.Tr * grid.Tc * r.algo->instances(p) > kMaxEngineWork)
    fail_input("--batch/--heads: B·H × Tr × Tc = {} × {} block pairs is more than the window times interactively "
               "(at most {}); choose a smaller B·H (every head is alike), or run hbmlab simulate",
               r.algo->instances(p), grid.Tr * grid.Tc, kMaxEngineWork);
}

namespace {

// A step that works for one block pair (i, j) of S. A split's partials carry their split in j, not a
// K/V block.
bool pair_step(const Step& s) {
  return s.i >= 0 && s.j >= 0 && s.tensor != Tensor::O_part && s.tensor != Tensor::lse_part;
}

}  // namespace

// [SECTION] Building a replay

ReplayView::ReplayView(const ReplayRequest& request) {
  check_replayable(request);
  SimulateRequest sim = request.sim;
  result_ = simulate(sim);
  steps_ = record_steps(result_.algo, result_.problem, result_.blocks.blocks);
  index_pairs();
  build_checkpoints();
  build_softmax(request);
}

void ReplayView::index_pairs() {
  const std::int64_t n = step_count(), pairs = result_.Tr * result_.Tc;
  pair_of_step_.assign(static_cast<std::size_t>(n), -1);
  // A load prepares the next block pair; computes and stores finish the previous one. Within one CTA
  // (Step::cta): a split-KV combine's CTA works for no block pair.
  std::int32_t last = -1, last_cta = -1;
  for (std::int64_t k = 0; k < n; ++k) {
    const Step& s = steps_[k];
    if (pair_step(s)) {
      last = static_cast<std::int32_t>(pair(s.i, s.j));
      last_cta = s.cta;
    }
    if ((s.kind != StepKind::load && s.cta == last_cta) || pair_step(s)) pair_of_step_[k] = last;
  }
  std::int32_t next = -1, next_cta = -1;
  for (std::int64_t k = n - 1; k >= 0; --k) {
    const Step& s = steps_[k];
    if (pair_step(s)) {
      next = static_cast<std::int32_t>(pair(s.i, s.j));
      next_cta = s.cta;
    }
    if (s.kind == StepKind::load && !pair_step(s) && s.cta == next_cta) pair_of_step_[k] = next;
  }
  pair_begin_.assign(pairs, std::numeric_limits<std::int64_t>::max());
  pair_end_.assign(pairs, -1);
  s_written_.assign(pairs, -1);
  p_written_.assign(pairs, -1);
  skipped_.assign(pairs, false);
  masked_.assign(pairs, false);
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int32_t p = pair_of_step_[k];
    if (p < 0) continue;
    pair_begin_[p] = std::min(pair_begin_[p], k);
    pair_end_[p] = std::max(pair_end_[p], k);
    const Step& s = steps_[k];
    if (s.kind == StepKind::skip) {
      skipped_[p] = true;
      masked_[p] = s.by_block_mask;
    }
    const auto& scores = algo()->window().hbm_scores;  // S and P, or the backward's dP and dS
    if (s.kind == StepKind::store && s.tensor == scores[0]) s_written_[p] = k;
    if (s.kind == StepKind::store && s.tensor == scores[1]) p_written_[p] = k;
  }
  std::vector<std::int64_t> order(pairs);
  for (std::int64_t p = 0; p < pairs; ++p) order[p] = p;
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return pair_begin_[a] < pair_begin_[b]; });
  visit_.assign(pairs, -1);
  for (std::int64_t r = 0; r < pairs; ++r) visit_[order[r]] = r + 1;
}

void ReplayView::build_checkpoints() {
  const std::int64_t n = step_count();
  IoCounter counter;
  Sram sram;
  for (std::int64_t k = 0; k < n; ++k) {
    if (k % kCheckpointSteps == 0) {
      count_checkpoints_.push_back(counter.counts());
      sram_checkpoints_.push_back(sram);
    }
    counter.on_step(steps_[k]);
    algo()->on_chip(steps_[k], k > 0 ? &steps_[k - 1] : nullptr, result_.problem, sram);
  }
  if (n % kCheckpointSteps == 0) {  // so that pos = n has its own checkpoint
    count_checkpoints_.push_back(counter.counts());
    sram_checkpoints_.push_back(sram);
  }
}

// [SECTION] Queries at a position

Counts ReplayView::counts_before(std::int64_t pos) const {
  pos = std::clamp<std::int64_t>(pos, 0, step_count());
  const std::int64_t c = pos / kCheckpointSteps;
  IoCounter tail;
  for (std::int64_t k = c * kCheckpointSteps; k < pos; ++k) tail.on_step(steps_[k]);
  return add_counts(count_checkpoints_[c], tail.counts());
}

Sram ReplayView::sram_after(std::int64_t pos) const {
  pos = std::clamp<std::int64_t>(pos, 0, step_count());
  const std::int64_t c = pos / kCheckpointSteps;
  Sram sram = sram_checkpoints_[c];
  for (std::int64_t k = c * kCheckpointSteps; k < pos; ++k)
    algo()->on_chip(steps_[k], k > 0 ? &steps_[k - 1] : nullptr, result_.problem, sram);
  return sram;
}

std::int64_t ReplayView::cta_count() const {
  // A room that numbers its CTAs (Step::cta) says; else one CTA per Q_i (flash2), one per K_j (flash2's
  // backward), or one working through the whole (batch, head): flash1's CTA, and standard's kernels
  // shown as one CTA working through its tiles.
  if (!steps_.empty() && steps_.back().cta >= 0) {
    std::int64_t most = 0;
    for (const Step& s : steps_) most = std::max<std::int64_t>(most, s.cta);
    return most + 1;
  }
  const WindowTraits& w = algo()->window();
  return w.cta_per_row_block ? result_.Tr : w.cta_per_col_block ? result_.Tc : 1;
}

std::int64_t ReplayView::cta_of(std::int64_t k) const {
  if (k >= 0 && k < step_count() && steps_[k].cta >= 0) return steps_[k].cta;
  const WindowTraits& w = algo()->window();
  if (!(w.cta_per_row_block || w.cta_per_col_block) || k < 0 || k >= step_count()) return 0;
  const std::int32_t p = pair_of_step_[k];
  if (w.cta_per_col_block) return p >= 0 ? p % result_.Tc : std::max<std::int32_t>(steps_[k].j, 0);
  if (p >= 0) return p / result_.Tc;
  return std::max<std::int32_t>(steps_[k].i, 0);
}

std::int64_t ReplayView::sm_of(std::int64_t k) const {
  return cta_of(k) % std::max<std::int64_t>(result_.gpu.sm_count, 1);
}

std::vector<HbmTensor> ReplayView::hbm_tensors() const {
  // Each tensor as far as the steps reach into it, cut into tiles of the largest the steps move: N × d
  // for Q and O in self-attention, g·NQ × d when decoding, the splits' partials stacked.
  std::vector<HbmTensor> out;
  for (Tensor t : kAllTensors) {
    if (!result_.per_instance.touches(t)) continue;
    std::int64_t rows = 0, cols = 0, tile_rows = 1, tile_cols = 1;
    for (const Step& s : steps_) {
      if (s.tensor != t || (s.kind != StepKind::load && s.kind != StepKind::store)) continue;
      rows = std::max(rows, s.row0 + s.rows);
      cols = std::max(cols, s.col0 + s.cols);
      tile_rows = std::max(tile_rows, s.rows);
      tile_cols = std::max(tile_cols, s.cols);
    }
    const std::int64_t col_tiles = cols > tile_cols ? ceil_div(cols, tile_cols) : 1;
    out.push_back({t, rows, cols, ceil_div(rows, tile_rows), col_tiles, rows * cols * element_bytes(t, result_.problem.dtype)});
  }
  return out;
}

MatrixView ReplayView::matrix(std::int64_t pos, std::int64_t max_cells) const {
  MatrixView v;
  v.Tr = result_.Tr;
  v.Tc = result_.Tc;
  const BlockGrid grid = algo()->grid(result_.problem, blocks());
  v.query_rows = grid.Nq;
  v.keys = grid.N;
  v.group = grid.group;
  if (grid.splits > 1)
    for (std::int64_t s = 0; s < grid.splits; ++s) v.split_begin.push_back(grid.split_begin(s));
  max_cells = std::max<std::int64_t>(max_cells, 1);
  v.rows = std::min(v.Tr, max_cells);
  v.cols = std::min(v.Tc, max_cells);
  const std::int64_t last = std::clamp<std::int64_t>(pos, 0, step_count()) - 1;  // the step just run
  const std::int32_t current = last >= 0 ? pair_of_step_[last] : -1;
  if (current >= 0) {
    v.current_i = static_cast<std::int32_t>(current / v.Tc);
    v.current_j = static_cast<std::int32_t>(current % v.Tc);
  }
  const bool scores_in_hbm = algo()->window().scores_in_hbm;
  for (std::size_t p = 0; p < skipped_.size(); ++p) {
    if (!skipped_[p]) ++v.kept_pairs;
    else if (masked_[p]) ++v.mask_skipped;
    else ++v.causal_skipped;
  }
  v.cells.resize(static_cast<std::size_t>(v.rows * v.cols));
  for (std::int64_t r = 0; r < v.rows; ++r)
    for (std::int64_t c = 0; c < v.cols; ++c) {
      MatrixCell& cell = v.cells[r * v.cols + c];
      cell.i0 = r * v.Tr / v.rows;
      cell.i1 = (r + 1) * v.Tr / v.rows;
      cell.j0 = c * v.Tc / v.cols;
      cell.j1 = (c + 1) * v.Tc / v.cols;
      std::int64_t done = 0, skipped = 0, masked = 0, s_hbm = 0, p_hbm = 0;
      for (std::int64_t i = cell.i0; i < cell.i1; ++i)
        for (std::int64_t j = cell.j0; j < cell.j1; ++j) {
          const std::int64_t p = pair(i, j);
          if (skipped_[p]) ++skipped;
          if (masked_[p]) ++masked;
          if (pair_end_[p] >= 0 && last >= pair_end_[p]) ++done;
          if (scores_in_hbm && s_written_[p] >= 0 && last >= s_written_[p]) ++s_hbm;
          if (scores_in_hbm && p_written_[p] >= 0 && last >= p_written_[p]) ++p_hbm;
          if (p == current) cell.current = true;
        }
      const float n = static_cast<float>((cell.i1 - cell.i0) * (cell.j1 - cell.j0));
      cell.done = static_cast<float>(done) / n;
      cell.skipped = static_cast<float>(skipped) / n;
      cell.masked = static_cast<float>(masked) / n;
      cell.s_in_hbm = static_cast<float>(s_hbm) / n;
      cell.p_in_hbm = static_cast<float>(p_hbm) / n;
      if (cell.i1 - cell.i0 == 1 && cell.j1 - cell.j0 == 1) cell.visit = visit_[pair(cell.i0, cell.j0)];
    }
  return v;
}

std::string ReplayView::narration(std::int64_t k) const {
  if (k < 0 || k >= step_count()) return k < 0 ? "ready: nothing has moved yet" : "done";
  return algo()->narrate(steps_[k]);
}

// [SECTION] Online softmax of the watched row

std::size_t SoftmaxView::events_before(std::int64_t pos) const {
  std::size_t n = 0;
  while (n < event_step.size() && event_step[n] < pos) ++n;
  return n;
}

void ReplayView::build_softmax(const ReplayRequest& request) {
  SoftmaxView& v = softmax_;
  const AttentionProblem& p = result_.problem;
  const std::int64_t N = p.seq_len, Nq = p.Nq(), d = p.head_dim;
  // The watched row is a query row of one head; in a room that packs g heads per position it is row
  // g·q of the instance (the group's first head).
  const std::int64_t g = algo()->heads_per_instance(p);
  v.row = std::clamp<std::int64_t>(request.watch_row < 0 ? Nq / 2 + 1 : request.watch_row, 0, Nq - 1);
  if (const WindowTraits& w = algo()->window(); !w.running_softmax && w.row_softmax_line == 0) {
    v.row_block = v.row / result_.blocks.blocks.Br;  // no line takes a softmax (standard's backward)
    v.why_not = std::string(w.softmax_note);
    return;
  }
  if (N * d > kMaxNumericsElems) {
    v.row_block = g * v.row / result_.blocks.blocks.Br;
    v.why_not = fmt::format("N·d = {} is more than the {} values the CPU numerics hold; choose a smaller N or d",
                            N * d, kMaxNumericsElems);
    return;
  }
  const Inputs in = make_inputs(N, d, InputKind::unit, request.sim.seed, Nq);
  AttentionProblem head(1, 1, N, d, Dtype::fp32, p.causal);  // one head of the group
  head.query_len = Nq;
  head.block_mask = p.block_mask;
  const BlockGrid grid(head, blocks());
  auto watch = [&](std::int64_t row) {
    TiledOptions options;
    options.rows = {row};
    options.watch_row = row;
    options.problem = &p;
    return algo()->run_tiled(Precision::fp32, in, grid, options);
  };
  TiledResult tiled = watch(v.row);
  if (request.watch_row < 0 && algo()->window().running_softmax) {
    // Look through a few rows for one whose max grows after the first block (a rescale < 1).
    auto rescales = [](const TiledResult& t) {
      for (std::size_t e = 1; e < t.watch.size(); ++e)
        if (t.watch[e].rescale < 0.999) return true;
      return false;
    };
    for (std::int64_t k = 1; k <= 16 && !rescales(tiled); ++k) {
      const std::int64_t row = (v.row + k * 7919) % Nq;  // a spread of rows, not a neighbourhood
      TiledResult candidate = watch(row);
      if (rescales(candidate)) {
        v.row = row;
        tiled = std::move(candidate);
      }
    }
  }
  v.row_block = g * v.row / result_.blocks.blocks.Br;
  v.events = tiled.watch;
  const std::int64_t rows[] = {v.row};
  const Matrix ref = reference_attention(in, p.causal, rows, grid.mask ? &grid : nullptr);
  v.O_exact.assign(ref.data.begin() + v.row * d, ref.data.begin() + (v.row + 1) * d);
  v.O_final.assign(tiled.O.data.begin() + v.row * d, tiled.O.data.begin() + (v.row + 1) * d);
  for (std::int64_t x = 0; x < d; ++x) v.max_abs_diff = std::max(v.max_abs_diff, std::abs(v.O_final[x] - v.O_exact[x]));
  // The exact statistics of the row: max and sum over every key it may see.
  v.m_exact = -std::numeric_limits<double>::infinity();
  std::vector<double> s;
  for (std::int64_t k = 0; k < N && !(p.causal && k > N - Nq + v.row); ++k) {
    if (grid.mask && grid.skipped(v.row / grid.Br, k / grid.Bc)) continue;  // a block the mask drops
    double dot = 0;
    for (std::int64_t x = 0; x < d; ++x) dot += in.Q(v.row, x) * in.K(k, x);
    s.push_back(in.scale * dot);
    v.m_exact = std::max(v.m_exact, s.back());
  }
  v.l_exact = 0;
  for (double x : s) v.l_exact += std::exp(x - v.m_exact);
  // When each event holds: at the end of block pair (row block, j); a combine of split partials when
  // the row's O is written.
  std::int64_t o_written = step_count() - 1;
  for (std::int64_t k = 0; k < step_count(); ++k)
    if (steps_[k].kind == StepKind::store && steps_[k].tensor == Tensor::O && steps_[k].i == v.row_block) o_written = k;
  for (const SoftmaxEvent& e : v.events) v.event_step.push_back(e.combine ? o_written : pair_end_[pair(v.row_block, e.j)]);
  v.LSE_exact = v.m_exact + std::log(v.l_exact);
  build_splits(tiled);
  // One line takes the whole row's softmax (standard), or recomputes P_ij from the forward's exact
  // statistics (the backward rooms): the first step of that line on the watched row block.
  if (const WindowTraits& w = algo()->window(); !w.running_softmax)
    for (std::int64_t k = 0; k < step_count() && v.exact_step < 0; ++k)
      if (steps_[k].kind == StepKind::compute && steps_[k].line == w.row_softmax_line && steps_[k].i == v.row_block)
        v.exact_step = k;
  v.available = true;
}

void ReplayView::build_splits(const TiledResult& tiled) {
  SoftmaxView& v = softmax_;
  const AttentionProblem& p = result_.problem;
  const BlockGrid grid = algo()->grid(p, blocks());
  v.unified = algo()->supports().unified_max;
  v.phi = p.unified_max.value_or(0);
  v.fell_back = !tiled.recomputed_rows.empty();
  const SafeRange safe = unified_max_safe_range(p.dtype);
  v.safe_above = safe.above;
  v.safe_below = safe.below;
  v.dtype = to_string(p.dtype);
  if (!algo()->supports().splits || grid.splits <= 1 || v.events.empty() || !v.events.back().combine) return;
  const SoftmaxEvent& combine = v.events.back();
  v.LSE = combine.m_new + std::log(combine.l_new);
  v.splits.resize(static_cast<std::size_t>(grid.splits));
  for (std::int64_t s = 0; s < grid.splits; ++s) {
    SplitPartial& part = v.splits[static_cast<std::size_t>(s)];
    part.j_first = grid.split_begin(s);
    part.j_last = grid.split_begin(s + 1) - 1;
    part.weight = combine.split_weights[static_cast<std::size_t>(s)];
    for (std::size_t e = 0; e + 1 < v.events.size(); ++e)
      if (v.events[e].split == s) {  // the split's last block so far: its state is the partial's
        part.empty = false;
        part.lse = v.events[e].m_new + std::log(v.events[e].l_new);
        part.done_step = v.event_step[e];
      }
  }
  // The combine CTA of the watched row block: line 10 takes LSE, then each O_part is loaded, rescaled
  // and added (on the synchronised path of a fallback too: the last combine of the block counts).
  for (std::int64_t k = 0; k < step_count(); ++k) {
    const Step& s = steps_[k];
    if (s.i != v.row_block) continue;
    if (s.kind == StepKind::compute && s.tensor == Tensor::lse) v.lse_step = k;
    if (s.kind == StepKind::load && s.tensor == Tensor::O_part && s.j >= 0 && s.j < grid.splits)
      v.splits[static_cast<std::size_t>(s.j)].combined_step = k;
  }
}

}  // namespace hbmlab::view
