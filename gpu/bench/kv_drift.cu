// Do the CTAs' K/V sweeps of a causal forward drift apart on the GPU? A synthetic forward that reads
// like cuDNN's Hopper kernel at d = 128, N = 64K, H = 4, causal (132 persistent CTAs of 384 threads,
// one per SM, 128-row query blocks, 128 × 128 fp16 K and V tiles) and stamps every tile with
// %globaltimer, so the order in which the GPU really reads K and V, and how far the CTAs that sweep
// one head fall apart, come out of one launch.
//
// A work item is a query block (head h, row block i); under the causal mask it reads K_j, V_j for
// j = 0..i. Items are handed out longest first (i = Tr−1 down to 0, head by head, the order the
// engine gives cuDNN's kernel) or shortest first, head by head or the heads' rows interleaved
// ("-heads"), by an atomic counter (a CTA takes the next item when it needs one: "dynamic") or by
// a static stride (CTA c takes items c, c + 132, …); within an item K/V tiles ascend (j = 0..i) or
// descend (j = i..0). Each CTA loads Q_i with its first tile,
// the next K_j, V_j (64 KiB, cp.async.cg through the L2 into shared memory, two stages) while it
// works on the current one, and stores O_i (32 KiB) after its last. The work per tile is `work`
// mma.sync m16n8k16 per warp on operands read from the tile in shared memory: 0 leaves the kernel
// memory-bound; the run sizes it so a tile's work alone takes 1.72 µs (cuDNN's 6,830 µs over the
// 3,980 tiles each of its CTAs sweeps: "balanced", as cuDNN's kernel is), 3.44 µs ("compute") or
// 0.86 µs ("light": loads and work together near cuDNN's 1.72 µs a tile).
//
// With part of the L2 set aside (cudaLimitPersistingL2CacheSize and a side stream whose access-policy
// window marks a buffer of that size persisting, read before each sweep, as gpu/bench/cudnn_l2_setaside.py
// does for cuDNN), the sweep is left the rest of the L2. Before each sweep a 256 MiB buffer is
// written (the L2 emptied), so Nsight Compute runs with --cache-control none.
//
// Each sweep's record (thread 0's %globaltimer when each tile's data is in, the items each CTA took,
// its %smid) is analysed here: the K/V re-reads' LRU reuse distances (distinct bytes of K, V, Q and O
// touched between two reads of a tile, in the order of the timestamps), how fast each CTA sweeps, and
// how far two CTAs that sweep neighbouring rows of one head drift apart over their common tiles.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o kv_drift gpu/bench/kv_drift.cu   (or CMake's hbmlab_kv_drift)
// Run:   kv_drift run OUTDIR [--raw] [--orders A,B,..] [--works memory,balanced,compute] [--raw-every LABEL,..]
//            every sweep (the orders of kOrders named, by default the first four; each work level
//            named, by default all three) at every set-aside; prints one `run` line a sweep and writes
//            OUTDIR/kv-drift.jsonl (--raw: OUTDIR/raw/LABEL.bin for the balanced sweeps and every
//            longest-asc-dynamic one with nothing set aside; --raw-every: OUTDIR/raw/LABEL-RUN.bin
//            for those sweeps at every set-aside, RUN 0–5)
//        kv_drift run OUTDIR --grid fa2 [--heads BH] [--seq N] [--tile-us T | --work W] [--reps R] [--kv-rows 128|64]
//            FlashAttention-2's grid instead (below): K/V descending, then ascending, R times each
//            (default 2), nothing set aside; `run` lines, OUTDIR/kv-drift-fa2.jsonl and the first
//            repetition's records OUTDIR/raw/fa2-ORDER-hBH-nN[-kv64].bin
//            [--kv-order desc|asc|both]  only one order (default both)
//            [--work W]            W mma.sync per warp a K/V tile (a multiple of 8), instead of the work
//                                  sized to --tile-us by a probe in each process: the probe's figure
//                                  varies from process to process, so runs meant to be compared (two
//                                  layouts, two processes) give the work the first printed (`work: … = W`)
//            [--head-pitch-kib P]  each head's Q, K, V and O rows P KiB after the previous head's
//                                  (default the head's own N·d·2 bytes: [B·H, N, d], contiguous)
//            [--layout bshd]       the heads' rows interleaved, PyTorch's [B, N, H, d] strides with
//                                  H = 16 heads a batch (B = B·H / 16; when 16 does not divide B·H, B = 1)
//            The work and its order are the same in every layout; only the addresses move, and the
//            labels end in -pPk or -bshd (the default's unmarked).
//        kv_drift analyse FILE.bin        the same analysis of a raw record (no GPU needed)
//
// FlashAttention-2's grid ("--grid fa2"): no persistent CTAs but one CTA a query block, grid
// (Tr, B·H) with blockIdx.x the row block (the GPU starts them row block fastest), 128 threads as
// hbmlab's flash2 at d = 128, Q_i, K_j and V_j in 96 KiB of shared memory so that two CTAs share an
// SM, K/V from the diagonal down to 0 (FlashAttention-2's order) or up from 0. As FlashAttention-2
// does, V_j is fetched while the CTA works on Q·K_jᵀ and the next K while it works on P·V_j; the
// stamp is taken when K_j is in. K/V tiles of 128 × 128, or 128 × 64 with --kv-rows 64 (flash2's
// at d = 128; the shared memory stays 96 KiB, so still two CTAs an SM). The work of a 128 × 128 tile
// is sized to `--tile-us` (default 6 µs) with two CTAs an SM, a 128 × 64 tile's to half: hbmlab's
// flash2 takes about 5,500 SM cycles per 128 × 64 K/V block with two CTAs an SM, two blocks ≈
// 11,000 cycles, 6 µs at the 1.82 GHz ncu reads on flash2 (h100-onchip-ncu.csv).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.cuh"

namespace {

void check(cudaError_t e, const char* what) { bench::check(e, "kv_drift", what); }

constexpr int kThreads = 384;                // three warpgroups, as cuDNN's forward
constexpr int kTileRows = 128, kHeadDim = 128;
constexpr int kRowVec = kHeadDim * 2 / 16;              // 16-byte vectors in one fp16 row of d
constexpr int kTileVec = kTileRows * kRowVec;            // 16-byte vectors in one 128 × 128 fp16 tile
constexpr int kStageBytes = 2 * kTileVec * 16;           // K_j and V_j
constexpr int kSmemBytes = 2 * kStageBytes + 2 * kTileVec * 16;  // two K/V stages, two Q buffers
constexpr double kMiB = 1024.0 * 1024.0;
constexpr int kFa2Threads = 128;                          // hbmlab's flash2 at d = 128
constexpr int kFa2SmemBytes = 3 * kTileVec * 16;          // Q_i, K_j, V_j: 96 KiB, two CTAs an SM
constexpr int kFa2Grid = 4;                               // the raw record's flag: one CTA an item
constexpr int kMaxWork = 1 << 16;  // --work at most: about 450 µs a 128 × 128 tile at the H100's 6.9 ns an MMA
constexpr int kKv64 = 8;                                  // the raw record's flag: 128 × 64 K/V tiles

// [SECTION] The sweep (device)

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct Sweep {
  const uint4 *q, *k, *v;
  uint4* o;
  int heads, rows;                // H, Tr
  int longest_first, kv_descending, dynamic_items, heads_interleaved;
  int work;                       // mma.sync per warp per K/V tile
  unsigned int* next_item;        // the atomic counter (dynamic_items)
  unsigned long long* step_ns;    // per CTA: cap_steps stamps
  int cap_steps;
  int* item_log;                  // per CTA: cap_items pairs (item, its first step)
  int cap_items;
  int* per_cta;                   // per CTA: steps, items, smid, overflowed
};

struct Step {
  int item, h, i, jidx, qbuf;     // item < 0: none
};

__device__ Step first_step(const Sweep& p, int item, int qbuf) {
  Step s{-1, 0, 0, 0, qbuf};
  if (item < 0 || item >= p.heads * p.rows) return s;
  s.item = item;
  s.h = p.heads_interleaved ? item % p.heads : item / p.rows;
  const int r = p.heads_interleaved ? item / p.heads : item % p.rows;
  s.i = p.longest_first ? p.rows - 1 - r : r;
  return s;
}
__device__ int kv_index(const Sweep& p, const Step& s) { return p.kv_descending ? s.i - s.jidx : s.jidx; }

__device__ void issue(const Sweep& p, const Step& s, unsigned int stage_base, unsigned int q_base) {
  const int j = kv_index(p, s);
  const std::size_t tile = (std::size_t(s.h) * p.rows + j) * kTileVec;
  for (int x = threadIdx.x; x < 2 * kTileVec; x += blockDim.x) {
    const uint4* src = x < kTileVec ? p.k + tile + x : p.v + tile + (x - kTileVec);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(stage_base + x * 16), "l"(src) : "memory");
  }
  if (s.jidx == 0) {
    const std::size_t qt = (std::size_t(s.h) * p.rows + s.i) * kTileVec;
    for (int x = threadIdx.x; x < kTileVec; x += blockDim.x)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(q_base + s.qbuf * kTileVec * 16 + x * 16),
                   "l"(p.q + qt + x)
                   : "memory");
  }
}

