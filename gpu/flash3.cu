// flash3: FlashAttention-3 forward on Hopper (sm_90a), the FlashAttention-3 paper's Algorithm 1.
// Run: hbmlab measure --algo flash3 --seq-len 4096 --head-dim 128 [--causal both]
//      HBMLAB_FLASH3_VERSION=1|2|3|4 picks a rung of the ladder below (by default 4, or 3 with a block
//      mask).
//      hbmlab measure --algo flash3 --seq-len 8192 --block-mask local:1024,butterfly [--causal both]
//
// The same HBM traffic as flash2 (Q_i read once, K_j and V_j once per row block, O_i and L_i written
// once); what changes is how the SM is kept busy. A CTA owns Q_i of Br rows, split between consumer
// warpgroups of 64 rows each (two at d = 128, three at d = 64); K_j, V_j (Bc = 128 keys) stream
// through a ring of `stages` shared-memory buffers. The ladder, each rung kept runnable and measured (gpu/README.md, "flash3"):
//   v1 TMA + wgmma: tensor maps (cuTensorMapEncodeTiled) and cp.async.bulk.tensor bring Q_i and the
//      K/V ring in 128-byte-swizzled tiles, completing on mbarriers; S = Q_i K_jᵀ is wgmma.mma_async
//      m64n128k16 with both operands in shared memory, O_i += P̃ V_j is m64nDk16 with P̃ from
//      registers (S's accumulators, converted) and V_j transposed by the instruction. One thread of
//      the consumers issues the copies itself, `stages` blocks ahead.
//   v2 + warp specialisation: a producer warpgroup (one thread issues every copy) gives its
//      registers away (setmaxnreg.dec to 40, or 24 beside three consumers), the consumer warpgroups
//      take them (setmaxnreg.inc to 232, or 160); the ring's full and empty mbarriers are the only
//      hand-offs.
//   v3 + pingpong and intra-warpgroup overlap: named barriers make the consumer warpgroups take
//      turns issuing their products, so one's softmax runs under another's GEMMs; and within a
//      warpgroup, S_{j+1} = Q K_{j+1}ᵀ and O += P̃_j V_j are issued together, the softmax of S_{j+1}
//      running while the P̃_j V_j product is still in flight (O is rescaled after it lands).
//   v4 + persistent CTAs: one CTA per SM walks tiles c, c + grid, … through one K/V ring that runs on
//      across tiles; O_i is staged in a buffer of its own, so the next tile's Q_i (and its first K/V
//      blocks) load while the current tile's last GEMMs and store finish. Under a causal mask each CTA
//      takes its tiles two by two, a long row and its short complement (tile_at), so the CTAs stay
//      balanced and move through the heads together.
// Every rung: O_i goes back through shared memory (Q_i's own rows) and one bulk tensor store per
// warpgroup, which also clips the rows past N; L_i = m_i + log ℓ_i from registers.
// Shapes: d = 64 (Br × Bc = 192 × 128 or 128 × 128, 3 stages) and 128 (128 × 128, 2 stages); fp16 and bf16; causal or not;
// ragged N (the copy engine fills rows past N with zeros, the keys past N are masked); block masks
// (block-sparse FlashAttention, Algorithm 5, and sliding windows) at every rung: row block i visits only
// the K/V blocks kv_blocks[kv_offsets[i] .. kv_offsets[i + 1]), the lists flash2 reads, built from the
// simulator's grid at this kernel's own blocks (Br × 128), so the producer's copies and the consumers'
// products follow the list and a dropped pair costs neither. No K/V order option (flash2 has one).
// Needs sm_90a: built only for that target (gpu/CMakeLists.txt) and listed only where the GPU is a
// Hopper (flash3_available()).
#include <cuda.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gpu/hopper.cuh"
#include "gpu/tensor_maps.hpp"
#include "gpu/kernels.hpp"
#include "gpu/ptx.cuh"

namespace hbmlab {
// The room these kernels run, bound by its object (sim/algo/registry.cpp lists the same accessor).
const Algorithm& flash3_room();  // sim/algo/flash3
}  // namespace hbmlab

