// Names of tensors and the narration of steps in the papers' words (indices 1-based, as printed).
#include "sim/algo/step.hpp"

#include <fmt/format.h>

#include "sim/common/units.hpp"

namespace hbmlab {

std::string_view tensor_key(Tensor t) {
  constexpr std::string_view keys[] = {"Q",  "K",  "V",  "O",  "S",  "P", "l", "m",      "lse",
                                       "dO", "dQ", "dK", "dV", "dP", "dS", "D", "O_part", "lse_part"};
  return keys[static_cast<int>(t)];
}

std::string_view tensor_symbol(Tensor t) {
  constexpr std::string_view symbols[] = {"Q",  "K",  "V",  "O",  "S",  "P", "ℓ", "m",      "L",
                                          "dO", "dQ", "dK", "dV", "dP", "dS", "D", "O_part", "L_part"};
  return symbols[static_cast<int>(t)];
}

bool is_stat(Tensor t) {
  return t == Tensor::l || t == Tensor::m || t == Tensor::lse || t == Tensor::D || t == Tensor::lse_part;
}

bool by_column_block(Tensor t) { return t == Tensor::K || t == Tensor::V || t == Tensor::dK || t == Tensor::dV; }

bool is_score_block(Tensor t) { return t == Tensor::S || t == Tensor::P || t == Tensor::dP || t == Tensor::dS; }

std::int64_t element_bytes(Tensor t, Dtype dtype) {
  return is_stat(t) || t == Tensor::O_part ? kStatBytes : dtype_bytes(dtype);
}

std::string block_name(const Step& s) {
  const std::string_view sym = tensor_symbol(s.tensor);
  if (by_column_block(s.tensor)) return fmt::format("{}_{}", sym, s.j + 1);
  if (is_score_block(s.tensor) && s.j >= 0) return fmt::format("{}_{},{}", sym, s.i + 1, s.j + 1);
  if ((s.tensor == Tensor::O_part || s.tensor == Tensor::lse_part) && s.j >= 0)
    return fmt::format("{}_{} of split {}", sym, s.i + 1, s.j + 1);
  if (s.i >= 0) return fmt::format("{}_{}", sym, s.i + 1);
  return std::string(sym);
}

std::string narrate_step(const Step& s, const std::string& compute_text) {
  const std::string shape = fmt::format("{}×{}", s.rows, s.cols);
  switch (s.kind) {
    case StepKind::load:
      return fmt::format("line {}: load {} ({}, {}) from HBM into SRAM", s.line, block_name(s), shape,
                         format_bytes(static_cast<double>(s.bytes)));
    case StepKind::store:
      return fmt::format("line {}: write {} ({}, {}) to HBM", s.line, block_name(s), shape,
                         format_bytes(static_cast<double>(s.bytes)));
    case StepKind::compute:
      return fmt::format("line {}: {} ({} {})", s.line, compute_text, format_count(static_cast<double>(s.flops)),
                         s.flop_kind == FlopKind::matmul ? "matmul FLOPs" : "non-matmul FLOPs");
    case StepKind::skip:
      if (s.by_block_mask)
        return fmt::format("line {}: block mask: S_{},{} is not kept, so Q_{} never meets K_{}, V_{} (no loads, no compute)",
                           s.line, s.i + 1, s.j + 1, s.i + 1, s.j + 1, s.j + 1);
      return fmt::format("line {}: causal mask: every key of K_{} comes after the last query of Q_{}; S_{},{} is skipped",
                         s.line, s.j + 1, s.i + 1, s.i + 1, s.j + 1);
  }
  return "";
}

}  // namespace hbmlab