__global__ void __launch_bounds__(kThreads, 1) kv_sweep(Sweep p) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ Step info[2];
  __shared__ int static_taken;
  const unsigned int base = static_cast<unsigned int>(__cvta_generic_to_shared(smem));
  const unsigned int q_base = base + 2 * kStageBytes;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned long long* stamps = p.step_ns + std::size_t(blockIdx.x) * p.cap_steps;
  int* items = p.item_log + std::size_t(blockIdx.x) * 2 * p.cap_items;
  auto take = [&]() -> int {  // thread 0 only
    if (p.dynamic_items) return int(atomicAdd(p.next_item, 1u));
    return int(blockIdx.x + gridDim.x * static_taken++);
  };
  if (threadIdx.x == 0) {
    static_taken = 0;
    info[0] = first_step(p, take(), 0);
  }
  __syncthreads();
  float acc[4][4] = {};
  int steps = 0, n_items = 0, overflow = 0;
  if (info[0].item >= 0) {
    issue(p, info[0], base, q_base);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    for (int s = 0;; ++s) {
      const Step cur = info[s & 1];
      if (threadIdx.x == 0) {
        Step nxt = cur;
        if (cur.jidx < cur.i) {
          ++nxt.jidx;
        } else {
          nxt = first_step(p, take(), cur.qbuf ^ 1);
        }
        info[(s + 1) & 1] = nxt;
      }
      __syncthreads();
      const Step nxt = info[(s + 1) & 1];
      if (nxt.item >= 0) issue(p, nxt, base + ((s + 1) & 1) * kStageBytes, q_base);
      asm volatile("cp.async.commit_group;\ncp.async.wait_group 1;\n" ::: "memory");
      __syncthreads();
      if (threadIdx.x == 0) {
        if (s < p.cap_steps) stamps[s] = global_ns(); else overflow = 1;
        if (cur.jidx == 0) {
          if (n_items < p.cap_items) {
            items[2 * n_items] = cur.item;
            items[2 * n_items + 1] = s;
          } else {
            overflow = 1;
          }
          ++n_items;
        }
      }
      ++steps;
      // The tile's work: operands from K_j, V_j and Q_i in shared memory, `work` MMAs per warp.
      const uint32_t* kv = reinterpret_cast<const uint32_t*>(smem + (s & 1) * kStageBytes);
      const uint32_t* qs = reinterpret_cast<const uint32_t*>(smem + 2 * kStageBytes + cur.qbuf * kTileVec * 16);
      const int at = (warp * 32 + lane) * 4;
      uint32_t a[4] = {qs[at] ^ kv[at], qs[at + 1], qs[at + 2], qs[at + 3]};
      uint32_t b[2] = {kv[at + 8192], kv[at + 8193]};
      for (int w = 0; w < p.work; w += 4) {
#pragma unroll
        for (int u = 0; u < 4; ++u) bench::mma(acc[u], a, b);
      }
      if (cur.jidx == cur.i) {  // the item's last tile: O_i
        const std::size_t ot = (std::size_t(cur.h) * p.rows + cur.i) * kTileVec;
        const float sum = acc[0][0] + acc[1][1] + acc[2][2] + acc[3][3] + float(kv[at + 4] & 0xff);
        for (int x = threadIdx.x; x < kTileVec; x += blockDim.x)
          p.o[ot + x] = make_uint4(__float_as_uint(sum), x, cur.item, 0);
#pragma unroll
        for (int u = 0; u < 4; ++u)
          for (int e = 0; e < 4; ++e) acc[u][e] = 0;
      }
      __syncthreads();
      if (nxt.item < 0) break;
    }
  }
  if (threadIdx.x == 0) {
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    int* me = p.per_cta + 4 * blockIdx.x;
    me[0] = steps;
    me[1] = n_items;
    me[2] = int(smid);
    me[3] = overflow;
  }
}

// The tile's work alone (no loads): how long `work` MMAs per warp take, for sizing it.
template <int Threads, int CtasPerSm>
__global__ void __launch_bounds__(Threads, CtasPerSm) work_only(int work, int tiles, float* sink) {
  float acc[4][4] = {};
  uint32_t a[4] = {threadIdx.x, 1u, 2u, 3u}, b[2] = {blockIdx.x, 5u};
  for (int t = 0; t < tiles; ++t) {
    for (int w = 0; w < work; w += 4) {
#pragma unroll
      for (int u = 0; u < 4; ++u) bench::mma(acc[u], a, b);
    }
    __syncthreads();
  }
  if (acc[0][0] + acc[1][1] + acc[2][2] + acc[3][3] == 1.2345f) sink[0] = 1;
}

// [SECTION] FlashAttention-2's grid (device)

struct Fa2Sweep {
  const uint4 *q, *k, *v;
  uint4* o;
  int rows, kv_descending, work;  // Tr; `work` mma.sync per warp per K/V tile, half on K_j, half on V_j
  int kv_split;                   // K/V tiles a 128-row block: 1 (128 × 128) or 2 (128 × 64)
  unsigned long long* step_ns;    // per CTA: rows · kv_split stamps
  int* per_cta;                   // per CTA: steps, smid
  // Where head h's row r starts, in 16-byte vectors (Q, K, V, O alike): (h / group)·batch_vec +
  // (h % group)·head_vec + r·row_vec. Contiguous: group B·H, head_vec N·d·2/16, row_vec d·2/16.
  long long head_vec, row_vec, batch_vec;
  int group;
};

// `vecs` 16-byte vectors of consecutive rows from src on, a row every `row_vec` vectors.
__device__ void load_tile(const uint4* src, unsigned int dst, int vecs, long long row_vec) {
  for (int x = threadIdx.x; x < vecs; x += blockDim.x)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst + x * 16),
                 "l"(src + (x / kRowVec) * row_vec + x % kRowVec)
                 : "memory");
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

__device__ void wait_tiles() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
}

