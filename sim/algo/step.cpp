// Names of tensors and the narration of steps in the papers' words (indices 1-based, as printed).
#include "sim/algo/step.hpp"

#include <fmt/format.h>

#include "sim/common/units.hpp"

namespace hbmlab {

std::string_view tensor_key(Tensor t) {
  constexpr std::string_view keys[] = {"Q", "K", "V", "O", "S", "P", "l", "m", "lse"};
  return keys[static_cast<int>(t)];
}

std::string_view tensor_symbol(Tensor t) {
  constexpr std::string_view symbols[] = {"Q", "K", "V", "O", "S", "P", "ℓ", "m", "L"};
  return symbols[static_cast<int>(t)];
}

bool is_stat(Tensor t) { return t == Tensor::l || t == Tensor::m || t == Tensor::lse; }

namespace {

std::string block_name(const Step& s) {
  const std::string_view sym = tensor_symbol(s.tensor);
  if (s.tensor == Tensor::K || s.tensor == Tensor::V) return fmt::format("{}_{}", sym, s.j + 1);
  if ((s.tensor == Tensor::S || s.tensor == Tensor::P) && s.j >= 0) return fmt::format("{}_{},{}", sym, s.i + 1, s.j + 1);
  if (s.i >= 0) return fmt::format("{}_{}", sym, s.i + 1);
  return std::string(sym);
}

std::string compute_text(Algo algo, const Step& s) {
  const int i = s.i + 1, j = s.j + 1;
  switch (algo) {
    case Algo::standard:
      if (s.line == 1) return fmt::format("S_{},{} = Q_{} K_{}ᵀ", i, j, i, j);
      if (s.line == 2) return fmt::format("P_{} = softmax(S_{}) row by row", i, i);
      return fmt::format("O_{} += P_{},{} V_{}", i, i, j, j);
    case Algo::flash1:
      switch (s.line) {
        case 9: return fmt::format("S_{},{} = Q_{} K_{}ᵀ on chip", i, j, i, j);
        case 10: return fmt::format("m̃ = rowmax(S_{0},{1}), P̃ = exp(S_{0},{1} − m̃), ℓ̃ = rowsum(P̃)", i, j);
        case 11: return "m_new = max(m_i, m̃), ℓ_new = e^(m_i − m_new)·ℓ_i + e^(m̃ − m_new)·ℓ̃";
        default:
          return s.flop_kind == FlopKind::matmul ? fmt::format("P̃_{},{} V_{} on chip", i, j, j)
                                                 : fmt::format("rescale: O_{} ← diag(ℓ_new)⁻¹(diag(ℓ_i)e^(m_i − m_new)O_i + e^(m̃ − m_new)P̃V)", i);
      }
    case Algo::flash2:
      switch (s.line) {
        case 8: return fmt::format("S_{},{} = Q_{} K_{}ᵀ on chip", i, j, i, j);
        case 9: return "m_i' = max(m_i, rowmax(S_ij)), P̃ = exp(S_ij − m_i'), ℓ_i ← e^(m_i − m_i')ℓ_i + rowsum(P̃)";
        case 10:
          return s.flop_kind == FlopKind::matmul ? fmt::format("O_{} += P̃_{},{} V_{} on chip", i, i, j, j)
                                                 : fmt::format("O_{} ← diag(e^(m_i − m_i'))·O_{}", i, i);
        case 12: return fmt::format("O_{} ← diag(ℓ_{})⁻¹·O_{} (once, after the loop)", i, i, i);
        default: return fmt::format("L_{} = m_{} + log(ℓ_{})", i, i, i);
      }
  }
  return "";
}

}  // namespace

std::string narrate(Algo algo, const Step& s) {
  const std::string shape = fmt::format("{}×{}", s.rows, s.cols);
  switch (s.kind) {
    case StepKind::load:
      return fmt::format("line {}: load {} ({}, {}) from HBM into SRAM", s.line, block_name(s), shape,
                         format_bytes(static_cast<double>(s.bytes)));
    case StepKind::store:
      if (algo == Algo::flash1 && s.line == 2) {
        const char* value = s.tensor == Tensor::m ? "−∞" : "0";
        return fmt::format("line 2: initialise {} ← {} in HBM ({})", block_name(s), value,
                           format_bytes(static_cast<double>(s.bytes)));
      }
      return fmt::format("line {}: write {} ({}, {}) to HBM", s.line, block_name(s), shape,
                         format_bytes(static_cast<double>(s.bytes)));
    case StepKind::compute:
      return fmt::format("line {}: {} ({} {})", s.line, compute_text(algo, s), format_count(static_cast<double>(s.flops)),
                         s.flop_kind == FlopKind::matmul ? "matmul FLOPs" : "non-matmul FLOPs");
    case StepKind::skip:
      return fmt::format("line {}: causal mask: every key of K_{} comes after the last query of Q_{}; S_{},{} is skipped",
                         s.line, s.j + 1, s.i + 1, s.i + 1, s.j + 1);
  }
  return "";
}

}  // namespace hbmlab
