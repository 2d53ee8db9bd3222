// AttentionProblem (B, H, N, d, dtype, causal), the algorithms' names, and their blocks:
// the Tr × Tc grid of one (batch, head), the SRAM working set, and the paper's default sizes.
// Nothing here knows a GPU: SRAM sizes come in as plain byte counts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hbmlab {

enum class Dtype { fp16, bf16, fp32 };
std::int64_t dtype_bytes(Dtype dtype);
std::string_view to_string(Dtype dtype);
std::optional<Dtype> parse_dtype(std::string_view text);

// Row statistics ℓ, m and the log-sum-exp L are fp32 whatever the problem dtype.
inline constexpr std::int64_t kStatBytes = 4;

struct AttentionProblem {
  std::int64_t batch = 1;     // B
  std::int64_t heads = 1;     // H
  std::int64_t seq_len = 0;   // N
  std::int64_t head_dim = 0;  // d
  Dtype dtype = Dtype::fp16;
  bool causal = false;

  std::int64_t instances() const { return batch * heads; }  // B·H (batch, head) pairs, all alike
  std::int64_t elem_bytes() const { return dtype_bytes(dtype); }
  // Throws InputError naming the CLI option of the first bad field.
  void validate() const;
};

enum class Algo { standard, flash1, flash2 };
inline constexpr Algo kAllAlgos[] = {Algo::standard, Algo::flash1, Algo::flash2};
std::string_view to_string(Algo algo);
std::optional<Algo> parse_algo(std::string_view text);
std::string_view paper_name(Algo algo);  // "Algorithm 0 (standard attention)", ...

struct Blocks {
  std::int64_t Br = 0;  // rows of a Q/O block
  std::int64_t Bc = 0;  // rows of a K/V block
  bool operator==(const Blocks&) const = default;
};

// The Tr × Tc block grid of one (batch, head). A ragged last block holds only its real rows.
struct BlockGrid {
  std::int64_t N = 0, Br = 0, Bc = 0, Tr = 0, Tc = 0;
  bool causal = false;

  BlockGrid(std::int64_t N, Blocks blocks, bool causal);
  std::int64_t row_begin(std::int64_t i) const { return i * Br; }
  std::int64_t rows(std::int64_t i) const;  // real rows of Q_i
  std::int64_t col_begin(std::int64_t j) const { return j * Bc; }
  std::int64_t cols(std::int64_t j) const;  // real rows of K_j
  // Causal masking: every key of K_j lies after the last query of Q_i, so the pair is skipped.
  bool skipped(std::int64_t i, std::int64_t j) const {
    return causal && col_begin(j) > row_begin(i) + rows(i) - 1;
  }
};

// Bytes of SRAM one CTA holds at once. flash1/flash2: Q_i, O_i (Br×d), K_j, V_j (Bc×d) in the
// problem dtype and ℓ_i, m_i (Br) in fp32; S_ij and P̃_ij stay in registers, as FlashAttention's
// kernels keep them. standard: one GEMM tile set, Q_i and K_j with S_ij (or P_ij, V_j and O_i).
std::int64_t sram_working_set_bytes(Algo algo, const AttentionProblem& problem, Blocks blocks);

// The paper's rule for M = SRAM elements: Bc = ⌈M/(4d)⌉, Br = min(Bc, d), clamped to N.
// flash2 keeps Q_i resident across its inner loop, so the roles swap: Br = ⌈M/(4d)⌉, Bc = min(Br, d).
Blocks paper_default_blocks(Algo algo, std::int64_t M_elements, std::int64_t d, std::int64_t N);

struct SramBudget {
  std::int64_t bytes_per_sm = 0;     // sets M = bytes_per_sm / dtype bytes
  std::int64_t bytes_per_block = 0;  // what one CTA may use: the working set must fit here
};

struct BlockChoice {
  Blocks blocks;
  std::int64_t M_elements = 0;
  std::int64_t working_set_bytes = 0;
  std::string origin;  // "paper default", "explicit", "largest fitting"
  std::string note;    // why the choice differs from what was asked, if it does
};

// Explicit blocks (either may be absent) are checked against the budget and are an InputError
// naming --block-rows/--block-cols when they do not fit. Without them the paper's defaults are
// used, or, when those do not fit, the largest that do (the note says so).
BlockChoice choose_blocks(Algo algo, const AttentionProblem& problem, SramBudget sram,
                          std::optional<std::int64_t> block_rows = std::nullopt,
                          std::optional<std::int64_t> block_cols = std::nullopt);

std::int64_t ceil_div(std::int64_t a, std::int64_t b);

}  // namespace hbmlab