// One CTA: query block i = blockIdx.x of head h = blockIdx.y (B·H heads), K/V tiles j from the
// diagonal's down to 0 or up (j = i..0 or 0..i at 128 × 128; 2i + 1..0 or 0..2i + 1 at 128 × 64).
__global__ void __launch_bounds__(kFa2Threads, 2) kv_fa2(Fa2Sweep p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const unsigned int q_s = static_cast<unsigned int>(__cvta_generic_to_shared(smem));
  const unsigned int k_s = q_s + kTileVec * 16, v_s = k_s + kTileVec * 16;
  const int i = blockIdx.x, cta = blockIdx.y * p.rows + blockIdx.x;
  const int n = p.kv_split * (i + 1), kv_vec = kTileVec / p.kv_split;  // K/V tiles, 16-byte vectors in one
  const long long head = (blockIdx.y / p.group) * p.batch_vec + (blockIdx.y % p.group) * p.head_vec;  // its row 0
  const long long kv_rows = kTileRows / p.kv_split;                                   // a K/V tile's rows
  const long long q_at = head + i * kTileRows * p.row_vec;                            // Q_i's (and O_i's) row 0
  auto kv_at = [&](int j) { return head + j * kv_rows * p.row_vec; };                 // K_j's (and V_j's) row 0
  unsigned long long* stamps = p.step_ns + std::size_t(cta) * p.rows * p.kv_split;
  auto tile_of = [&](int x) { return p.kv_descending ? n - 1 - x : x; };
  load_tile(p.q + q_at, q_s, kTileVec, p.row_vec);
  load_tile(p.k + kv_at(tile_of(0)), k_s, kv_vec, p.row_vec);
  const uint32_t* qs = reinterpret_cast<const uint32_t*>(smem);
  const uint32_t* ks = qs + kTileVec * 4;
  const uint32_t* vs = ks + kTileVec * 4;
  const int at = threadIdx.x * 4, half = 4096 / p.kv_split;  // operands within a K/V tile
  float acc[4][4] = {};
  for (int x = 0; x < n; ++x) {
    const int j = tile_of(x);
    wait_tiles();  // K_j (and Q_i) in
    if (threadIdx.x == 0) stamps[x] = global_ns();
    load_tile(p.v + kv_at(j), v_s, kv_vec, p.row_vec);
    {  // S = Q_i K_jᵀ
      uint32_t a[4] = {qs[at] ^ ks[at], qs[at + 1], qs[at + 2], qs[at + 3]};
      uint32_t b[2] = {ks[at + half], ks[at + half + 1]};
      for (int w = 0; w < p.work / 2; w += 4) {
#pragma unroll
        for (int u = 0; u < 4; ++u) bench::mma(acc[u], a, b);
      }
    }
    wait_tiles();  // V_j in, K_j read by every warp
    if (x + 1 < n) load_tile(p.k + kv_at(tile_of(x + 1)), k_s, kv_vec, p.row_vec);
    {  // O_i += P V_j
      uint32_t a[4] = {vs[at] ^ qs[at + 8], vs[at + 1], vs[at + 2], vs[at + 3]};
      uint32_t b[2] = {vs[at + half], vs[at + half + 1]};
      for (int w = 0; w < p.work / 2; w += 4) {
#pragma unroll
        for (int u = 0; u < 4; ++u) bench::mma(acc[u], a, b);
      }
    }
  }
  const float sum = acc[0][0] + acc[1][1] + acc[2][2] + acc[3][3];
  for (int x = threadIdx.x; x < kTileVec; x += blockDim.x)
    p.o[q_at + (x / kRowVec) * p.row_vec + x % kRowVec] = make_uint4(__float_as_uint(sum), x, cta, 0);
  if (threadIdx.x == 0) {
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    p.per_cta[2 * cta] = n;
    p.per_cta[2 * cta + 1] = int(smid);
  }
}

__global__ void fill(uint4* p, std::size_t n, unsigned int salt) {
  for (std::size_t x = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; x < n; x += std::size_t(gridDim.x) * blockDim.x)
    p[x] = make_uint4(unsigned(x) ^ salt, unsigned(x >> 32) + salt, 0x3c003c00u, 0x38003800u);
}

__global__ void touch(const uint4* p, std::size_t n, unsigned int* sink) {
  unsigned int s = 0;
  for (std::size_t x = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; x < n; x += std::size_t(gridDim.x) * blockDim.x) {
    const uint4 v = p[x];
    s ^= v.x ^ v.w;
  }
  if (s == 0x12345678u) sink[0] = s;
}

// [SECTION] The record and its analysis (host)

struct Record {
  std::string label;
  int heads = 0, rows = 0, kv_descending = 0, work = 0, longest_first = 1, heads_interleaved = 0;
  int one_cta_an_item = 0;        // FlashAttention-2's grid: CTA h·Tr + i sweeps item (h, i) alone
  int kv_split = 1;               // K/V tiles a 128-row block: 1 (128 × 128) or 2 (128 × 64)
  double aside_mib = 0;
  std::vector<int> smid;
  std::vector<std::vector<unsigned long long>> stamps;    // per CTA
  std::vector<std::vector<std::pair<int, int>>> items;    // per CTA: (item, first step)
  int head_of(int item) const { return heads_interleaved ? item % heads : item / rows; }
  int row_of(int item) const {
    const int r = heads_interleaved ? item / heads : item % rows;
    return longest_first ? rows - 1 - r : r;
  }
};

struct Event {
  unsigned long long t;
  int key;      // K/V tile h·Tr + j; Q tile H·Tr + item tile; O tile 2·H·Tr + item tile
  int bytes;
  int kind;     // 0 K/V read, 1 Q read, 2 O write
};

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, std::size_t(q * (v.size() - 1) + 0.5))];
}

// Reuse distances in 0.5 MiB bins up to 128 MiB, then one bin beyond.
constexpr int kBins = 257;
constexpr double kBinMiB = 0.5;

// FlashAttention-2's grid (one CTA an item): how the CTAs share the SMs and how many heads' K/V
// are in use at once. Returns the JSON fields; prints a line when asked.
std::string residency(const Record& r, bool print) {
  struct Life { double t0, t1, us_per_tile; int sm, head; };
  std::vector<Life> life;
  double t_min = 1e300, t_max = 0;
  for (std::size_t c = 0; c < r.stamps.size(); ++c) {
    const auto& st = r.stamps[c];
    if (st.empty() || r.items[c].empty()) continue;
    const double t0 = st.front() * 1e-3, t1 = st.back() * 1e-3;
    life.push_back({t0, t1, st.size() > 1 ? (t1 - t0) / double(st.size() - 1) : 0, r.smid[c], r.head_of(r.items[c][0].first)});
    t_min = std::min(t_min, t0);
    t_max = std::max(t_max, t1);
  }
  int sms = 0;
  for (const Life& l : life) sms = std::max(sms, l.sm + 1);
  std::vector<int> per_sm(sms, 0);
  for (const Life& l : life) ++per_sm[l.sm];
  // Each CTA of at least 8 tiles beside the CTA that shares its SM longest: the part of its life
  // it shares, and how much slower the slower of the two sweeps its tiles.
  std::vector<double> shared_part, speed_ratio;
  std::vector<std::vector<int>> on_sm(sms);
  for (std::size_t x = 0; x < life.size(); ++x) on_sm[life[x].sm].push_back(int(x));
  for (const Life& a : life) {
    if (a.t1 - a.t0 <= 0 || a.us_per_tile <= 0) continue;
    double best = 0, ratio = 0;
    for (int y : on_sm[a.sm]) {
      const Life& b = life[y];
      const double ov = std::min(a.t1, b.t1) - std::max(a.t0, b.t0);
      if (&b == &a || ov <= best || b.us_per_tile <= 0) continue;
      best = ov;
      ratio = std::max(a.us_per_tile, b.us_per_tile) / std::min(a.us_per_tile, b.us_per_tile);
    }
    if ((a.t1 - a.t0) / a.us_per_tile < 7) continue;
    shared_part.push_back(best / (a.t1 - a.t0));
    if (best > 0) speed_ratio.push_back(ratio);
  }
  // At 200 instants over the sweep: the CTAs running and the distinct heads they belong to.
  std::vector<double> running, heads_live;
  std::vector<char> live(r.heads, 0);
  for (int k = 0; k < 200; ++k) {
    const double t = t_min + (t_max - t_min) * (k + 0.5) / 200;
    std::fill(live.begin(), live.end(), 0);
    int n = 0, hs = 0;
    for (const Life& l : life)
      if (l.t0 <= t && t <= l.t1) {
        ++n;
        if (!live[l.head]) ++hs;
        live[l.head] = 1;
      }
    running.push_back(n);
    heads_live.push_back(hs);
  }
  const int sm_min = per_sm.empty() ? 0 : *std::min_element(per_sm.begin(), per_sm.end());
  const int sm_max = per_sm.empty() ? 0 : *std::max_element(per_sm.begin(), per_sm.end());
  char buf[768];
  std::snprintf(buf, sizeof buf,
                ",\"ctas_per_sm_min_max\":[%d,%d],\"shared_part_p10_p50\":[%.3f,%.3f],"
                "\"pair_speed_ratio_p50_p90\":[%.3f,%.3f],\"ctas_running_p10_p50_p90\":[%.0f,%.0f,%.0f],"
                "\"heads_live_p50_p90_max\":[%.0f,%.0f,%.0f]",
                sm_min, sm_max, quantile(shared_part, 0.1), quantile(shared_part, 0.5), quantile(speed_ratio, 0.5),
                quantile(speed_ratio, 0.9), quantile(running, 0.1), quantile(running, 0.5), quantile(running, 0.9),
                quantile(heads_live, 0.5), quantile(heads_live, 0.9), quantile(heads_live, 1));
  if (print)
    std::printf("%-34s   grid: %d..%d CTAs an SM; a CTA shares its SM over %.0f %% (p10) / %.0f %% (p50) of its "
                "sweep, the slower of the two %.3f× (p50) / %.3f× (p90) the faster's tile time; CTAs running p50 %.0f, "
                "heads in use p50 %.0f p90 %.0f max %.0f\n",
                "", sm_min, sm_max, 100 * quantile(shared_part, 0.1), 100 * quantile(shared_part, 0.5),
                quantile(speed_ratio, 0.5), quantile(speed_ratio, 0.9), quantile(running, 0.5), quantile(heads_live, 0.5),
                quantile(heads_live, 0.9), quantile(heads_live, 1));
  return buf;
}

