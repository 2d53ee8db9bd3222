// Functional mode: attention really computed on seeded random Q, K, V, through each algorithm's
// tiles (same BlockGrid, same loop order, same causal skips as the step streams), in fp32 or
// fp64, checked against a plain fp64 reference. The online-softmax state of one watched query
// row (m, ℓ, the rescale factor, the partial output) is recorded after every K/V block. Backward
// rooms compute dQ, dK and dV from a seeded dO the same way. Each room computes its own tiles
// (Algorithm::run_tiled, with the helpers of tiles.hpp); this file has the inputs, the references
// and the checks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "sim/workload/problem.hpp"

namespace hbmlab {

struct Matrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<double> data;  // row-major
  Matrix() = default;
  Matrix(std::int64_t r, std::int64_t c) : rows(r), cols(c), data(static_cast<std::size_t>(r * c), 0.0) {}
  double& operator()(std::int64_t r, std::int64_t c) { return data[static_cast<std::size_t>(r * cols + c)]; }
  double operator()(std::int64_t r, std::int64_t c) const { return data[static_cast<std::size_t>(r * cols + c)]; }
};

// unit: entries ~ N(0, 1). large_logits: Q scaled so that scores are around ±1e4.
// dominant_key: K = 4·Q, so each query's own key outweighs all others.
enum class InputKind { unit, large_logits, dominant_key };
std::string_view to_string(InputKind kind);

struct Inputs {
  Matrix Q, K, V;  // Q: NQ × d (the last NQ positions), K and V: N × d; NQ = N for self-attention
  double scale = 1;  // softmax scale applied to QKᵀ, 1/√d
  // The backward's input: dO = ∂loss/∂O (NQ × d), ~ N(0, 1) whatever the kind. Drawn from its own
  // stream (the seed, mixed), so Q, K and V are the same numbers with or without it.
  Matrix dO;
};
// NQ query rows (0: N): the last NQ rows of the self-attention inputs of the same seed, so decoding
// and self-attention see the same numbers.
Inputs make_inputs(std::int64_t N, std::int64_t d, InputKind kind, std::uint64_t seed, std::int64_t Nq = 0);

enum class Precision { fp32, fp64 };

// The state of the watched row after one (i, j) block, as lines 9–13 (flash1) or 8–10 (flash2)
// leave it. Split-KV decoding restarts the running state in each split, then combines the splits.
struct SoftmaxEvent {
  std::int64_t j = 0;     // K/V block just processed
  double m_old = 0, m_new = 0;  // running max before and after (−∞ before the first block)
  double l_old = 0, l_new = 0;  // running sum ℓ before and after
  double rescale = 0;           // e^(m_old − m_new), applied to the old ℓ and O
  std::vector<double> O_partial;  // softmax over the keys seen so far, times V (normalised)
  std::int64_t split = -1;        // split-KV decoding: the split the block belongs to
  // The combine of the splits (after every block): m_new is the largest split max, l_new the total
  // sum, and split_weights[s] = e^(LSE_s − LSE), the weight of split s's partial output.
  bool combine = false;
  std::vector<double> split_weights;
};

struct TiledOptions {
  std::vector<std::int64_t> rows;          // query rows to compute; empty: all
  std::optional<std::int64_t> watch_row;   // row whose online-softmax state is recorded
  // The prepared problem (Algorithm::prepare) the inputs are one head of, for what a room resolves
  // beyond the grid: split-KV's split count, FlashDecoding++'s φ and the dtype its safe range depends
  // on. None: self-attention in fp32 as the grid says.
  const AttentionProblem* problem = nullptr;
};

// The backward's outputs: dQ (NQ × d), dK and dV (N × d) for the loss whose gradient at O is dO.
// Restricted to some query rows, dQ holds those rows and dK, dV the sums of their contributions.
struct Gradients {
  Matrix dQ, dK, dV;
};

struct TiledResult {
  Matrix O;                          // N × d; rows not computed stay 0 (a backward room: the forward's O)
  std::vector<SoftmaxEvent> watch;   // one per processed K/V block of the watched row
  std::optional<Gradients> grads;    // backward rooms only: dQ, dK, dV through the room's tiles
  // Rows the room recomputed on a slower, safe path (FlashDecoding++'s fallback), in order.
  std::vector<std::int64_t> recomputed_rows;
};

class Algo;  // sim/algo/algorithm.hpp

// The room's run_tiled on the grid of one head of the inputs: NQ = Q's rows against N = K's rows.
TiledResult run_tiled(Algo algo, Precision precision, const Inputs& in, Blocks blocks, bool causal,
                      const TiledOptions& options = {});

// Plain fp64 softmax(scale·QKᵀ)·V on the given rows (all when empty). With `blocks`, keys in block
// pairs that grid skips (its block mask; the causal mask applies element by element) are left out;
// a row that keeps no key is 0.
Matrix reference_attention(const Inputs& in, bool causal, std::span<const std::int64_t> rows = {},
                           const BlockGrid* blocks = nullptr);

// Plain fp64 backward of the same attention (FlashAttention paper, Section 3.1 and Appendix B.2):
// with P = softmax(scale·QKᵀ), dV = Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP − rowsum(dO ∘ O)),
// dQ = scale·dS K, dK = scale·dSᵀ Q; over the given query rows' contributions (all when empty).
// With `blocks`, keys in skipped block pairs are hidden as reference_attention hides them.
Gradients reference_backward(const Inputs& in, bool causal, std::span<const std::int64_t> rows = {},
                             const BlockGrid* blocks = nullptr);

struct NumericsCheck {
  std::int64_t rows_checked = 0;
  double max_abs_error = 0;  // max |O_tiled − O_reference| (backward: over dQ, dK, dV) over the rows checked
  bool finite = true;        // no NaN or infinity anywhere in the tiled output
  std::string_view compared = "O";  // what was compared: "O", or "dQ, dK, dV" for a backward room
  std::int64_t recomputed_rows = 0;  // rows the room recomputed on its safe path (TiledResult)
};

// Compares what the room's run_tiled produced with the fp64 reference: O for a forward room, the
// gradients dQ (on the rows), dK and dV (the rows' contributions) when it returned them. With a
// block mask, the room runs on the masked grid and both references hide the pairs it skips.
NumericsCheck check_numerics(Algo algo, Precision precision, const Inputs& in, Blocks blocks, bool causal,
                             std::span<const std::int64_t> rows = {},
                             std::shared_ptr<const BlockMask> block_mask = nullptr);
// The same with the problem's settings (causal, block mask, splits, unified max) passed to the room.
NumericsCheck check_numerics(Algo algo, Precision precision, const Inputs& in, const AttentionProblem& problem,
                             Blocks blocks, std::span<const std::int64_t> rows = {});

// Rows to check when a full check would cost too much: first, last, ends of the first and last
// row blocks and a spread in between (sorted, unique, at most `count`).
std::vector<std::int64_t> sample_rows(std::int64_t N, std::int64_t Br, int count);

}  // namespace hbmlab
