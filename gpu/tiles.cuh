// Shared-memory tiles of the tensor-core kernels (flash2.cu, flash_decoding.cu): rows of d elements
// in 16-byte chunks, XOR-swizzled, filled by cp.async. Included by the .cu files only.
#pragma once

#include <cstdint>

#include "gpu/ptx.cuh"

namespace hbmlab::gpu {

// [SECTION] shared-memory layout: rows of d elements in 16-byte chunks, chunk index XOR (row mod 8),
// so that the 8 rows one ldmatrix phase reads land in 8 different bank groups.
template <int kD>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * (kD / 8) + (chunk ^ (row & 7));  // in 16-byte units
}

// Loads rows [row0, row0 + kRows) of a [N][kD] tensor into shared memory; rows ≥ N read as zeros.
// Each pass of the CTA covers kThreads / (kD / 8) whole rows, a multiple of 8, so a thread keeps its
// row mod 8 and chunk: one source pointer and one swizzled offset serve all passes (immediates).
template <typename T, int kD, int kRows, int kThreads>
__device__ __forceinline__ void load_tile(std::uint32_t sram_base, const T* hbm, int row0, int N, int tid) {
  constexpr int kChunksPerRow = kD / 8;
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static_assert(kThreads % kChunksPerRow == 0 && kRowsPerPass % 8 == 0 && kRows % kRowsPerPass == 0,
                "each pass must cover whole rows, a multiple of 8, and the tile a whole number of passes");
  const int r = tid / kChunksPerRow, c = tid % kChunksPerRow;
  const std::uint32_t dst = sram_base + swz<kD>(r, c) * 16;
  const T* src = hbm + static_cast<std::int64_t>(row0 + r) * kD + c * 8;
  if (row0 + kRows <= N) {
#pragma unroll
    for (int k = 0; k < kRows / kRowsPerPass; ++k) cp_async_16(dst + k * kRowsPerPass * kD * 2, src + k * kRowsPerPass * kD, 16);
    return;
  }
#pragma unroll
  for (int k = 0; k < kRows / kRowsPerPass; ++k) {  // the ragged last tile
    const bool in = row0 + r + k * kRowsPerPass < N;
    cp_async_16(dst + k * kRowsPerPass * kD * 2, in ? src + k * kRowsPerPass * kD : hbm, in ? 16 : 0);
  }
}

}  // namespace hbmlab::gpu