std::string analyse(const Record& r, bool print) {
  const int tiles = r.heads * r.rows, kvs = r.kv_split, kv_tiles = tiles * kvs;  // Q/O tiles, K/V tiles
  std::vector<Event> ev;
  std::vector<double> step_us, cta_us_per_tile;
  // Each item's stamps in its tile order, for the pair drift.
  std::vector<std::vector<unsigned long long>> item_stamps(tiles);
  unsigned long long t_min = ~0ull, t_max = 0;
  for (std::size_t c = 0; c < r.stamps.size(); ++c) {
    const auto& st = r.stamps[c];
    const auto& it = r.items[c];
    for (std::size_t k = 0; k < it.size(); ++k) {
      const int item = it[k].first, s0 = it[k].second;
      const int h = r.head_of(item), i = r.row_of(item);
      const int n = kvs * (i + 1);
      if (s0 + n > int(st.size())) break;
      for (int jidx = 0; jidx < n; ++jidx) {
        const int j = r.kv_descending ? n - 1 - jidx : jidx;
        const unsigned long long t = st[s0 + jidx];
        ev.push_back({t, h * r.rows * kvs + j, 2 * kTileVec * 16 / kvs, 0});
        if (jidx + 1 < n) step_us.push_back((st[s0 + jidx + 1] - t) * 1e-3);
      }
      const int tile = h * r.rows + i;
      ev.push_back({st[s0], kv_tiles + tile, kTileVec * 16, 1});
      ev.push_back({st[s0 + n - 1] + 1, kv_tiles + tiles + tile, kTileVec * 16, 2});
      item_stamps[tile].assign(st.begin() + s0, st.begin() + s0 + n);
    }
    if (!st.empty()) {
      t_min = std::min(t_min, st.front());
      t_max = std::max(t_max, st.back());
      if (st.size() > 1) cta_us_per_tile.push_back((st.back() - st.front()) * 1e-3 / double(st.size() - 1));
    }
  }
  std::stable_sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) { return a.t < b.t; });
  // LRU stack distance in bytes: a Fenwick tree over event positions holds each key's bytes at its
  // latest access; the bytes between two accesses of a key are the distinct bytes touched between.
  const std::size_t n = ev.size();
  std::vector<long long> fen(n + 1, 0);
  auto add = [&](std::size_t pos, long long v) { for (++pos; pos <= n; pos += pos & (~pos + 1)) fen[pos] += v; };
  auto sum = [&](std::size_t pos) { long long s = 0; for (; pos > 0; pos -= pos & (~pos + 1)) s += fen[pos]; return s; };  // [0, pos)
  std::vector<long long> last(std::size_t(kv_tiles) + 2 * std::size_t(tiles), -1);
  std::vector<double> hist(kBins, 0);   // K/V re-read bytes by reuse distance
  double kv_first = 0, kv_reread = 0, q_bytes = 0;
  for (std::size_t x = 0; x < n; ++x) {
    const Event& e = ev[x];
    const long long prev = last[e.key];
    if (e.kind == 0) {
      if (prev < 0) {
        kv_first += e.bytes;
      } else {
        const double d = double(sum(x) - sum(std::size_t(prev) + 1)) / kMiB;
        hist[std::min(kBins - 1, int(d / kBinMiB))] += e.bytes;
        kv_reread += e.bytes;
      }
    } else if (e.kind == 1) {
      q_bytes += e.bytes;
    }
    if (prev >= 0) add(std::size_t(prev), -e.bytes);
    add(x, e.bytes);
    last[e.key] = long(x);
  }
  // Neighbouring rows of one head (i and i − 1): both read K_j, V_j for the tiles they share; how
  // much later the second reads them at the last shared tile than at the first, in µs and tiles.
  std::vector<double> drift_us, lead_us;
  const double med_step = quantile(step_us, 0.5);
  for (int h = 0; h < r.heads; ++h)
    for (int i = std::min(64, r.rows / 4); i < r.rows; ++i) {
      const auto& a = item_stamps[h * r.rows + i];
      const auto& b = item_stamps[h * r.rows + i - 1];
      if (a.empty() || b.empty()) continue;
      // Shared K/V tiles j = 0..kvs·i − 1: in row `row` (n = kvs·(row + 1) tiles) at jidx j
      // (ascending) or n − 1 − j (descending).
      auto at = [&](const std::vector<unsigned long long>& v, int row, int j) {
        return double(v[r.kv_descending ? kvs * (row + 1) - 1 - j : j]);
      };
      const int shared = kvs * i - 1;
      const double first = at(b, i - 1, 0) - at(a, i, 0), lastd = at(b, i - 1, shared) - at(a, i, shared);
      lead_us.push_back(std::fabs(first) * 1e-3);
      drift_us.push_back((lastd - first) * 1e-3);
    }
  std::vector<double> abs_drift;
  for (double d : drift_us) abs_drift.push_back(std::fabs(d));
  auto beyond = [&](double mib) {  // K/V re-read bytes at reuse distances ≥ mib
    double s = 0;
    for (int b = 0; b < kBins; ++b)
      if ((b + 0.5) * kBinMiB >= mib) s += hist[b];
    return s;
  };
  char buf[2048];
  std::string out = "{\"label\":\"" + r.label + "\"";
  std::snprintf(buf, sizeof buf,
                ",\"aside_mib\":%.3f,\"work\":%d,\"span_us\":%.1f,\"step_us_p10_p50_p90\":[%.3f,%.3f,%.3f],"
                "\"cta_us_per_tile_p10_p50_p90\":[%.3f,%.3f,%.3f],\"cta_us_per_tile_min_max\":[%.3f,%.3f],"
                "\"pair_drift_us_mean\":%.2f,\"pair_abs_drift_us_p50_p90_max\":[%.2f,%.2f,%.2f],"
                "\"pair_abs_drift_tiles_p50_p90\":[%.2f,%.2f],\"pair_lead_us_p50\":%.2f,\"pairs\":%zu,"
                "\"kv_first_mb\":%.1f,\"kv_reread_mb\":%.1f,\"q_mb\":%.1f,\"reuse_bin_mib\":%.2f,\"kv_reread_mb_by_reuse\":[",
                r.aside_mib, r.work, (t_max - t_min) * 1e-3, quantile(step_us, 0.1), med_step, quantile(step_us, 0.9),
                quantile(cta_us_per_tile, 0.1), quantile(cta_us_per_tile, 0.5), quantile(cta_us_per_tile, 0.9),
                quantile(cta_us_per_tile, 0), quantile(cta_us_per_tile, 1),
                drift_us.empty() ? 0.0 : [&] { double s = 0; for (double d : drift_us) s += d; return s / drift_us.size(); }(),
                quantile(abs_drift, 0.5), quantile(abs_drift, 0.9), quantile(abs_drift, 1),
                quantile(abs_drift, 0.5) / med_step, quantile(abs_drift, 0.9) / med_step, quantile(lead_us, 0.5),
                drift_us.size(), kv_first / 1e6, kv_reread / 1e6, q_bytes / 1e6, kBinMiB);
  out += buf;
  for (int b = 0; b < kBins; ++b) {
    std::snprintf(buf, sizeof buf, "%s%.3f", b ? "," : "", hist[b] / 1e6);
    out += buf;
  }
  out += "]";
  if (print) {
    std::printf("%-34s aside %6.2f MiB  span %7.1f us  step p50 %.3f us (p10 %.3f p90 %.3f)  CTA us/tile %.3f..%.3f\n",
                r.label.c_str(), r.aside_mib, (t_max - t_min) * 1e-3, med_step, quantile(step_us, 0.1),
                quantile(step_us, 0.9), quantile(cta_us_per_tile, 0), quantile(cta_us_per_tile, 1));
    std::printf("%-34s   neighbour rows: |drift| p50 %.2f us (%.2f tiles) p90 %.2f us (%.2f tiles) max %.2f us; "
                "start gap p50 %.2f us\n", "", quantile(abs_drift, 0.5), quantile(abs_drift, 0.5) / med_step,
                quantile(abs_drift, 0.9), quantile(abs_drift, 0.9) / med_step, quantile(abs_drift, 1),
                quantile(lead_us, 0.5));
    std::printf("%-34s   K/V re-reads %.1f MB; at reuse >= 12.5/18.75/25/31.25/37.5/50 MiB: %.1f/%.1f/%.1f/%.1f/%.1f/%.1f MB\n",
                "", kv_reread / 1e6, beyond(12.5) / 1e6, beyond(18.75) / 1e6, beyond(25) / 1e6, beyond(31.25) / 1e6,
                beyond(37.5) / 1e6, beyond(50) / 1e6);
  }
  if (r.one_cta_an_item) out += residency(r, print);
  return out + "}";
}

