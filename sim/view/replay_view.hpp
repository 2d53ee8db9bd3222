// The view model of one replay: what the GUI's panels show at step k of one (batch, head) —
// counters so far, the tiles resident in SRAM, the Tr × Tc block states, the narration and the
// online-softmax state of a watched query row. No window needed: tests/core/test_view.cpp drives it.
//
// [SECTION] Requests and limits
// [SECTION] Pieces a panel draws
// [SECTION] ReplayView
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/engine/simulate.hpp"
#include "sim/numerics/attention.hpp"

namespace hbmlab::view {

// [SECTION] Requests and limits

// Beyond this many (i, j) block pairs a step-by-step replay would keep hundreds of MB of steps:
// the view refuses with a message that says what to change (larger Br/Bc or smaller N).
inline constexpr std::int64_t kMaxReplayPairs = std::int64_t{1} << 18;
// simulate() runs the timing engine over every CTA of every (batch, head): beyond this many
// block-pair instances (B·H × Tr × Tc) it takes seconds, too long for a slider.
inline constexpr std::int64_t kMaxEngineWork = std::int64_t{1} << 22;
// Functional mode needs Q, K, V of one head in fp64 on the CPU.
inline constexpr std::int64_t kMaxNumericsElems = std::int64_t{1} << 21;  // N·d
// Counters are checkpointed every kCheckpointSteps steps, so any step k costs at most that many
// steps of replay: stepping back through an N = 4096 replay stays instant.
inline constexpr std::int64_t kCheckpointSteps = 256;

struct ReplayRequest {
  SimulateRequest sim;
  // Query row shown in the online-softmax panel (clamped to N − 1). Negative: a row where a
  // later K/V block raises the running max, so that the class sees a rescale happen.
  std::int64_t watch_row = -1;
};

// Throws InputError (one line) when the problem is invalid, the blocks do not fit, or the replay
// would be too large; the GUI shows the message in the window.
void check_replayable(const ReplayRequest& request);

// [SECTION] Pieces a panel draws

// A tile of a tensor, and what one SM's SRAM holds after a step (sim/algo/on_chip.hpp; each
// room fills and frees its buffers with Algorithm::on_chip).
using hbmlab::Sram;
using hbmlab::Tile;

// A tensor of one (batch, head) in HBM, with the tile grid the algorithm cuts it into.
struct HbmTensor {
  Tensor tensor = Tensor::Q;
  std::int64_t rows = 0, cols = 0;      // N × d, N × N, or N × 1 for ℓ, m, L, D
  std::int64_t row_tiles = 0, col_tiles = 0;  // Tr or Tc by 1, or Tr × Tc for S, P, dP and dS
  std::int64_t bytes = 0;
};

// The state of a cell of the attention-matrix view. Large grids are shown aggregated: a cell
// stands for a rectangle of (i, j) block pairs and carries fractions of them.
struct MatrixCell {
  std::int64_t i0 = 0, i1 = 0, j0 = 0, j1 = 0;  // block pairs [i0, i1) × [j0, j1)
  float done = 0;       // fraction finished (standard: P_ij read back by line 3)
  float skipped = 0;    // fraction skipped (causal mask or block mask)
  float masked = 0;     // of those, the fraction the block mask dropped
  float s_in_hbm = 0;   // scores in HBM (WindowTraits::scores_in_hbm): fraction of S_ij written so far
  float p_in_hbm = 0;   // likewise P_ij (S and P stand for WindowTraits::hbm_scores: dP and dS in a backward)
  bool current = false; // holds the pair of the last step
  std::int64_t visit = -1;  // 1-based visit order when the cell is a single pair, else −1
};

struct MatrixView {
  std::int64_t Tr = 0, Tc = 0;
  std::int64_t kept_pairs = 0, causal_skipped = 0, mask_skipped = 0;  // over the whole grid
  // S of one instance is query_rows × keys: N × N for self-attention, NQ × N when decoding (g·NQ
  // rows when a room packs the g query heads of a K/V head, `group` = g).
  std::int64_t query_rows = 0, keys = 0, group = 1;
  std::vector<std::int64_t> split_begin;  // split-KV: the first K/V block of each split (none: one split)
  std::int64_t rows = 0, cols = 0;  // cells shown (≤ the max asked for)
  std::vector<MatrixCell> cells;    // row-major, rows × cols
  std::int32_t current_i = -1, current_j = -1;
};

// Split-KV decoding: one split's partial of the watched row, and when the combine uses it.
struct SplitPartial {
  std::int64_t j_first = 0, j_last = 0;  // its K/V blocks
  bool empty = true;                     // no key of the split is visible to the row (causal)
  double lse = 0;                        // LSE_s = m_s + log ℓ_s (φ + log ℓ_s on the unified path)
  double weight = 0;                     // e^(LSE_s − LSE): its share of the row's softmax
  std::int64_t done_step = -1;           // step after which its last block is in (the partial is final)
  std::int64_t combined_step = -1;       // the combine's load of its O_part: rescaled by the weight, summed
};

// The watched row's online softmax after each K/V block, with the exact answer beside it.
struct SoftmaxView {
  bool available = false;
  std::string why_not;              // when not available
  std::int64_t row = 0, row_block = 0;
  std::vector<SoftmaxEvent> events; // from run_tiled (fp32, as a kernel would)
  std::vector<std::int64_t> event_step;  // index of the step after which event e holds
  std::int64_t exact_step = -1;     // no running softmax: step after which the exact row is computed
  double m_exact = 0, l_exact = 0;  // fp64, over every unmasked key of the row
  std::vector<double> O_exact;      // fp64 reference row of O
  std::vector<double> O_final;      // the algorithm's row of O (fp32)
  double max_abs_diff = 0;          // max |O_final − O_exact|
  // Split-KV decoding (events carry their split): the splits' partials, the combine's LSE and when
  // it is taken (line 10), FlashDecoding++'s unified max φ and whether the row fell back.
  std::vector<SplitPartial> splits;  // empty: one split, or not a split-KV room
  double LSE = 0, LSE_exact = 0;     // the combine's log Σ_s e^(LSE_s); fp64's log Σ e^x over the row
  std::int64_t lse_step = -1;
  bool unified = false;              // the splits use one max φ (no rescale)
  double phi = 0;
  bool fell_back = false;            // the row left φ's safe range: its splits were recomputed synchronised
  double safe_above = 0, safe_below = 0;  // φ's safe range in the problem's dtype (unified_max_safe_range)
  std::string_view dtype;                 // that dtype's name, for the panel's text
  // Events that hold after `pos` steps have run.
  std::size_t events_before(std::int64_t pos) const;
};

// [SECTION] ReplayView

// Positions run from 0 (nothing done) to step_count() (all done); "after pos steps" means steps
// [0, pos) have run and step pos − 1 is the one the memory view animates.
class ReplayView {
public:
  explicit ReplayView(const ReplayRequest& request);  // throws InputError

