// AttentionProblem (B, H, N, d, dtype, causal, and the shapes of decoding and sparse attention:
// NQ query rows, HKV K/V heads, a block mask), the pass, and the Tr × Tc block grid of one
// (batch, head). Nothing here knows a GPU or an algorithm: SRAM sizes come in as plain byte
// counts, and what an algorithm does with a problem lives in its room under sim/algo/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace hbmlab {

enum class Dtype { fp16, bf16, fp32 };
std::int64_t dtype_bytes(Dtype dtype);
std::string_view to_string(Dtype dtype);
std::optional<Dtype> parse_dtype(std::string_view text);

// Row statistics ℓ, m and the log-sum-exp L are fp32 whatever the problem dtype.
inline constexpr std::int64_t kStatBytes = 4;

// Forward computes O from Q, K, V; backward computes dQ, dK, dV from dO (--pass).
enum class Pass { forward, backward };
std::string_view to_string(Pass pass);
std::optional<Pass> parse_pass(std::string_view text);

struct BlockGrid;

// Which (i, j) block pairs of a grid an algorithm visits; a pair not kept is skipped entirely (no
// loads, no compute). The causal mask is one such predicate (causal_mask()); a block mask
// (--block-mask) is another, and the two combine.
class BlockMask {
public:
  virtual ~BlockMask() = default;
  virtual bool keeps(const BlockGrid& grid, std::int64_t i, std::int64_t j) const = 0;
  virtual std::string spec() const = 0;  // as the user wrote it: "local:256", "butterfly", a path
  // Throws InputError when the mask cannot describe this grid (a mask file of another Tr × Tc).
  virtual void check(const BlockGrid&) const {}
};

// Keeps a pair unless every key of K_j comes after the last query of Q_i.
const BlockMask& causal_mask();

struct AttentionProblem {
  AttentionProblem() = default;
  AttentionProblem(std::int64_t B, std::int64_t H, std::int64_t N, std::int64_t d, Dtype dtype = Dtype::fp16,
                   bool causal = false)
      : batch(B), heads(H), seq_len(N), head_dim(d), dtype(dtype), causal(causal) {}

  std::int64_t batch = 1;     // B
  std::int64_t heads = 1;     // H
  std::int64_t seq_len = 0;   // N: the keys and values (the K/V cache when decoding)
  std::int64_t head_dim = 0;  // d
  Dtype dtype = Dtype::fp16;
  bool causal = false;
  std::int64_t query_len = 0;  // NQ: query rows, the last NQ positions of the sequence; 0: N
  std::int64_t kv_heads = 0;   // HKV: K/V heads, each shared by H/HKV query heads (GQA, MQA); 0: H
  std::shared_ptr<const BlockMask> block_mask;  // block pairs kept; none: every pair
  // Decoding (flash-decoding, flashdecoding++): K/V splits per (batch, K/V head), 0 for the room's
  // default, and FlashDecoding++'s unified max φ, none for the room's default.
  std::int64_t kv_splits = 0;
  std::optional<double> unified_max;

  std::int64_t Nq() const { return query_len > 0 ? query_len : seq_len; }
  std::int64_t Hkv() const { return kv_heads > 0 ? kv_heads : heads; }
  std::int64_t instances() const { return batch * heads; }  // B·H (batch, head) pairs, all alike
  std::int64_t elem_bytes() const { return dtype_bytes(dtype); }
  // Throws InputError naming the CLI option of the first bad field ("--seq-len: ...").
  void validate() const;
};

// A validate() message for a problem read from a file: "WHERE.seq_len: ..." in place of
// "--seq-len: ...", so that the error names the file's key (WHERE: "file:line: problem",
// "file: records[3].problem"); "WHERE: message" for any other message.
std::string problem_error_at(std::string_view where, std::string_view message);

struct Blocks {
  std::int64_t Br = 0;  // rows of a Q/O block
  std::int64_t Bc = 0;  // rows of a K/V block
  bool operator==(const Blocks&) const = default;
};

// The Tr × Tc block grid of one (batch, head): Tr = ⌈NQ/Br⌉ row blocks of queries, Tc = ⌈N/Bc⌉
// column blocks of keys. A ragged last block holds only its real rows. A room that packs the g query
// heads of a K/V head into one instance (GQA-packed decoding) has g·NQ query rows, position-major:
// row r is query head r mod g at position N − NQ + ⌊r/g⌋.
struct BlockGrid {
  std::int64_t Nq = 0, N = 0, Br = 0, Bc = 0, Tr = 0, Tc = 0;
  bool causal = false;
  std::shared_ptr<const BlockMask> mask;
  std::int64_t group = 1;  // g: query heads packed per position (rows per position)
  // Split-KV decoding (--splits): the Tc K/V blocks cut into this many chunks, one CTA each; at most Tc.
  std::int64_t splits = 1;

  BlockGrid(std::int64_t N, Blocks blocks, bool causal);  // self-attention, no block mask
  // `group` query heads packed per position: g·NQ rows (1: one query head).
  BlockGrid(const AttentionProblem& problem, Blocks blocks, std::int64_t group = 1);
  std::int64_t row_begin(std::int64_t i) const { return i * Br; }
  std::int64_t rows(std::int64_t i) const;  // real rows of Q_i
  std::int64_t col_begin(std::int64_t j) const { return j * Bc; }
  std::int64_t cols(std::int64_t j) const;  // real rows of K_j
  // Position of query row r among the keys: the queries are the last NQ positions.
  std::int64_t query_position(std::int64_t r) const { return N - Nq / group + r / group; }
  // Split s holds K/V blocks [split_begin(s), split_begin(s + 1)): ⌊Tc/S⌋ or ⌈Tc/S⌉ of them, about N/S rows.
  std::int64_t split_begin(std::int64_t s) const { return s * Tc / splits; }
  std::int64_t split_of(std::int64_t j) const { return ((j + 1) * splits + Tc - 1) / Tc - 1; }
  // The pair is skipped: causally (every key of K_j lies after the last query of Q_i) or by the mask.
  bool skipped(std::int64_t i, std::int64_t j) const {
    return (causal && !causal_mask().keeps(*this, i, j)) || (mask && !mask->keeps(*this, i, j));
  }
};

std::int64_t ceil_div(std::int64_t a, std::int64_t b);

}  // namespace hbmlab