void write_raw(const Record& r, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::fprintf(stderr, "kv_drift: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  const int ctas = int(r.stamps.size());
  const int head[8] = {0x6b766466, ctas, r.heads, r.rows, r.kv_descending, r.work,
                      r.longest_first | (r.heads_interleaved << 1) | (r.one_cta_an_item ? kFa2Grid : 0) |
                          (r.kv_split == 2 ? kKv64 : 0),
                      int(r.aside_mib * 1000)};
  std::fwrite(head, sizeof head, 1, f);
  const int len = int(r.label.size());
  std::fwrite(&len, 4, 1, f);
  std::fwrite(r.label.data(), 1, len, f);
  for (int c = 0; c < ctas; ++c) {
    const int sizes[3] = {r.smid[c], int(r.stamps[c].size()), int(r.items[c].size())};
    std::fwrite(sizes, sizeof sizes, 1, f);
    for (const auto& it : r.items[c]) std::fwrite(&it, sizeof it, 1, f);
    std::fwrite(r.stamps[c].data(), 8, r.stamps[c].size(), f);
  }
  std::fclose(f);
}

int analyse_file(const char* path) {
  FILE* f = std::fopen(path, "rb");
  if (!f) {
    std::fprintf(stderr, "kv_drift: cannot read %s\n", path);
    return 2;
  }
  int head[8], len = 0;
  if (std::fread(head, sizeof head, 1, f) != 1 || head[0] != 0x6b766466 || std::fread(&len, 4, 1, f) != 1) {
    std::fprintf(stderr, "kv_drift: %s: not a kv_drift record\n", path);
    return 2;
  }
  Record r;
  r.label.resize(len);
  if (std::fread(r.label.data(), 1, len, f) != std::size_t(len)) return 2;
  r.heads = head[2];
  r.rows = head[3];
  r.kv_descending = head[4];
  r.work = head[5];
  r.aside_mib = head[7] / 1000.0;
  r.longest_first = head[6] & 1;
  r.heads_interleaved = (head[6] >> 1) & 1;
  r.one_cta_an_item = (head[6] & kFa2Grid) != 0;
  r.kv_split = (head[6] & kKv64) ? 2 : 1;
  r.smid.resize(head[1]);
  r.stamps.resize(head[1]);
  r.items.resize(head[1]);
  for (int c = 0; c < head[1]; ++c) {
    int sizes[3];
    if (std::fread(sizes, sizeof sizes, 1, f) != 1) {
      std::fprintf(stderr, "kv_drift: %s: truncated at CTA %d\n", path, c);
      return 2;
    }
    r.smid[c] = sizes[0];
    r.items[c].resize(sizes[2]);
    r.stamps[c].resize(sizes[1]);
    if (std::fread(r.items[c].data(), 8, sizes[2], f) != std::size_t(sizes[2]) ||
        std::fread(r.stamps[c].data(), 8, sizes[1], f) != std::size_t(sizes[1])) {
      std::fprintf(stderr, "kv_drift: %s: truncated at CTA %d\n", path, c);
      return 2;
    }
  }
  std::fclose(f);
  std::printf("%s\n", analyse(r, true).c_str());
  return 0;
}

// [SECTION] The runs

struct Order {
  const char* name;
  int longest_first, kv_descending, dynamic_items, heads_interleaved;
};

// Every order the binary knows; --orders picks some (the first four: the default).
constexpr Order kOrders[] = {{"longest-asc-dynamic", 1, 0, 1, 0},   {"longest-desc-dynamic", 1, 1, 1, 0},
                             {"longest-asc-static", 1, 0, 0, 0},    {"shortest-asc-dynamic", 0, 0, 1, 0},
                             {"shortest-asc-static", 0, 0, 0, 0},   {"shortest-desc-dynamic", 0, 1, 1, 0},
                             {"shortest-asc-dynamic-heads", 0, 0, 1, 1}, {"longest-asc-dynamic-heads", 1, 0, 1, 1}};
constexpr const char* kWorkNames[4] = {"memory", "balanced", "compute", "light"};

struct Options {
  bool raw = false;                       // aside-0 records of the balanced sweeps and longest-asc-dynamic
  std::vector<std::string> raw_every;     // labels whose records are kept at every set-aside
  std::vector<const Order*> orders;
  std::vector<int> works;                 // indices into kWorkNames
};

bool listed(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = s.find(',', at);
    out.push_back(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// Q, K, V and O of `tiles` 128 × 128 fp16 tiles each (Q, K, V filled) and the 256 MiB that empties the L2.
struct Tensors {
  uint4 *q, *k, *v, *o, *flush;
  std::size_t vec, flush_vec;  // 16-byte vectors in one tensor, in the flush buffer
};

Tensors make_tensors(std::size_t vecs, int sms) {
  Tensors t{};
  t.vec = vecs;
  t.flush_vec = (256u << 20) / 16;
  for (uint4** p : {&t.q, &t.k, &t.v, &t.o}) check(cudaMalloc(p, t.vec * 16), "malloc");
  check(cudaMalloc(&t.flush, t.flush_vec * 16), "malloc");
  fill<<<4 * sms, 256>>>(t.q, t.vec, 1);
  fill<<<4 * sms, 256>>>(t.k, t.vec, 2);
  fill<<<4 * sms, 256>>>(t.v, t.vec, 3);
  return t;
}

// How long one mma.sync per warp takes (ns) with `ctas` CTAs of Threads on the GPU, CtasPerSm an SM:
// work_only's 1,024 a tile over 64 tiles, the third of three launches.
template <int Threads, int CtasPerSm>
double ns_per_mma(int ctas, cudaEvent_t e0, cudaEvent_t e1, float* sink) {
  const int probe_work = 1024, probe_tiles = 64;
  double ns = 0;
  for (int rep = 0; rep < 3; ++rep) {
    check(cudaEventRecord(e0), "record");
    work_only<Threads, CtasPerSm><<<ctas, Threads>>>(probe_work, probe_tiles, sink);
    check(cudaEventRecord(e1), "record");
    check(cudaEventSynchronize(e1), "work_only");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
    ns = ms * 1e6 / (double(probe_work) * probe_tiles);
  }
  return ns;
}

int run_all(const std::string& outdir, const Options& opt) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  const int sms = prop.multiProcessorCount;
  int max_persist = 0;
  check(cudaDeviceGetAttribute(&max_persist, cudaDevAttrMaxPersistingL2CacheSize, 0), "attribute");
  std::printf("%s: %d SMs, L2 %d bytes, largest set-aside %d bytes\n", prop.name, sms, prop.l2CacheSize, max_persist);
  const int heads = 4, rows = 512;  // d = 128, N = 64K, H = 4, B = 1
  const Tensors t = make_tensors(std::size_t(heads) * rows * kTileVec, sms);
  uint4 *q = t.q, *k = t.k, *v = t.v, *o = t.o, *flush = t.flush, *aside;
  const std::size_t flush_vec = t.flush_vec, aside_vec = std::size_t(max_persist) / 16 + 1;
  check(cudaMalloc(&aside, aside_vec * 16), "malloc");
  fill<<<4 * sms, 256>>>(aside, aside_vec, 4);
  const long long total_steps = (long long)heads * rows * (rows + 1) / 2;
  const int cap_steps = int(2 * total_steps / sms + 2 * rows), cap_items = heads * rows;
  unsigned long long* step_ns;
  int *item_log, *per_cta;
  unsigned int *counter, *sink;
  float* fsink;
  check(cudaMalloc(&step_ns, std::size_t(sms) * cap_steps * 8), "malloc");
  check(cudaMalloc(&item_log, std::size_t(sms) * cap_items * 8), "malloc");
  check(cudaMalloc(&per_cta, std::size_t(sms) * 16), "malloc");
  check(cudaMalloc(&counter, 4), "malloc");
  check(cudaMalloc(&sink, 4), "malloc");
  check(cudaMalloc(&fsink, 4), "malloc");
  check(cudaFuncSetAttribute(kv_sweep, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes), "smem attribute");
  cudaStream_t side;
  check(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), "stream");
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "event");
  check(cudaEventCreate(&e1), "event");

  // The work per tile: MMAs per warp for 1.72 µs (cuDNN's time per tile) and 3.44 µs.
  const double ns_mma = ns_per_mma<kThreads, 1>(sms, e0, e1, fsink);
  const int cudnn_work = int(std::lround(1720 / ns_mma / 4)) * 4;
  std::printf("work: %.4f ns per mma.sync per warp (12 warps an SM); 1.72 us a tile = %d, 3.44 us = %d, 0.86 us = %d\n",
              ns_mma, cudnn_work, 2 * cudnn_work, cudnn_work / 8 * 4);
  const int works[4] = {0, cudnn_work, 2 * cudnn_work, cudnn_work / 8 * 4};
  const char* const* work_names = kWorkNames;
  const int asides_mib[6] = {0, 8, 16, 24, 30, 0};
  FILE* jl = std::fopen((outdir + "/kv-drift.jsonl").c_str(), "w");
  if (!jl) {
    std::fprintf(stderr, "kv_drift: cannot write %s/kv-drift.jsonl\n", outdir.c_str());
    return 1;
  }
  for (int a = 0; a < 6; ++a) {
    const std::size_t want = std::min<std::size_t>(std::size_t(asides_mib[a]) << 20, std::size_t(max_persist));
    check(cudaCtxResetPersistingL2Cache(), "reset persisting L2");
    check(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, want), "persisting L2 limit");
    std::size_t granted = 0;
    check(cudaDeviceGetLimit(&granted, cudaLimitPersistingL2CacheSize), "persisting L2 limit");
    cudaStreamAttrValue attr{};
    attr.accessPolicyWindow.base_ptr = aside;
    attr.accessPolicyWindow.num_bytes = want;
    attr.accessPolicyWindow.hitRatio = want ? 1.0f : 0.0f;
    attr.accessPolicyWindow.hitProp = want ? cudaAccessPropertyPersisting : cudaAccessPropertyNormal;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyNormal;
    check(cudaStreamSetAttribute(side, cudaStreamAttributeAccessPolicyWindow, &attr), "access policy window");
    for (const Order* op : opt.orders)
      for (int w : opt.works) {
        const Order& ord = *op;
        char label[96];
        std::snprintf(label, sizeof label, "%s-%s", ord.name, work_names[w]);
        Sweep p{q, k, v, o, heads, rows, ord.longest_first, ord.kv_descending, ord.dynamic_items, ord.heads_interleaved, works[w],
                counter, step_ns, cap_steps, item_log, cap_items, per_cta};
        check(cudaMemset(counter, 0, 4), "memset");
        fill<<<4 * sms, 256>>>(flush, flush_vec, 7 + a);  // the L2 emptied of K, V, Q and O
        check(cudaDeviceSynchronize(), "flush");
        if (want) {
          touch<<<2 * sms, 256, 0, side>>>(aside, want / 16, sink);  // the set-aside lines in
          check(cudaStreamSynchronize(side), "set-aside read");
        }
        check(cudaEventRecord(e0), "record");
        kv_sweep<<<sms, kThreads, kSmemBytes>>>(p);
        check(cudaGetLastError(), "kv_sweep launch");
        check(cudaEventRecord(e1), "record");
        check(cudaEventSynchronize(e1), "kv_sweep");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
        if (want) {
          touch<<<2 * sms, 256, 0, side>>>(aside, want / 16, sink);
          check(cudaStreamSynchronize(side), "probe");
        }
        Record r;
        r.label = label;
        r.heads = heads;
        r.rows = rows;
        r.kv_descending = ord.kv_descending;
        r.work = works[w];
        r.longest_first = ord.longest_first;
        r.heads_interleaved = ord.heads_interleaved;
        r.aside_mib = granted / kMiB;
        std::vector<int> pc(4 * sms);
        check(cudaMemcpy(pc.data(), per_cta, pc.size() * 4, cudaMemcpyDeviceToHost), "copy");
        std::vector<unsigned long long> all(std::size_t(sms) * cap_steps);
        std::vector<int> il(std::size_t(sms) * 2 * cap_items);
        check(cudaMemcpy(all.data(), step_ns, all.size() * 8, cudaMemcpyDeviceToHost), "copy");
        check(cudaMemcpy(il.data(), item_log, il.size() * 4, cudaMemcpyDeviceToHost), "copy");
        long long steps = 0;
        for (int c = 0; c < sms; ++c) {
          if (pc[4 * c + 3]) {
            std::fprintf(stderr, "kv_drift: %s: CTA %d overflowed its record\n", label, c);
            return 1;
          }
          steps += pc[4 * c];
          r.smid.push_back(pc[4 * c + 2]);
          r.stamps.emplace_back(all.begin() + std::size_t(c) * cap_steps, all.begin() + std::size_t(c) * cap_steps + pc[4 * c]);
          std::vector<std::pair<int, int>> its;
          for (int x = 0; x < pc[4 * c + 1]; ++x)
            its.emplace_back(il[std::size_t(c) * 2 * cap_items + 2 * x], il[std::size_t(c) * 2 * cap_items + 2 * x + 1]);
          r.items.push_back(std::move(its));
        }
        if (steps != total_steps) {
          std::fprintf(stderr, "kv_drift: %s: %lld tiles swept, %lld expected\n", label, steps, total_steps);
          return 1;
        }
        std::printf("run %s aside_bytes %zu work %d event_us %.1f\n", label, granted, works[w], ms * 1e3);
        const std::string js = analyse(r, true);
        std::fprintf(jl, "{\"run\":%d,\"event_us\":%.1f,\"aside_bytes\":%zu,\"order\":\"%s\",\"work_level\":\"%s\",\"record\":%s}\n",
                     a, ms * 1e3, granted, ord.name, work_names[w], js.c_str());
        std::fflush(jl);
        if (opt.raw && a == 0 && (w == 1 || std::strcmp(ord.name, "longest-asc-dynamic") == 0))
          write_raw(r, outdir + "/raw/" + label + ".bin");
        if (listed(opt.raw_every, label)) write_raw(r, outdir + "/raw/" + label + "-" + std::to_string(a) + ".bin");
      }
  }
  check(cudaCtxResetPersistingL2Cache(), "reset persisting L2");
  check(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0), "persisting L2 limit");
  std::fclose(jl);
  return 0;
}