namespace hbmlab::gpu {
namespace {

// kCW consumer warpgroups of 64 rows each (Br = 64·kCW), plus the producer warpgroup from v2 on.
template <int kCW, int kVersion>
constexpr int kFlash3Threads = 128 * (kCW + (kVersion == 1 ? 0 : 1));
constexpr int kPersistentVersion = 4;  // v4: one CTA per SM walks the tiles (Flash3Smem::kPersistent)
// Registers per thread after setmaxnreg (v2, v3): the producer gives its share to the consumers
// (multiples of 8; 128·producer + 128·kCW·consumer ≤ 65,536).
template <int kCW> constexpr int kProducerRegisters = kCW == 2 ? 40 : 24;
template <int kCW> constexpr int kConsumerRegisters = kCW == 2 ? 232 : 160;

// Shared memory of one CTA: Q_i, then the K ring and the V ring (each stage Bc × d), then the
// mbarriers. Every tile is d/64 chunks of (rows × 64 elements), 128-byte rows in the 128-byte swizzle,
// so each chunk is one TMA box and one run of wgmma descriptors.
// A persistent CTA (v4) stages O_i in a buffer of its own, so that the next tile's Q_i can land while
// O_i is still being written out; the others write O_i over Q_i.
template <int kD, int kBr, int kBc, int kStages, bool kPersistent = false>
struct Flash3Smem {
  static constexpr int kChunks = kD / 64;
  static constexpr int kQBytes = kBr * kD * 2;
  static constexpr int kKVBytes = kBc * kD * 2;  // one K_j or V_j
  static constexpr int kO = kQBytes;
  static constexpr int kK = kO + (kPersistent ? kQBytes : 0);
  static constexpr int kV = kK + kStages * kKVBytes;
  static constexpr int kBarriers = kV + kStages * kKVBytes;  // q_full, k_full, k_empty, v_full, v_empty [stages], q_empty
  static constexpr int kBytes = kBarriers + 8 * (2 + 4 * kStages) + 1024;  // + room to align the base to 1024
};

// kMasked: a block mask; row block i visits the K/V blocks kv_blocks[kv_offsets[i] .. kv_offsets[i + 1])
// (ascending, the causal skips already left out). A row block with none writes O_i = 0.
template <typename T, int kD, int kCW, int kBc, int kStages, int kVersion, bool kCausal, bool kMasked>
__global__ void __launch_bounds__(kFlash3Threads<kCW, kVersion>, 1)
flash3_kernel(const __grid_constant__ CUtensorMap map_Q, const __grid_constant__ CUtensorMap map_K,
              const __grid_constant__ CUtensorMap map_V, const __grid_constant__ CUtensorMap map_O,
              float* __restrict__ hbm_L, int N, int kv_group, float scale_log2, int n_row_blocks, int n_tiles,
              const int* __restrict__ kv_offsets, const int* __restrict__ kv_blocks) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBr = 64 * kCW;
  constexpr int kConsumerWarps = 4 * kCW;  // arrivals that empty a ring stage (lane 0 of each consumer warp)
  constexpr bool kPersistent = kVersion >= kPersistentVersion;
  using Smem = Flash3Smem<kD, kBr, kBc, kStages, kPersistent>;
  static_assert(kBc == 128, "S = Q Kᵀ is one m64n128 product per k16 step");
  static_assert(kD == 64 || kD == 128, "d = 64 or 128");
  constexpr bool kProducerWarpgroup = kVersion >= 2;
  constexpr bool kOverlap = kVersion >= 3;  // intra-warpgroup overlap and pingpong come together (v3)

  extern __shared__ unsigned char smem_raw[];
  const std::uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;  // the 128-byte swizzle repeats every 1024 bytes
  const std::uint32_t sram_Q = base, sram_K = base + Smem::kK, sram_V = base + Smem::kV;
  const std::uint32_t sram_O = kPersistent ? base + Smem::kO : sram_Q;
  const std::uint32_t bars = base + Smem::kBarriers;
  const std::uint32_t q_full = bars, q_empty = bars + 8 * (1 + 4 * kStages);
  auto k_full = [&](int s) { return bars + 8 * (1 + s); };
  auto k_empty = [&](int s) { return bars + 8 * (1 + kStages + s); };
  auto v_full = [&](int s) { return bars + 8 * (1 + 2 * kStages + s); };
  auto v_empty = [&](int s) { return bars + 8 * (1 + 3 * kStages + s); };