  const SimulationResult& result() const { return result_; }
  Algo algo() const { return result_.algo; }
  Blocks blocks() const { return result_.blocks.blocks; }
  const std::vector<Step>& steps() const { return steps_; }
  std::int64_t step_count() const { return static_cast<std::int64_t>(steps_.size()); }
  std::int64_t working_set_bytes() const { return result_.blocks.working_set_bytes; }

  // HBM traffic of steps [0, pos) of one (batch, head), as the core's IoCounter counts it.
  Counts counts_before(std::int64_t pos) const;
  // SRAM of the SM running step pos − 1, after it.
  Sram sram_after(std::int64_t pos) const;
  // Which CTA (thread block) step k belongs to, and the SM it runs on (CTAs in launch order).
  std::int64_t cta_of(std::int64_t k) const;
  std::int64_t sm_of(std::int64_t k) const;
  std::int64_t cta_count() const;  // per (batch, head)

  std::vector<HbmTensor> hbm_tensors() const;  // the tensors this algorithm touches
  MatrixView matrix(std::int64_t pos, std::int64_t max_cells) const;
  std::string narration(std::int64_t k) const;  // step k in the paper's words
  const SoftmaxView& softmax() const { return softmax_; }

private:
  void index_pairs();
  void build_checkpoints();
  void build_softmax(const ReplayRequest& request);
  void build_splits(const TiledResult& tiled);
  std::int64_t pair(std::int64_t i, std::int64_t j) const { return i * result_.Tc + j; }

  SimulationResult result_;
  std::vector<Step> steps_;
  std::vector<Counts> count_checkpoints_;  // counts before step c·kCheckpointSteps
  std::vector<Sram> sram_checkpoints_;     // SRAM before step c·kCheckpointSteps
  std::vector<std::int32_t> pair_of_step_;  // block pair each step works for, −1: none
  std::vector<std::int64_t> pair_begin_, pair_end_;  // first and last step of each pair
  std::vector<std::int64_t> s_written_, p_written_;  // step that stores S_ij, P_ij (scores in HBM)
  std::vector<std::int64_t> visit_;                  // 1-based order in which pairs start
  std::vector<bool> skipped_, masked_;  // skipped at all; skipped by the block mask
  SoftmaxView softmax_;
};

// Field-by-field sum of two counts (checkpoint + the steps after it).
Counts add_counts(const Counts& a, const Counts& b);

// The tensors some registered room moves (a tiny problem through each), in kAllTensors order: the
// window's colour legend.
const std::vector<Tensor>& tensors_in_use();

}  // namespace hbmlab::view