// Where FlashAttention-2's grid finds each head's rows (Q, K, V and O alike).
struct Fa2Layout {
  long long head_pitch_kib = 0;  // contiguous heads, one every this many KiB; 0: the head's own size
  bool bshd = false;             // PyTorch's [B, N, H, d] strides: the heads' rows interleaved
  int orders = 3;                // K/V descending (1), ascending (2), both (3)
};

// FlashAttention-2's grid at d = 128: B·H = `heads`, N = `seq`; K/V descending then ascending.
// `fixed_work` > 0: the mma.sync per warp a K/V tile (--work), instead of sizing them to `tile_us`.
int run_fa2(const std::string& outdir, int heads, int seq, double tile_us, int fixed_work, int reps, int kv_split,
            const Fa2Layout& lay) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  const int sms = prop.multiProcessorCount;
  const int rows = seq / kTileRows;
  check(cudaFuncSetAttribute(kv_fa2, cudaFuncAttributeMaxDynamicSharedMemorySize, kFa2SmemBytes), "smem attribute");
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kv_fa2, kFa2Threads, kFa2SmemBytes), "occupancy");
  std::printf("%s: %d SMs; FlashAttention-2's grid: %d × %d CTAs of %d threads, %d bytes of shared memory, %d an SM\n",
              prop.name, sms, rows, heads, kFa2Threads, kFa2SmemBytes, per_sm);
  if (per_sm != 2) {
    std::fprintf(stderr, "kv_drift: --grid fa2: %d CTAs fit an SM, not 2\n", per_sm);
    return 1;
  }
  // [B·H, N, d] by default; a pitch spaces the heads out; bshd interleaves the rows of the H = 16 heads
  // of each batch (B = B·H / 16, as hbmlab simulate is given these shapes), [B, N, H, d].
  const int group = lay.bshd && heads % 16 == 0 ? 16 : heads;
  const long long row_vec = lay.bshd ? (long long)group * kRowVec : kRowVec;
  const long long head_vec = lay.bshd ? kRowVec : lay.head_pitch_kib ? lay.head_pitch_kib * 1024 / 16 : (long long)seq * kRowVec;
  const long long batch_vec = (long long)seq * group * kRowVec;  // used by bshd alone (group < B·H)
  std::string suffix;  // the labels' mark of a layout other than the default
  if (lay.bshd) suffix = "-bshd";
  if (lay.head_pitch_kib) suffix = "-p" + std::to_string(lay.head_pitch_kib) + "k";
  if (!suffix.empty())
    std::printf("layout %s: %d heads a batch, a head every %lld bytes, a row every %lld bytes (a head's rows are %lld bytes)\n",
                suffix.c_str() + 1, group, head_vec * 16, row_vec * 16, (long long)seq * kRowVec * 16);
  const long long vecs = (heads / group - 1) * batch_vec + (group - 1) * head_vec + (seq - 1) * row_vec + kRowVec;
  const Tensors t = make_tensors(std::size_t(vecs), sms);
  if (!suffix.empty())
    std::printf("layout %s: %.1f MiB a tensor at Q %p K %p V %p O %p\n", suffix.c_str() + 1, vecs * 16 / kMiB,
                static_cast<void*>(t.q), static_cast<void*>(t.k), static_cast<void*>(t.v), static_cast<void*>(t.o));
  const int ctas = heads * rows;
  unsigned long long* step_ns;
  int* per_cta;
  float* fsink;
  check(cudaMalloc(&step_ns, std::size_t(ctas) * rows * kv_split * 8), "malloc");
  check(cudaMalloc(&per_cta, std::size_t(ctas) * 8), "malloc");
  check(cudaMalloc(&fsink, 4), "malloc");
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "event");
  check(cudaEventCreate(&e1), "event");
  // The work a tile: MMAs per warp for `tile_us` with two CTAs of kFa2Threads on every SM, sized in
  // this process (so two processes' figures differ by their calibrations), or --work's.
  int work = fixed_work;
  if (work > 0) {
    std::printf("work: %d mma.sync per warp a 128 x %d tile (--work; not sized to a time)\n", work, kTileRows / kv_split);
  } else {
    const double ns_mma = ns_per_mma<kFa2Threads, 2>(2 * sms, e0, e1, fsink);
    // tile_us is a 128 × 128 tile's; a 128 × 64 one takes half.
    work = std::max(8, int(std::lround(tile_us * 1e3 / kv_split / ns_mma / 8)) * 8);
    std::printf("work: %.4f ns per mma.sync per warp (two CTAs of %d threads an SM); %.2f us a 128 x %d tile = %d\n",
                ns_mma, kFa2Threads, tile_us / kv_split, kTileRows / kv_split, work);
  }
  FILE* jl = std::fopen((outdir + "/kv-drift-fa2.jsonl").c_str(), "a");
  if (!jl) {
    std::fprintf(stderr, "kv_drift: cannot write %s/kv-drift-fa2.jsonl\n", outdir.c_str());
    return 1;
  }
  const long long total_steps = (long long)heads * kv_split * rows * (rows + 1) / 2;
  for (int desc : {1, 0})
    for (int rep = 0; rep < reps && (lay.orders & (desc ? 1 : 2)); ++rep) {
      char label[96];
      std::snprintf(label, sizeof label, "fa2-%s-h%d-n%d%s%s", desc ? "desc" : "asc", heads, seq, kv_split == 2 ? "-kv64" : "",
                    suffix.c_str());
      Fa2Sweep p{t.q, t.k, t.v, t.o, rows, desc, work, kv_split, step_ns, per_cta, head_vec, row_vec, batch_vec, group};
      fill<<<4 * sms, 256>>>(t.flush, t.flush_vec, 7 + rep);  // the L2 emptied of K, V, Q and O
      check(cudaDeviceSynchronize(), "flush");
      check(cudaEventRecord(e0), "record");
      kv_fa2<<<dim3(rows, heads), kFa2Threads, kFa2SmemBytes>>>(p);
      check(cudaGetLastError(), "kv_fa2 launch");
      check(cudaEventRecord(e1), "record");
      check(cudaEventSynchronize(e1), "kv_fa2");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
      std::vector<int> pc(2 * std::size_t(ctas));
      const std::size_t cap = std::size_t(rows) * kv_split;
      std::vector<unsigned long long> all(std::size_t(ctas) * cap);
      check(cudaMemcpy(pc.data(), per_cta, pc.size() * 4, cudaMemcpyDeviceToHost), "copy");
      check(cudaMemcpy(all.data(), step_ns, all.size() * 8, cudaMemcpyDeviceToHost), "copy");
      Record r;
      r.label = label;
      r.heads = heads;
      r.rows = rows;
      r.kv_descending = desc;
      r.work = work;
      r.longest_first = 0;
      r.one_cta_an_item = 1;
      r.kv_split = kv_split;
      long long steps = 0;
      for (int c = 0; c < ctas; ++c) {
        steps += pc[2 * c];
        r.smid.push_back(pc[2 * c + 1]);
        r.stamps.emplace_back(all.begin() + std::size_t(c) * cap, all.begin() + std::size_t(c) * cap + pc[2 * c]);
        r.items.push_back({{c, 0}});
      }
      if (steps != total_steps) {
        std::fprintf(stderr, "kv_drift: %s: %lld tiles swept, %lld expected\n", label, steps, total_steps);
        return 1;
      }
      std::printf("run %s rep %d work %d event_us %.1f\n", label, rep, work, ms * 1e3);
      const std::string js = analyse(r, true);
      const std::string layout = suffix.empty() ? "" : ",\"layout\":\"" + suffix.substr(1) + "\"";
      std::fprintf(jl, "{\"rep\":%d,\"event_us\":%.1f,\"heads\":%d,\"seq_len\":%d,\"kv_rows\":%d,\"order\":\"%s\"%s,\"record\":%s}\n",
                   rep, ms * 1e3, heads, seq, kTileRows / kv_split, desc ? "desc" : "asc", layout.c_str(), js.c_str());
      std::fflush(jl);
      if (rep == 0) write_raw(r, outdir + "/raw/" + label + ".bin");
      fill<<<4 * sms, 256>>>(t.o, t.vec, 9);  // O reset, so each sweep writes it afresh
    }
  std::fclose(jl);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "analyse") == 0) return analyse_file(argv[2]);
  if (argc >= 3 && std::strcmp(argv[1], "run") == 0) {
    Options opt;
    std::vector<std::string> orders = {"longest-asc-dynamic", "longest-desc-dynamic", "longest-asc-static",
                                       "shortest-asc-dynamic"};
    std::vector<std::string> works = {"memory", "balanced", "compute"};
    bool fa2 = false;
    int fa2_heads = 32, fa2_seq = 8192, fa2_reps = 2, fa2_kv_split = 1, fa2_work = 0;
    double fa2_tile_us = 6;
    bool tile_us_given = false;
    Fa2Layout fa2_layout;
    std::string fa2_only;  // the last option that needs --grid fa2
    for (int a = 3; a < argc; ++a) {
      const std::string arg = argv[a];
      if (arg == "--grid" && a + 1 < argc) {
        if (std::strcmp(argv[++a], "fa2") != 0) {
          std::fprintf(stderr, "kv_drift: --grid: unknown grid '%s' (fa2)\n", argv[a]);
          return 2;
        }
        fa2 = true;
      } else if (arg == "--kv-rows" && a + 1 < argc) {
        const std::string rows = argv[++a];
        if (rows != "128" && rows != "64") {
          std::fprintf(stderr, "kv_drift: --kv-rows: %s is not 128 or 64\n", rows.c_str());
          return 2;
        }
        fa2_kv_split = rows == "64" ? 2 : 1;
      } else if (arg == "--layout" && a + 1 < argc) {
        const std::string name = argv[++a];
        if (name != "bhsd" && name != "bshd") {
          std::fprintf(stderr, "kv_drift: --layout: unknown layout '%s' (bhsd, bshd)\n", name.c_str());
          return 2;
        }
        fa2_layout.bshd = name == "bshd";
        fa2_only = arg;
      } else if (arg == "--head-pitch-kib" && a + 1 < argc) {
        const double x = std::atof(argv[++a]);
        if (!(x > 0) || x != std::floor(x) || x > (1 << 24)) {
          std::fprintf(stderr, "kv_drift: --head-pitch-kib: %s is not a whole number of KiB from 1 to 16777216\n", argv[a]);
          return 2;
        }
        fa2_layout.head_pitch_kib = (long long)x;
        fa2_only = arg;
      } else if (arg == "--kv-order" && a + 1 < argc) {
        const std::string order = argv[++a];
        if (order != "desc" && order != "asc" && order != "both") {
          std::fprintf(stderr, "kv_drift: --kv-order: unknown order '%s' (desc, asc, both)\n", order.c_str());
          return 2;
        }
        fa2_layout.orders = order == "desc" ? 1 : order == "asc" ? 2 : 3;
        fa2_only = arg;
      } else if ((arg == "--heads" || arg == "--seq" || arg == "--reps" || arg == "--tile-us") && a + 1 < argc) {
        const double x = std::atof(argv[++a]);
        const bool whole = arg != "--tile-us";
        if (!(x > 0) || (whole && x != std::floor(x)) || (arg == "--seq" && std::fmod(x, kTileRows) != 0)) {
          std::fprintf(stderr, "kv_drift: %s: %s a positive %s\n", arg.c_str(), argv[a],
                       arg == "--seq" ? "multiple of 128" : whole ? "whole number" : "number");
          return 2;
        }
        (arg == "--heads" ? fa2_heads : arg == "--seq" ? fa2_seq : fa2_reps) = int(x);
        if (!whole) {
          fa2_tile_us = x;
          tile_us_given = true;
        }
      } else if (arg == "--work" && a + 1 < argc) {
        // Each K/V tile's work splits in two halves (Q·K_jᵀ, P·V_j) of 4 MMAs a step: a multiple of 8.
        const double x = std::atof(argv[++a]);
        if (!(x >= 8) || x != std::floor(x) || std::fmod(x, 8) != 0 || x > kMaxWork) {
          std::fprintf(stderr, "kv_drift: --work: %s is not a multiple of 8 from 8 to %d (mma.sync per warp a tile)\n",
                       argv[a], kMaxWork);
          return 2;
        }
        fa2_work = int(x);
        fa2_only = arg;
      } else if (arg == "--raw") {
        opt.raw = true;
      } else if ((arg == "--orders" || arg == "--works" || arg == "--raw-every") && a + 1 < argc) {
        (arg == "--orders" ? orders : arg == "--works" ? works : opt.raw_every) = split(argv[++a]);
      } else {
        std::fprintf(stderr, "kv_drift: unknown option '%s'\n", arg.c_str());
        return 2;
      }
    }
    for (const std::string& n : orders) {
      const Order* found = nullptr;
      for (const Order& o : kOrders)
        if (n == o.name) found = &o;
      if (!found) {
        std::fprintf(stderr, "kv_drift: --orders: unknown order '%s'\n", n.c_str());
        return 2;
      }
      opt.orders.push_back(found);
    }
    for (const std::string& n : works) {
      int found = -1;
      for (int w = 0; w < 4; ++w)
        if (n == kWorkNames[w]) found = w;
      if (found < 0) {
        std::fprintf(stderr, "kv_drift: --works: unknown work level '%s' (memory, balanced, compute, light)\n", n.c_str());
        return 2;
      }
      opt.works.push_back(found);
    }
    if (!fa2 && !fa2_only.empty()) {
      std::fprintf(stderr, "kv_drift: %s: only with --grid fa2\n", fa2_only.c_str());
      return 2;
    }
    if (fa2_work > 0 && tile_us_given) {
      std::fprintf(stderr, "kv_drift: --work: not with --tile-us (each sets the work a tile)\n");
      return 2;
    }
    if (fa2_layout.bshd && fa2_layout.head_pitch_kib) {
      std::fprintf(stderr, "kv_drift: --head-pitch-kib: not with --layout bshd (its heads are one row apart)\n");
      return 2;
    }
    if (fa2_layout.head_pitch_kib && fa2_layout.head_pitch_kib * 1024 < (long long)fa2_seq * kRowVec * 16) {
      std::fprintf(stderr, "kv_drift: --head-pitch-kib: %lld KiB is less than a head's %lld KiB (N = %d, d = 128)\n",
                   fa2_layout.head_pitch_kib, (long long)fa2_seq * kRowVec * 16 / 1024, fa2_seq);
      return 2;
    }
    if (fa2) return run_fa2(argv[2], fa2_heads, fa2_seq, fa2_tile_us, fa2_work, fa2_reps, fa2_kv_split, fa2_layout);
    return run_all(argv[2], opt);
  }
  std::fprintf(stderr, "usage: kv_drift run OUTDIR [--raw] [--orders A,B] [--works memory,balanced,compute] "
                       "[--raw-every LABEL,...] | kv_drift run OUTDIR --grid fa2 [--heads BH] [--seq N] [--tile-us T | --work W] "
                       "[--reps R] [--kv-rows 128|64] [--kv-order desc|asc|both] [--head-pitch-kib P | --layout bhsd|bshd] "
                       "| kv_drift analyse FILE.bin\n");
  return 2;
}