  const int tid = threadIdx.x;
  const int Tc = (N + kBc - 1) / kBc;
  // Tile t is row block Q_i of instance bh: the row blocks of one (batch, head) follow one another,
  // the longest causal rows first. v1–v3: one tile per CTA (the grid is every tile); v4: CTA c takes
  // tiles c, c + grid, c + 2·grid, … through one ring whose block count `ring0` runs on across tiles.
  // v4 under a causal mask (kPaired) takes them two by two instead: CTA c takes tiles 2c and 2c + 1,
  // then 2c + 2·grid and 2c + 2·grid + 1, …, and a head's rows are ordered longest, shortest, second
  // longest, second shortest, …, so each pair holds rows i and Tr − 1 − i, about Tr + 1 K/V blocks
  // whichever i: every CTA does the same work per pair, the CTAs walk the heads abreast, and the heads
  // in flight at once stay about grid / (Tr / 2), whose K/V the L2 mostly holds. With Tr odd
  // the middle row is a pair's half; every second head runs its order backwards, so two middle rows
  // make a pair.
  constexpr bool kPaired = kPersistent && kCausal && !kMasked;
  struct Tile {
    int i, bh, row_begin, j_end, list0;  // j_end: K/V blocks visited; list0: where the mask's list starts
  };
  auto tile_at = [&](int t) {
    Tile x;
    if constexpr (kPaired) {
      x.bh = t / n_row_blocks;
      int q = t % n_row_blocks;
      if (n_row_blocks & x.bh & 1) q = n_row_blocks - 1 - q;
      x.i = q % 2 ? q / 2 : n_row_blocks - 1 - q / 2;
    } else {
      x.i = n_row_blocks - 1 - t % n_row_blocks;
      x.bh = t / n_row_blocks;
    }
    x.row_begin = x.i * kBr;
    if constexpr (kMasked) {
      x.list0 = kv_offsets[x.i];
      x.j_end = kv_offsets[x.i + 1] - x.list0;
    } else {
      // Causal: K_j is skipped when its first key lies after the block's last query.
      x.list0 = 0;
      x.j_end = kCausal ? min(Tc, (min(x.row_begin + kBr, N) - 1) / kBc + 1) : Tc;
    }
    return x;
  };
  auto first_tile = [&] { return kPaired ? 2 * static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x); };
  auto next_tile = [&](int t) {
    if constexpr (kPaired) return t % 2 ? t + 2 * static_cast<int>(gridDim.x) - 1 : t + 1;
    else return t + static_cast<int>(gridDim.x);
  };
  // The n-th K/V block a tile visits: K_n, or the n-th of the mask's list.
  auto block_at = [&](int list0, int n) {
    if constexpr (kMasked) return kv_blocks[list0 + n];
    else return n;
  };

