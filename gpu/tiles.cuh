// Shared-memory tiles of the tensor-core kernels (flash2.cu, flash_decoding.cu, flash2_backward.cu):
// rows of d elements in 16-byte chunks, XOR-swizzled, filled by cp.async. Included by the .cu files only.
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

// [SECTION] ldmatrix addresses

// The fragment reads of one thread walk the chunks 2k + bit of a fixed row pattern (row mod 8 =
// lane mod 8). Since chunk 8q + c XOR r = 8q + (c XOR r) for r < 8, the chunk offsets repeat every
// four k steps shifted by 128 bytes: four per-thread offsets serve every k, each used as register +
// immediate, instead of one register per k step (which spilled the two-row-group kernels).
struct FragmentOffsets {
  std::uint32_t at[4];
  // `row`: the thread's row of the operand; `bit`: which chunk of the k16 pair it reads.
  template <int kD>
  static __device__ __forceinline__ FragmentOffsets make(int row, int bit) {
    FragmentOffsets o;
#pragma unroll
    for (int r = 0; r < 4; ++r) o.at[r] = (row * (kD / 8) + ((2 * r + bit) ^ (row & 7))) * 16;
    return o;
  }
  // Byte offset of chunk 2k + bit of the row, `rows_below` rows further down (rows_below % 8 == 0).
  template <int kD>
  __device__ __forceinline__ std::uint32_t get(int k, int rows_below) const {
    return at[k % 4] + (k / 4) * 128 + rows_below * kD * 2;
  }
};

// [SECTION] cp.async tile loads

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
