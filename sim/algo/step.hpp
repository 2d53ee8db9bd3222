// Step: one thing an algorithm does to one (batch, head) — load a tile from HBM into SRAM,
// compute on chip, store a tile to HBM, or skip a masked block pair — with its bytes,
// FLOPs and the line of the paper's algorithm it carries out. Algorithms only emit steps;
// observers (engine/) count them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "sim/workload/problem.hpp"

namespace hbmlab {

// Every tensor an algorithm may move (docs/design.md#io-conventions names them): the forward's Q, K, V, O, S, P and row
// statistics ℓ, m, L; the backward's gradients dO, dQ, dK, dV, dP, dS and D = rowsum(dO ∘ O);
// split-KV decoding's partial outputs O_part and their log-sum-exp lse_part.
enum class Tensor : std::uint8_t { Q, K, V, O, S, P, l, m, lse, dO, dQ, dK, dV, dP, dS, D, O_part, lse_part };
inline constexpr int kTensorCount = 18;
inline constexpr std::array<Tensor, kTensorCount> kAllTensors = {
    Tensor::Q,  Tensor::K,  Tensor::V,  Tensor::O,  Tensor::S,  Tensor::P, Tensor::l, Tensor::m,      Tensor::lse,
    Tensor::dO, Tensor::dQ, Tensor::dK, Tensor::dV, Tensor::dP, Tensor::dS, Tensor::D, Tensor::O_part, Tensor::lse_part};

std::string_view tensor_key(Tensor t);     // JSON key: "Q", ..., "l", "m", "lse", "dO", ..., "lse_part"
std::string_view tensor_symbol(Tensor t);  // as printed: "Q", ..., "ℓ", "m", "L", "dO", ..., "L_part"
bool is_stat(Tensor t);                    // ℓ, m, L, D and lse_part: fp32 vectors, one value per row
bool by_column_block(Tensor t);            // K, V, dK, dV: cut into the Tc blocks K_j (rows of keys)
bool is_score_block(Tensor t);             // S, P, dP, dS: N × N, cut into Br × Bc blocks S_ij
// Bytes of one element: the problem's dtype, but fp32 for the statistics and the partial outputs.
std::int64_t element_bytes(Tensor t, Dtype dtype);

enum class StepKind : std::uint8_t { load, store, compute, skip };
enum class FlopKind : std::uint8_t { matmul, non_matmul };

struct Step {
  StepKind kind = StepKind::compute;
  Tensor tensor = Tensor::S;  // load/store: the tensor moved; compute: the result
  FlopKind flop_kind = FlopKind::matmul;
  std::uint8_t line = 0;      // line of the paper's algorithm
  std::int32_t i = -1;        // row block of Q/O/S (-1: none)
  std::int32_t j = -1;        // column block of K/V/S, or the split of O_part and lse_part (-1: none)
  std::int32_t cta = -1;      // the instance's CTA running the step, in launch order; -1: the window infers it
  std::int64_t row0 = 0, rows = 0;  // rectangle of the per-head tensor this step touches
  std::int64_t col0 = 0, cols = 0;
  std::int64_t bytes = 0;           // load/store: bytes moved between HBM and SRAM
  std::int64_t flops = 0;           // compute: floating-point operations
  std::int64_t sram_read_bytes = 0; // compute: operand bytes read from SRAM
  bool by_block_mask = false;       // skip: the block mask dropped the pair (else the causal mask)
};

// A step in the paper's words, with `compute_text` saying what a compute step computes:
// "line 8: load Q_3 (64×64, 8 KiB) from HBM into SRAM". Each room (sim/algo/*/) narrates its own
// steps through this (Algorithm::narrate).
std::string narrate_step(const Step& step, const std::string& compute_text);
// A block's name as printed: K_2, S_1,3, Q_4, or the tensor alone.
std::string block_name(const Step& step);

// Receives the steps of one (batch, head), in order.
class StepSink {
public:
  virtual ~StepSink() = default;
  virtual void on_step(const Step& step) = 0;
};

}  // namespace hbmlab