  if (tid == 0) {
    prefetch_tensor_map(&map_Q);
    prefetch_tensor_map(&map_K);
    prefetch_tensor_map(&map_V);
    prefetch_tensor_map(&map_O);
    mbar_init(q_full, 1);
    mbar_init(q_empty, kConsumerWarps);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(k_full(s), 1);
      mbar_init(v_full(s), 1);
      mbar_init(k_empty(s), kConsumerWarps);
      mbar_init(v_empty(s), kConsumerWarps);
    }
    fence_barrier_init();
  }
  __syncthreads();

  // [producer] line 4 and line 7 of the paper's Algorithm 1: Q_i once, then K_j and V_j into stage
  // j mod stages once the consumers have emptied it (its previous use); each box is 64 columns.
  auto load_Q = [&](const Tile& x) {
    mbar_arrive_expect_tx(q_full, Smem::kQBytes);
#pragma unroll
    for (int c = 0; c < Smem::kChunks; ++c) tma_load_3d(sram_Q + c * kBr * 128, &map_Q, q_full, c * 64, x.row_begin, x.bh);
  };
  // K_j, V_j as the ring's n-th block (n counts across this CTA's tiles).
  auto load_KV = [&](int n, int j, int kv_head) {
    const int s = n % kStages;
    const std::uint32_t free_parity = ((n / kStages) & 1) ^ 1;
    mbar_wait(k_empty(s), free_parity);
    mbar_arrive_expect_tx(k_full(s), Smem::kKVBytes);
#pragma unroll
    for (int c = 0; c < Smem::kChunks; ++c)
      tma_load_3d(sram_K + s * Smem::kKVBytes + c * kBc * 128, &map_K, k_full(s), c * 64, j * kBc, kv_head);
    mbar_wait(v_empty(s), free_parity);
    mbar_arrive_expect_tx(v_full(s), Smem::kKVBytes);
#pragma unroll
    for (int c = 0; c < Smem::kChunks; ++c)
      tma_load_3d(sram_V + s * Smem::kKVBytes + c * kBc * 128, &map_V, v_full(s), c * 64, j * kBc, kv_head);
  };

  int consumer_tid = tid;
  if constexpr (kProducerWarpgroup) {
    if (tid < 128) {  // the producer warpgroup: one thread issues every copy; the rest leave
      setmaxnreg_dec<kProducerRegisters<kCW>>();
      if (tid == 0) {
        int ring0 = 0, count = 0;
        for (int t = first_tile(); t < n_tiles; t = next_tile(t), ++count) {
          const Tile x = tile_at(t);
          if (count > 0) mbar_wait(q_empty, (count - 1) & 1);  // the consumers' last S of the previous tile
          load_Q(x);
          for (int n = 0; n < x.j_end; ++n) load_KV(ring0 + n, block_at(x.list0, n), x.bh / kv_group);
          ring0 += x.j_end;
        }
      }
      return;
    }
    setmaxnreg_inc<kConsumerRegisters<kCW>>();
    consumer_tid = tid - 128;
  }

  // [consumers] warpgroup cw owns rows cw·64 … cw·64 + 63 of Q_i; warp w of it rows 16w … 16w + 15,
  // this thread rows lane/4 and lane/4 + 8 of those (the wgmma accumulator layout).
  const int cw = consumer_tid / 128, warp = (consumer_tid % 128) / 32, lane = consumer_tid % 32;
  const int wg_row0 = cw * 64;
  int row_begin = 0, q_row0 = 0, j_end = 0, list0 = 0, ring0 = 0;  // of the tile at hand (below)

  float reg_S[kBc / 2];          // S_ij, then P̃_ij in fp32 (m64n128 accumulators)
  std::uint32_t reg_P[kBc / 16][4];  // P̃_ij in the dtype: the A operand of each k16 step of P̃ V_j
  float reg_O[kD / 2];           // O_i (m64nD accumulators)
  float reg_m[2], reg_l[2];       // m in log2 units; ℓ over this thread's columns

  const std::uint32_t q_rows = sram_Q + wg_row0 * 128;
  // line 8: S_ij = Q_i K_jᵀ, d/16 products of k16 (the swizzle lets a k step be a 32-byte offset).
  auto issue_S = [&](int s) {
    fence_operands(reg_S);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const int c = kk / 4, k32 = (kk % 4) * 32;
      wgmma_ss_n128<T>(reg_S, smem_desc(q_rows + c * kBr * 128 + k32),
                       smem_desc(sram_K + s * Smem::kKVBytes + c * kBc * 128 + k32), kk > 0);
    }
    wgmma_commit();
  };
  // line 10: O_i += P̃_ij V_j, Bc/16 products of k16 (16 keys = 2048 bytes of V_j); the two
  // 64-column chunks of V_j (d = 128) lie Bc·128 bytes apart.
  auto issue_PV = [&](int s) {
    fence_operands(reg_O);
    wgmma_fence();
#pragma unroll
    for (int kt = 0; kt < kBc / 16; ++kt) {
      const std::uint64_t v = smem_desc(sram_V + s * Smem::kKVBytes + kt * 16 * 128, kBc * 128);
      if constexpr (kD == 128) wgmma_rs_n128<T>(reg_O, reg_P[kt], v, 1);
      else wgmma_rs_n64<T>(reg_O, reg_P[kt], v, 1);
    }
    wgmma_commit();
  };
  auto release = [&](std::uint32_t bar) {
    __syncwarp();
    if (lane == 0) mbar_arrive(bar);
  };
  // line 9: mask, m_new = max(m_old, rowmax(S)), P̃ = exp2(S·scale·log2e − m_new), ℓ ← e^(m_old − m_new)ℓ + rowsum(P̃).
  auto softmax = [&](int j, float(&rescale)[2]) {
    const int col0 = j * kBc;
    if (col0 + kBc > N || (kCausal && col0 + kBc - 1 > row_begin + wg_row0 + warp * 16)) {
#pragma unroll
      for (int k = 0; k < kBc / 2; ++k) {
        const int col = col0 + (k / 4) * 8 + (lane % 4) * 2 + (k % 2);
        const int row = q_row0 + ((k / 2) % 2) * 8;
        if (col >= N || (kCausal && col > row)) reg_S[k] = -INFINITY;
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = reg_m[h];
#pragma unroll
      for (int t = 0; t < kBc / 8; ++t) mx = fmaxf(mx, fmaxf(reg_S[4 * t + 2 * h], reg_S[4 * t + 2 * h + 1]) * scale_log2);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float base_m = mx == -INFINITY ? 0.f : mx;  // a row with no key yet stays all-zero
      rescale[h] = fast_exp2(reg_m[h] - base_m);        // e^(m_old − m_new); 0 on the first block
      reg_m[h] = mx;
      float sum = 0.f;
#pragma unroll
      for (int t = 0; t < kBc / 8; ++t) {
        const float p0 = fast_exp2(reg_S[4 * t + 2 * h] * scale_log2 - base_m);
        const float p1 = fast_exp2(reg_S[4 * t + 2 * h + 1] * scale_log2 - base_m);
        reg_S[4 * t + 2 * h] = p0;
        reg_S[4 * t + 2 * h + 1] = p1;
        sum += p0 + p1;
      }
      reg_l[h] = reg_l[h] * rescale[h] + sum;
    }
  };
  // O_i ← diag(e^(m_old − m_new)) O_i
  auto rescale_O = [&](const float (&rescale)[2]) {
#pragma unroll
    for (int k = 0; k < kD / 2; ++k) reg_O[k] *= rescale[(k / 2) % 2];
  };
  // P̃ in the dtype: the accumulators of n8 tiles 2kt and 2kt + 1 are the A fragment of k16 step kt.
  auto pack_P = [&] {
#pragma unroll
    for (int kt = 0; kt < kBc / 16; ++kt)
#pragma unroll
      for (int e = 0; e < 4; ++e) reg_P[kt][e] = pack2<T>(reg_S[8 * kt + 2 * e], reg_S[8 * kt + 2 * e + 1]);
  };
  // Pingpong (v3): warpgroup cw issues its products between named barrier 1 + cw and the next
  // warpgroup's; warpgroup 0's first turn of a tile comes from the last warpgroup's arrival, which
  // that one leaves out after its last turn.
  int rounds = 0, round = 0;  // per tile, v3: S_0; (S_j with P̃_{j−1}V_{j−1}) for j ≥ 1; P̃V of the last block
  auto my_turn = [&] {
    if constexpr (kOverlap) named_sync(1 + cw, 256);
  };
  auto partners_turn = [&] {
    if constexpr (kOverlap) {
      if (cw != kCW - 1 || round + 1 < rounds) named_arrive(1 + (cw + 1) % kCW, 256);
      ++round;
    }
  };
  // The ring's n-th block sits in stage n mod stages, filled for the (n / stages)-th time.
  auto stage = [&](int j) { return (ring0 + j) % kStages; };
  auto parity = [&](int j) { return static_cast<std::uint32_t>(((ring0 + j) / kStages) & 1); };

  int count = 0;
  for (int t = first_tile(); t < n_tiles; t = next_tile(t), ++count) {
  const Tile x = tile_at(t);
  row_begin = x.row_begin;
  j_end = x.j_end;
  list0 = x.list0;
  q_row0 = row_begin + wg_row0 + warp * 16 + lane / 4;
  rounds = j_end + 1;
  round = 0;
  reg_m[0] = reg_m[1] = -INFINITY;
  reg_l[0] = reg_l[1] = 0.f;
#pragma unroll
  for (int k = 0; k < kD / 2; ++k) reg_O[k] = 0.f;
  if constexpr (!kProducerWarpgroup) {
    if (consumer_tid == 0) {  // v1: a consumer thread fills the ring ahead of the loop, then refills as stages empty
      load_Q(x);
      for (int n = 0; n < min(kStages, j_end); ++n) load_KV(ring0 + n, block_at(list0, n), x.bh / kv_group);
    }
    __syncwarp();
  }
  if constexpr (kOverlap) {
    if (cw == kCW - 1 && j_end > 0) named_arrive(1, 256);  // no turns at all for a row the mask empties
  }

  mbar_wait(q_full, count & 1);
  float rescale[2];
  if (j_end == 0) {
    release(q_empty);  // a row block the mask empties: no K/V block, O_i = 0 (as flash2 writes it)
  } else if constexpr (!kOverlap) {
    for (int j = 0; j < j_end; ++j) {
      const int kv_block = block_at(list0, j);  // read before the waits below, which fence memory
      const int s = stage(j);
      const std::uint32_t parity_j = parity(j);
      mbar_wait(k_full(s), parity_j);
      issue_S(s);
      wgmma_wait<0>();
      fence_operands(reg_S);
      release(k_empty(s));
      softmax(kv_block, rescale);
      rescale_O(rescale);
      pack_P();
      mbar_wait(v_full(s), parity_j);
      issue_PV(s);
      wgmma_wait<0>();
      fence_operands(reg_O);
      release(v_empty(s));
      if constexpr (!kProducerWarpgroup) {
        if (consumer_tid == 0 && j + kStages < j_end)
          load_KV(ring0 + j + kStages, block_at(list0, j + kStages), x.bh / kv_group);
        __syncwarp();
      }
    }
    release(q_empty);  // every S of this tile has landed: Q_i's buffer may take the next tile's
  } else {
    // S_0 alone, its softmax; then each turn issues S_j and P̃_{j−1}V_{j−1} together.
    const int kv_block0 = block_at(list0, 0);
    mbar_wait(k_full(stage(0)), parity(0));
    my_turn();
    issue_S(stage(0));
    partners_turn();
    wgmma_wait<0>();
    fence_operands(reg_S);
    release(k_empty(stage(0)));
    softmax(kv_block0, rescale);
    pack_P();
    for (int j = 1; j < j_end; ++j) {
      const int kv_block = block_at(list0, j);
      const int s = stage(j), sp = stage(j - 1);
      mbar_wait(k_full(s), parity(j));
      mbar_wait(v_full(sp), parity(j - 1));
      my_turn();
      issue_S(s);
      issue_PV(sp);
      partners_turn();
      wgmma_wait<1>();  // S_j has landed; P̃_{j−1}V_{j−1} may still run
      fence_operands(reg_S);
      release(k_empty(s));
      softmax(kv_block, rescale);
      wgmma_wait<0>();
      fence_operands(reg_O);
#pragma unroll
      for (int kt = 0; kt < kBc / 16; ++kt) fence_operands(reg_P[kt]);
      release(v_empty(sp));
      rescale_O(rescale);
      pack_P();
    }
    release(q_empty);  // every S of this tile has landed: Q_i's buffer may take the next tile's
    const int s_last = stage(j_end - 1);
    mbar_wait(v_full(s_last), parity(j_end - 1));
    my_turn();
    issue_PV(s_last);
    partners_turn();
    wgmma_wait<0>();
    fence_operands(reg_O);
    release(v_empty(s_last));
  }

  // lines 12–15: O_i = diag(ℓ)⁻¹ O_i and L_i = m_i + log ℓ_i, written once. O_i goes to this
  // warpgroup's own rows of Q_i in shared memory (its last S product has landed; v4: to its own
  // buffer, once the previous tile's store has read it), swizzled as the tensor map expects, then
  // out in one bulk tensor store per 64 columns.
  if constexpr (kPersistent) named_sync(1 + kCW + cw, 128);
  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = reg_l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    inv[h] = l > 0.f ? 1.f / l : 0.f;
    const int row = q_row0 + 8 * h;
    if (hbm_L != nullptr && lane % 4 == 0 && row < N)
      hbm_L[static_cast<std::int64_t>(x.bh) * N + row] = (reg_m[h] + log2f(l)) * 0.69314718055994531f;
  }
#pragma unroll
  for (int t = 0; t < kD / 8; ++t) {
    const int col = t * 8 + (lane % 4) * 2, chunk = col / 64;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wg_row0 + warp * 16 + lane / 4 + 8 * h;  // row within Q_i
      const std::uint32_t at = sram_O + chunk * kBr * 128 + r * 128 + (((col % 64) * 2) ^ ((r % 8) * 16));
      const std::uint32_t v = pack2<T>(reg_O[4 * t + 2 * h] * inv[h], reg_O[4 * t + 2 * h + 1] * inv[h]);
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at), "r"(v) : "memory");
    }
  }
  fence_proxy_async();
  named_sync(1 + kCW + cw, 128);
  if (consumer_tid % 128 == 0) {
#pragma unroll
    for (int c = 0; c < Smem::kChunks; ++c)
      tma_store_3d(&map_O, sram_O + c * kBr * 128 + wg_row0 * 128, c * 64, row_begin + wg_row0, x.bh);
    tma_store_commit_and_wait();
  }
  ring0 += j_end;
  if constexpr (!kPersistent) break;  // one tile per CTA: nothing lives across tiles
  }
