// The tile shapes hbmlab's CUDA kernels (gpu/) are compiled for: one table per kernel family, plain
// data that gpu/<family>.cu instantiates its kernels from (gpu/kernels.hpp, shape_table) and that the
// rooms read (Algorithm::hbmlab_kernel_tiles), so that `simulate --hbmlab-kernels` runs each room on
// the tile shape `hbmlab measure --blocks default` runs. sim/ cannot include gpu/; gpu/ includes this.
#pragma once

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/workload/problem.hpp"

namespace hbmlab {

// One compiled shape: head dimension d and the blocks Br × Bc of the kernel's CTA (each in fp16 and
// bf16). A family's first row for a d is that d's default (`hbmlab measure --blocks default`).
struct KernelTile {
  int d = 0, Br = 0, Bc = 0;
  friend constexpr bool operator==(const KernelTile&, const KernelTile&) = default;
};

namespace kernel_tiles {

// gpu/standard.cu: Br × Bc is one tile of S in qk_kernel (and Br × d of O in pv_kernel).
inline constexpr KernelTile standard[] = {{64, 64, 64}, {128, 64, 64}, {64, 128, 128}, {128, 128, 64}};
// gpu/flash1.cu.
inline constexpr KernelTile flash1[] = {{64, 64, 64}, {128, 64, 64}, {64, 32, 32}, {128, 32, 32}, {64, 64, 128}};
// gpu/flash2.cu: 128 × 128 for d = 64 and 128 × 64 for d = 128 (FlashAttention-2's own choices) were
// the fastest on the H100, or within 2 % of 64 × 64 (d = 128, causal, N ≤ 4096), in
// assets/measurements/h100-speed-hbmlab.json.
inline constexpr KernelTile flash2[] = {{64, 128, 128}, {128, 128, 64}, {64, 128, 64},
                                        {128, 64, 64},  {64, 64, 64},   {128, 128, 32}};
// gpu/flash3.cu: Br = 64 × consumer warpgroups, Bc = 128. d = 64: three consumer warpgroups, so that
// the tensor cores have a warpgroup's GEMMs to run while the other two do their softmax (at d = 64
// the softmax of a block takes about as long as its two GEMMs); 128 × 128 kept beside it. d = 128:
// two consumer warpgroups.
inline constexpr KernelTile flash3[] = {{64, 192, 128}, {128, 128, 128}, {64, 128, 128}};
// gpu/flash_decoding.cu, both split-KV rooms (flash-decoding, flashdecoding++): Br is the query rows
// one CTA packs (g·NQ ≤ 16 in one m16 group, ≤ 32 in two), Bc the K/V block.
inline constexpr KernelTile split_kv[] = {{64, 16, 64}, {128, 16, 64}, {64, 32, 64}, {128, 32, 64}};
// gpu/flash2_backward.cu: Br query rows per inner step, Bc keys per CTA (Bc/16 warps).
inline constexpr KernelTile flash2_backward[] = {{64, 64, 128}, {128, 64, 128}, {64, 64, 64}, {128, 64, 64},
                                                 {64, 128, 128}};
// gpu/flash3_backward.cu: 64 query rows a step, 128 keys a CTA (two consumer warpgroups of 64).
inline constexpr KernelTile flash3_backward[] = {{64, 64, 128}, {128, 64, 128}};

}  // namespace kernel_tiles

// What a kernel takes besides its tiles. Every kernel of gpu/ is compiled in fp16 and bf16 only
// (gpu/kernels.hpp: CompiledShape), causal or not, for its room's pass; NQ < N, HKV < H and a block
// mask only where its row below says so (gpu/'s KernelFamily::takes_*, which `hbmlab measure`
// follows, answer the same: tests/gpu/test_tables.cpp).
struct KernelTakes {
  bool query_len = false;   // NQ < N: the split-KV kernels (gpu/flash_decoding.cu)
  bool kv_heads = false;    // HKV < H: K/V tiles of head bh / (H/HKV)
  bool block_mask = false;  // DeviceTensors::kv_offsets
  // Bytes per key of a whole row of S that one CTA keeps in shared memory (0: none), so that N
  // is bounded by the SRAM one CTA may use, whatever the tiles.
  std::int64_t row_bytes_per_key = 0;
};

namespace kernel_takes {

inline constexpr KernelTakes flash1{}, flash2_backward{}, flash3_backward{};
// gpu/standard.cu: softmax_kernel holds its row of S in fp32.
inline constexpr KernelTakes standard{.row_bytes_per_key = 4};
inline constexpr KernelTakes flash2{.block_mask = true};
inline constexpr KernelTakes flash3{.kv_heads = true, .block_mask = true};
inline constexpr KernelTakes split_kv{.query_len = true, .kv_heads = true};

}  // namespace kernel_takes

// The default tile of a table at d: its first row for d, none where no row has it.
inline std::optional<Blocks> default_tile(std::span<const KernelTile> tiles, std::int64_t d) {
  const auto it = std::find_if(tiles.begin(), tiles.end(), [&](const KernelTile& t) { return t.d == d; });
  if (it == tiles.end()) return std::nullopt;
  return Blocks{it->Br, it->Bc};
}

// "64 and 128": the head dims of a table, each once, in its order.
inline std::string compiled_head_dims(std::span<const KernelTile> tiles) {
  std::vector<int> dims;
  for (const KernelTile& t : tiles)
    if (std::find(dims.begin(), dims.end(), t.d) == dims.end()) dims.push_back(t.d);
  std::string text;
  for (std::size_t k = 0; k < dims.size(); ++k)
    text += (k == 0 ? "" : k + 1 == dims.size() ? " and " : ", ") + std::to_string(dims[k]);
  return text;
}

// The first thing of a problem a kernel is not compiled for, or whose row of S one CTA cannot hold, in
// two wordings: `lacks` goes after "has no CUDA kernel in gpu/ " (a list's note or refusal), `refusal`
// after "<room>'s CUDA kernel in gpu/ " (simulate() of one room).
struct KernelMiss {
  enum class What { dtype, head_dim, query_len, kv_heads, block_mask, seq_len } what;
  std::string lacks, refusal;
};

// Whether a kernel with these tiles and takes runs problem p on CTAs of `cta_bytes` of shared memory:
// none where it does (whether its tiles fit a CTA is the caller's to ask), else what it misses. Without
// `cta_bytes` (a record read before its GPU is known) a row of S is not asked about.
inline std::optional<KernelMiss> kernel_miss(std::span<const KernelTile> tiles, KernelTakes takes, const AttentionProblem& p,
                                             std::optional<std::int64_t> cta_bytes) {
  using W = KernelMiss::What;
  const std::string d = std::to_string(p.head_dim), dtype(to_string(p.dtype));
  if (p.dtype != Dtype::fp16 && p.dtype != Dtype::bf16)
    return KernelMiss{W::dtype, "for " + dtype, "is compiled for fp16 and bf16, not " + dtype};
  if (!default_tile(tiles, p.head_dim))
    return KernelMiss{W::head_dim, "for d = " + d, "is compiled for d = " + compiled_head_dims(tiles) + ", not d = " + d};
  if (p.Nq() < p.seq_len && !takes.query_len)
    return KernelMiss{W::query_len, "for NQ < N", "takes NQ = N only, not NQ = " + std::to_string(p.Nq()) + " of N = " +
                                                      std::to_string(p.seq_len)};
  if (p.Hkv() < p.heads && !takes.kv_heads)
    return KernelMiss{W::kv_heads, "for HKV < H", "takes HKV = H only, not HKV = " + std::to_string(p.Hkv()) + " of H = " +
                                                      std::to_string(p.heads)};
  if (p.block_mask && !takes.block_mask) return KernelMiss{W::block_mask, "for a block mask", "takes no block mask"};
  if (const std::int64_t row_bytes = takes.row_bytes_per_key * p.seq_len; cta_bytes && row_bytes > *cta_bytes) {
    const std::string row = "N × " + std::to_string(takes.row_bytes_per_key) + " B = " + std::to_string(row_bytes) +
                            " B at --seq-len " + std::to_string(p.seq_len);
    const std::string cta = "the " + std::to_string(*cta_bytes) + " B one CTA may use";
    return KernelMiss{W::seq_len, "whose row of S, " + row + ", fits " + cta,
                      "keeps a row of S in shared memory, " + row + ", more than " + cta};
  }
  return std::nullopt;
}

}  // namespace hbmlab
