// What the standard rooms' launch plans share. They model attention as a library runs it: GEMMs
// (cuBLAS-style: a double-buffered main loop over 128 × 128 output tiles, 256 threads per CTA) and
// elementwise kernels, with the S-shaped tensors cut into the GEMM's tiles whatever the paper's blocks,
// unless that tile set does not fit one CTA's SRAM.
#pragma once

#include <algorithm>
#include <string>

#include "sim/algo/algorithm.hpp"

namespace hbmlab {

inline constexpr std::int64_t kGemmTile = 128;        // the usual cuBLAS tile for fp16
inline constexpr std::int64_t kLibraryThreads = 256;  // threads per library CTA

// The library's tiles: kGemmTile square (clamped to NQ and N), or the room's chosen blocks where that
// tile set's working set does not fit the SRAM one CTA may use.
inline Blocks library_tiles(const Algorithm& room, const AttentionProblem& p, Blocks chosen, const GpuSpec& gpu,
                            const EngineOptions& options) {
  const Blocks t{std::min(kGemmTile, p.Nq()), std::min(kGemmTile, p.seq_len)};
  return room.working_set_bytes(p, t) > options.sram_bytes_per_block_of(gpu) ? chosen : t;
}

// One instance's tiles on the library's grid as plan steps: Q_i, K_j, S_ij … with their bytes (rows
// by j for K, V, dK, dV; Bc columns for S, P, dP, dS, else d), and compute steps reading sram_elems.
struct LibraryTiles {
  const BlockGrid& g;
  std::int64_t d = 0, e = 0;  // head dim, element bytes

  Step tile(StepKind kind, Tensor tensor, std::int64_t i, std::int64_t j) const {
    Step s;
    s.kind = kind;
    s.tensor = tensor;
    s.i = static_cast<std::int32_t>(i);
    s.j = static_cast<std::int32_t>(j);
    s.rows = by_column_block(tensor) ? g.cols(j) : g.rows(i);
    s.cols = is_score_block(tensor) ? g.cols(j) : d;
    s.bytes = s.rows * s.cols * e;
    return s;
  }
  Step flops(FlopKind kind, std::int64_t n, std::int64_t sram_elems) const {
    Step s;
    s.kind = StepKind::compute;
    s.flop_kind = kind;
    s.flops = n;
    s.sram_read_bytes = sram_elems * e;
    return s;
  }
};

// A library GEMM kernel: its main loop double-buffered, kLibraryThreads per CTA, `smem_bytes` of
// operand tiles in shared memory.
inline void library_gemm(KernelPlan& k, std::string name, std::int64_t smem_bytes,
                         std::string overlap = "double-buffered GEMM main loop; CTAs on an SM overlap one another") {
  k.name = std::move(name);
  k.overlap = std::move(overlap);
  k.library_gemm = true;
  k.smem_bytes_per_cta = smem_bytes;
  k.threads_per_cta = kLibraryThreads;
}

}  // namespace hbmlab