#endif
}

// [SECTION] Host side: the ladder, the shape table (tensor maps: gpu/tensor_maps.hpp)

// The rung of the ladder: HBMLAB_FLASH3_VERSION = 1, 2, 3 or 4. Unset: v4, causal or not (a causal
// v4 walks its rows in complementary pairs, which keeps its CTAs even; gpu/README.md, "flash3"), and
// v3 with a block mask: a mask makes rows of unequal length (a random mask, the first rows of a causal
// window) that no fixed tile order balances, and v3's one CTA per tile leaves that to the hardware's
// CTA scheduler.
int flash3_version(bool masked) {
  const char* v = std::getenv("HBMLAB_FLASH3_VERSION");
  if (v == nullptr || *v == '\0') return masked ? 3 : 4;
  const std::string s(v);
  if (s != "1" && s != "2" && s != "3" && s != "4")
    throw std::invalid_argument("HBMLAB_FLASH3_VERSION: '" + s +
                                "' (1 TMA + wgmma, 2 + warp specialisation, 3 + pingpong and overlap, 4 + persistent CTAs)");
  return s[0] - '0';
}

template <typename T, int kD, int kCW, int kBc, int kStages, int kVersion, bool kCausal, bool kMasked>
void launch_version(const AttentionProblem& p, const DeviceTensors& t, cudaStream_t stream, LaunchInfo* info) {
  constexpr int kBr = 64 * kCW;
  using Smem = Flash3Smem<kD, kBr, kBc, kStages, kVersion >= kPersistentVersion>;
  constexpr int kThreads = kFlash3Threads<kCW, kVersion>;
  auto kernel = flash3_kernel<T, kD, kCW, kBc, kStages, kVersion, kCausal, kMasked>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Smem::kBytes));
  const std::int64_t N = p.seq_len;
  const std::int64_t row_blocks = (N + kBr - 1) / kBr, tiles = row_blocks * p.instances();
  if (tiles > std::numeric_limits<int>::max()) throw std::invalid_argument("flash3: more than 2^31 tiles");
  static const int sm_count = [] {
    int device = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  // v4: one CTA per SM, each walking its tiles (two by two under a causal mask, so no more CTAs than
  // pairs); v1–v3: one CTA per tile.
  const std::int64_t walkers = kCausal && !kMasked ? (tiles + 1) / 2 : tiles;
  const dim3 grid(static_cast<unsigned>(kVersion >= kPersistentVersion ? std::min<std::int64_t>(walkers, sm_count) : tiles));
  if (info != nullptr) {
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    info->threads_per_cta = kThreads;
    info->registers_per_thread = attr.numRegs;
    info->smem_bytes_per_cta = static_cast<int>(Smem::kBytes + attr.sharedSizeBytes);
    info->ctas = grid.x;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info->ctas_per_sm, kernel, kThreads, Smem::kBytes));
    return;
  }
  const std::int64_t kv_instances = p.batch * p.Hkv();
  const CUtensorMap map_Q = tensor_map<T>(t.at(Tensor::Q), kD, N, p.instances(), kBr);
  const CUtensorMap map_K = tensor_map<T>(t.at(Tensor::K), kD, N, kv_instances, kBc);
  const CUtensorMap map_V = tensor_map<T>(t.at(Tensor::V), kD, N, kv_instances, kBc);
  const CUtensorMap map_O = tensor_map<T>(t.at(Tensor::O), kD, N, p.instances(), 64);
  const float scale_log2 = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kD)) * 1.4426950408889634);
  kernel<<<grid, kThreads, Smem::kBytes, stream>>>(map_Q, map_K, map_V, map_O, t.at<float>(Tensor::lse),
                                                   static_cast<int>(N), static_cast<int>(p.heads / p.Hkv()), scale_log2,
                                                   static_cast<int>(row_blocks), static_cast<int>(tiles), t.kv_offsets,
                                                   t.kv_blocks);
  CUDA_CHECK_LAUNCH();
}

