// Shared-memory tiles of the tensor-core kernels (flash2.cu, flash_decoding.cu, flash2_backward.cu):
// rows of d elements in 16-byte chunks, XOR-swizzled, filled by cp.async; and the O += P̃V step that
// flash2.cu and flash_decoding.cu share. Included by the .cu files only.
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

// [SECTION] O += P̃ V on tensor cores

// One K/V block's O_i += P̃_ij V_j for kGroups 16-row groups of a warp: the fp32 S accumulators of two
// n8 tiles, rounded to the dtype, are the A fragment of one k16 step (kSTiles n8 tiles: 8·kSTiles keys);
// V_j's B fragments come from shared memory (byte address sV) through ldmatrix.trans, at
// v_offset(pair of d tiles, first key) from the caller's layout, the warp's keys starting at key0.
template <typename T, int kGroups, int kSTiles, int kDTiles, class VOffset>
__device__ __forceinline__ void pv_mma(float (&reg_O)[kGroups][kDTiles][4], const float (&reg_S)[kGroups][kSTiles][4],
                                       std::uint32_t sV, int key0, const VOffset& v_offset) {
  static_assert(kSTiles % 2 == 0 && kDTiles % 2 == 0, "pv_mma: k16 steps over pairs of n8 tiles");
#pragma unroll
  for (int kt = 0; kt < kSTiles / 2; ++kt) {
    std::uint32_t a[kGroups][4];
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      a[g][0] = pack2<T>(reg_S[g][2 * kt][0], reg_S[g][2 * kt][1]);
      a[g][1] = pack2<T>(reg_S[g][2 * kt][2], reg_S[g][2 * kt][3]);
      a[g][2] = pack2<T>(reg_S[g][2 * kt + 1][0], reg_S[g][2 * kt + 1][1]);
      a[g][3] = pack2<T>(reg_S[g][2 * kt + 1][2], reg_S[g][2 * kt + 1][3]);
    }
#pragma unroll
    for (int dt = 0; dt < kDTiles; dt += 2) {
      std::uint32_t b[4];
      ldmatrix_x4_trans(b, sV + v_offset(dt / 2, key0 + kt * 16));  // keys key0 + kt·16 …, d columns dt·8 …
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        mma_16816<T>(reg_O[g][dt], a[g], b[0], b[1]);
        mma_16816<T>(reg_O[g][dt + 1], a[g], b[2], b[3]);
      }
    }
  }
}

}  // namespace hbmlab::gpu
