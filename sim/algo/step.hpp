// Step: one thing an algorithm does to one (batch, head) — load a tile from HBM into SRAM,
// compute on chip, store a tile to HBM, or skip a causally masked block pair — with its bytes,
// FLOPs and the line of the paper's algorithm it carries out. Algorithms only emit steps;
// observers (engine/) count them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "sim/workload/problem.hpp"

namespace hbmlab {

enum class Tensor : std::uint8_t { Q, K, V, O, S, P, l, m, lse };
inline constexpr int kTensorCount = 9;
inline constexpr std::array<Tensor, kTensorCount> kAllTensors = {
    Tensor::Q, Tensor::K, Tensor::V, Tensor::O, Tensor::S, Tensor::P, Tensor::l, Tensor::m, Tensor::lse};

std::string_view tensor_key(Tensor t);     // JSON key: "Q", ..., "l", "m", "lse"
std::string_view tensor_symbol(Tensor t);  // as printed: "Q", ..., "ℓ", "m", "L"
bool is_stat(Tensor t);                    // ℓ, m and L are fp32 vectors of N

enum class StepKind : std::uint8_t { load, store, compute, skip };
enum class FlopKind : std::uint8_t { matmul, non_matmul };

struct Step {
  StepKind kind = StepKind::compute;
  Tensor tensor = Tensor::S;  // load/store: the tensor moved; compute: the result
  FlopKind flop_kind = FlopKind::matmul;
  std::uint8_t line = 0;      // line of the paper's algorithm
  std::int32_t i = -1;        // row block of Q/O/S (-1: none)
  std::int32_t j = -1;        // column block of K/V/S (-1: none)
  std::int64_t row0 = 0, rows = 0;  // rectangle of the per-head tensor this step touches
  std::int64_t col0 = 0, cols = 0;
  std::int64_t bytes = 0;           // load/store: bytes moved between HBM and SRAM
  std::int64_t flops = 0;           // compute: floating-point operations
  std::int64_t sram_read_bytes = 0; // compute: operand bytes read from SRAM
};

// The step in the paper's words: "line 8: load Q_3 (64×64, 8 KiB) from HBM into SRAM".
std::string narrate(Algo algo, const Step& step);

// Receives the steps of one (batch, head), in order.
class StepSink {
public:
  virtual ~StepSink() = default;
  virtual void on_step(const Step& step) = 0;
};

}  // namespace hbmlab