template <typename T, int kD, int kCW, int kStages>
void launch_flash3(const AttentionProblem& p, bool, const DeviceTensors& t, cudaStream_t s, LaunchInfo* info) {
  if (p.Nq() != p.seq_len) throw std::invalid_argument("flash3: self-attention only (NQ = N)");
  if (p.block_mask && t.kv_offsets == nullptr && info == nullptr)
    throw std::invalid_argument("flash3: a block mask needs its K/V block lists (AttentionBuffers builds them)");
  const int version = flash3_version(p.block_mask != nullptr);
  auto go = [&]<int kVersion>() {
    if (p.block_mask) {
      if (p.causal) launch_version<T, kD, kCW, 128, kStages, kVersion, true, true>(p, t, s, info);
      else launch_version<T, kD, kCW, 128, kStages, kVersion, false, true>(p, t, s, info);
    } else {
      if (p.causal) launch_version<T, kD, kCW, 128, kStages, kVersion, true, false>(p, t, s, info);
      else launch_version<T, kD, kCW, 128, kStages, kVersion, false, false>(p, t, s, info);
    }
  };
  if (version == 1) go.template operator()<1>();
  else if (version == 2) go.template operator()<2>();
  else if (version == 3) go.template operator()<3>();
  else go.template operator()<4>();
}

// Br = 64 × consumer warpgroups (CW), Bc = 128. The K/V ring: 3 stages at d = 64 (Br = 192: 24 +
// 6 × 16 KiB), 2 at d = 128 (Q_i 32 KiB + 4 × 32 KiB), as the room's working set counts them.
struct Row {
  template <int D, int BR, int BC>
  static constexpr CompiledShape row() {
    static_assert(BR % 64 == 0 && BC == 128, "flash3's tiles are 64 rows a consumer warpgroup by 128 keys");
    constexpr int kCW = BR / 64, kStages = D <= 64 ? 3 : 2;
    return {D, BR, BC, &launch_flash3<__half, D, kCW, kStages>, &launch_flash3<__nv_bfloat16, D, kCW, kStages>};
  }
};

// The first per d is the default (why those: sim/algo/kernel_tiles.hpp).
constexpr auto kShapes = shape_table<kernel_tiles::flash3, Row>();

class Flash3Kernels final : public KernelFamily {
public:
  Algo algo() const override { return flash3_room(); }
  std::span<const CompiledShape> shapes() const override { return kShapes; }
  std::vector<ScratchTensor> scratch(const AttentionProblem& p) const override {
    return {{Tensor::lse, p.instances() * p.seq_len * kStatBytes}};
  }
  const char* profiler_names() const override { return "flash3_kernel"; }
  bool takes_block_mask() const override { return true; }
  bool takes_kv_heads() const override { return true; }  // K/V tiles of head bh / (H/HKV); NQ = N only
  std::int64_t default_max_n() const override { return 65536; }
  const char* launch_note() const override {
    return "v4 (no block mask) or v3 (a block mask) unless HBMLAB_FLASH3_VERSION says otherwise: "
           "1 producer + Br/64 consumer warpgroups";
  }
};

}  // namespace

const KernelFamily& flash3_kernels() {
  static const Flash3Kernels family;
  return family;
}

// flash3 runs only on a Hopper GPU (sm_90a code). Without a GPU the family is listed (nothing runs);
// on another GPU it is left out, with one line saying so.
bool flash3_available() {
  static const bool available = [] {
    int device = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
      cudaGetLastError();
      return true;
    }
    if (prop.major == 9 && prop.minor == 0) return true;
    std::fprintf(stderr, "flash3 skipped: it needs a Hopper GPU (sm_90a); %s is sm_%d%d\n", prop.name, prop.major,
                 prop.minor);
    return false;
  }();
  return available;
}

}  // namespace hbmlab::gpu
