// flash-decoding and flashdecoding++: split-KV decoding against a K/V cache, GQA-packed.
// Run: hbmlab measure --algo flash-decoding --seq-len 32768 --query-len 1 --heads 32 --kv-heads 8 --head-dim 128
//
// Layout: Q, O [B][H][NQ][d] and K, V [B][HKV][N][d] in the dtype. One instance is one (batch, K/V
// head); its R = g·NQ query rows (g = H/HKV) are packed position-major as the simulator's BlockGrid
// packs them: row r is position N − NQ + r/g of query head hkv·g + r mod g. O_part [B·HKV][S][R][d]
// and lse_part [B·HKV][S][R] are fp32.
//
// Versions:
//   v1 decode_split_kernel: CTA (s, i, instance) holds row block Q_i (16 or 32 rows, zero-padded) in shared
//      memory and streams the K/V blocks of split s through a three-stage cp.async ring; its four warps
//      take a quarter of each K_j, V_j's keys each, so the CTA's FLOPs and registers stay those of one
//      16-row group per warp whatever g·NQ is. S = Q_i K_jᵀ and O += P̃ V_j on tensor cores (mma.sync
//      m16n8k16, fp32 accumulators), the softmax in base 2 on the accumulators. At the end the four
//      warps' (m, ℓ, O) merge through shared memory; the CTA writes its normalised partial and
//      LSE_s = m + log ℓ (S > 1), or O and L directly (S = 1).
//      decode_combine_kernel: one warp per query row reads the S partials' LSE_s, weighs each O_part_s by
//      e^(LSE_s − LSE) and writes O.
//   flashdecoding++ (kUnified): every split subtracts one unified max φ fixed ahead of time, so the
//      split keeps no running max and rescales nothing; it writes Σ e^(x − φ)·v and ℓ_s = Σ e^(x − φ)
//      unnormalised, and the combine divides their sums. A split whose row max leaves φ's safe range
//      (where e^(x − φ) in the dtype could overflow or vanish: ±64 for bf16, about −10…+10 for fp16)
//      raises its row block's flag; a second launch of the
//      synchronised split kernel recomputes the flagged row blocks only (the others exit at once), and
//      the combine reads those partials the synchronised way.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "gpu/kernels.hpp"
#include "gpu/ptx.cuh"
#include "gpu/tiles.cuh"
#include "sim/algo/flashdecoding_pp/flashdecoding_pp.hpp"

namespace hbmlab {
// The rooms these kernels run, bound by their objects (sim/algo/registry.cpp lists the same accessors).
const Algorithm& flash_decoding_room();    // sim/algo/flash_decoding
const Algorithm& flashdecoding_pp_room();  // sim/algo/flashdecoding_pp
}  // namespace hbmlab

namespace hbmlab::gpu {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kStages = 3;
constexpr float kLog2e = 1.4426950408889634f;
// FlashDecoding++'s safe range for a row's largest score x around φ, in base 2 (the kernel works in
// e^x = 2^(x·log2 e)): the simulator's unified_max_safe_range for the dtype, so the counts and the
// kernel fall back on the same rows. fp16 gives [φ − 14, φ + 15] in base 2, bf16 ±92.
template <typename T> constexpr Dtype kDtype = Dtype::bf16;
template <> constexpr Dtype kDtype<__half> = Dtype::fp16;
template <typename T> constexpr float kAboveLog2 = float(unified_max_safe_range(kDtype<T>).above * kLog2e);
template <typename T> constexpr float kBelowLog2 = float(unified_max_safe_range(kDtype<T>).below * kLog2e);
static_assert(kAboveLog2<__half> == 15.f && kBelowLog2<__half> == 14.f, "fp16: 2^16 overflows, 2^-14 is the last normal");

// What one launch needs to find its rows and blocks.
struct DecodeGeometry {
  int N = 0, Nq = 0, H = 0, Hkv = 0, g = 1, R = 0;  // R = g·NQ rows per instance
  int Tr = 0, Tc = 0, splits = 1;
  float scale_log2 = 0, phi_log2 = 0;
  bool causal = false;

  // Element offset of packed row r of instance `inst` in Q or O ([B][H][NQ][d]).
  __device__ __forceinline__ std::int64_t q_row(int inst, int r, int d) const {
    const int b = inst / Hkv, hkv = inst % Hkv;
    const std::int64_t head = static_cast<std::int64_t>(b) * H + hkv * g + r % g;
    return (head * Nq + r / g) * d;
  }
  __device__ __forceinline__ int position(int r) const { return N - Nq + r / g; }
};

// The split kernel. kRows: query rows per CTA (16 per m16 group, kMT groups); kBc: keys per K/V block.
template <typename T, int kD, int kRows, int kBc, bool kCausal, bool kUnified>
__global__ void __launch_bounds__(kThreads)
decode_split_kernel(const T* __restrict__ hbm_Q, const T* __restrict__ hbm_K, const T* __restrict__ hbm_V,
             T* __restrict__ hbm_O, float* __restrict__ hbm_L, float* __restrict__ hbm_O_part,
             float* __restrict__ hbm_lse_part, int* __restrict__ fallback, DecodeGeometry geo, bool recompute) {
  constexpr int kMT = kRows / 16;          // m16 row groups, each warp holds all of them
  constexpr int kKW = kBc / kWarps;        // keys of each K/V block a warp takes
  constexpr int kSTiles = kKW / 8;         // n8 tiles of S per row group
  constexpr int kDTiles = kD / 8;          // n8 tiles of O per row group
  constexpr int kKSteps = kD / 16;
  static_assert(kRows % 16 == 0 && kKW % 16 == 0 && kD % 16 == 0 && kD / 8 >= 8, "shape");
  constexpr bool kSync = !kUnified;

  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t sram_Q = smem_u32(smem);                    // (kRows, d)
  const std::uint32_t sram_KV = sram_Q + kRows * kD * 2;          // kStages × (K (Bc, d), V (Bc, d))
  constexpr std::uint32_t kStageBytes = 2 * kBc * kD * 2;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int s = blockIdx.x / geo.Tr, i = blockIdx.x % geo.Tr, inst = blockIdx.y;
  if (recompute && fallback[inst * geo.Tr + i] == 0) return;  // this row block stayed in range
  const int row0 = i * kRows, rows = min(kRows, geo.R - row0);
  const T* K = hbm_K + static_cast<std::int64_t>(inst) * geo.N * kD;
  const T* V = hbm_V + static_cast<std::int64_t>(inst) * geo.N * kD;
  const int j_begin = s * geo.Tc / geo.splits;
  int j_end = (s + 1) * geo.Tc / geo.splits;
  // Causal: the K/V blocks whose first key lies after the block's last query are skipped.
  if (kCausal) j_end = min(j_end, geo.position(row0 + rows - 1) / kBc + 1);
  const int count = max(0, j_end - j_begin);

  // Q_i, row by row from its query head; padding rows read as zeros.
  for (int k = tid; k < kRows * (kD / 8); k += kThreads) {
    const int r = k / (kD / 8), c = k % (kD / 8);
    const bool in = r < rows;
    const T* src = in ? hbm_Q + geo.q_row(inst, row0 + r, kD) + c * 8 : hbm_Q;
    cp_async_16(sram_Q + swz<kD>(r, c) * 16, src, in ? 16 : 0);
  }
  auto load_block = [&](int n) {
    const std::uint32_t at = sram_KV + (n % kStages) * kStageBytes;
    load_tile<T, kD, kBc, kThreads>(at, K, (j_begin + n) * kBc, geo.N, tid);
    load_tile<T, kD, kBc, kThreads>(at + kBc * kD * 2, V, (j_begin + n) * kBc, geo.N, tid);
  };
#pragma unroll
  for (int n = 0; n < kStages - 1; ++n) {
    if (n < count) load_block(n);
    cp_async_commit();
  }

  float reg_O[kMT][kDTiles][4];
  float reg_m[kMT][2], reg_l[kMT][2];  // rows lane/4 and lane/4 + 8 of each group; m in log2 units
  float reg_max[kMT][2];               // unified: the row's largest score (log2 units), for the range check
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      reg_m[mt][h] = kSync ? -INFINITY : geo.phi_log2;
      reg_l[mt][h] = 0.f;
      reg_max[mt][h] = -INFINITY;
    }
#pragma unroll
    for (int t = 0; t < kDTiles; ++t) reg_O[mt][t][0] = reg_O[mt][t][1] = reg_O[mt][t][2] = reg_O[mt][t][3] = 0.f;
  }
  const int key0 = warp * kKW;  // this warp's keys within each block
  auto q_offset = [&](int mt, int kk) -> std::uint32_t {
    return swz<kD>(16 * mt + (lane % 8) + 8 * ((lane / 8) % 2), 2 * kk + lane / 16) * 16;
  };
  auto k_offset = [&](int kk, int key) -> std::uint32_t {
    return swz<kD>(key + (lane % 8) + 8 * (lane / 16), 2 * kk + (lane / 8) % 2) * 16;
  };
  auto v_offset = [&](int pair, int key) -> std::uint32_t {
    return swz<kD>(key + (lane % 8) + 8 * ((lane / 8) % 2), 2 * pair + lane / 16) * 16;
  };

  for (int n = 0; n < count; ++n) {
    if (n + kStages - 1 < count) load_block(n + kStages - 1);
    cp_async_commit();
    cp_async_wait<kStages - 1>();
    __syncthreads();
    const std::uint32_t sK = sram_KV + (n % kStages) * kStageBytes, sV = sK + kBc * kD * 2;

    // S = Q_i K_jᵀ on this warp's keys.
    float reg_S[kMT][kSTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int t = 0; t < kSTiles; ++t) reg_S[mt][t][0] = reg_S[mt][t][1] = reg_S[mt][t][2] = reg_S[mt][t][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      std::uint32_t a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) ldmatrix_x4(a[mt], sram_Q + q_offset(mt, kk));
#pragma unroll
      for (int t = 0; t < kSTiles; t += 2) {
        std::uint32_t b[4];
        ldmatrix_x4(b, sK + k_offset(kk, key0 + t * 8));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          mma_16816<T>(reg_S[mt][t], a[mt], b[0], b[1]);
          mma_16816<T>(reg_S[mt][t + 1], a[mt], b[2], b[3]);
        }
      }
    }

    // Keys past N, and (causal) keys after the query's position, score −∞.
    const int col0 = (j_begin + n) * kBc + key0;
    if (col0 + kKW > geo.N || (kCausal && col0 + kKW - 1 > geo.position(row0))) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int t = 0; t < kSTiles; ++t)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = col0 + t * 8 + (lane % 4) * 2 + (e & 1);
            const int r = row0 + 16 * mt + lane / 4 + (e / 2) * 8;
            if (col >= geo.N || (kCausal && col > geo.position(r))) reg_S[mt][t][e] = -INFINITY;
          }
    }

    // P̃ = e^(x − m): m the running max (synchronised, O and ℓ rescaled when it grows) or φ (unified).
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int t = 0; t < kSTiles; ++t)
          mx = fmaxf(mx, fmaxf(reg_S[mt][t][2 * h], reg_S[mt][t][2 * h + 1]) * geo.scale_log2);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        float base = geo.phi_log2;
        if constexpr (kSync) {
          const float m_new = fmaxf(reg_m[mt][h], mx);
          base = m_new == -INFINITY ? 0.f : m_new;  // no key yet: everything stays 0
          const float rescale = fast_exp2(reg_m[mt][h] - base);
          reg_m[mt][h] = m_new;
          reg_l[mt][h] *= rescale;
#pragma unroll
          for (int t = 0; t < kDTiles; ++t) {
            reg_O[mt][t][2 * h] *= rescale;
            reg_O[mt][t][2 * h + 1] *= rescale;
          }
        } else {
          reg_max[mt][h] = fmaxf(reg_max[mt][h], mx);
        }
        float sum = 0.f;
#pragma unroll
        for (int t = 0; t < kSTiles; ++t) {
          const float p0 = fast_exp2(reg_S[mt][t][2 * h] * geo.scale_log2 - base);
          const float p1 = fast_exp2(reg_S[mt][t][2 * h + 1] * geo.scale_log2 - base);
          reg_S[mt][t][2 * h] = p0;
          reg_S[mt][t][2 * h + 1] = p1;
          sum += p0 + p1;
        }
        reg_l[mt][h] += sum;
      }

    // O += P̃ V_j: two n8 tiles of S are the A fragment of one k16 step over this warp's keys.
    pv_mma<T>(reg_O, reg_S, sV, key0, v_offset);
    __syncthreads();  // the stage is refilled kStages − 1 blocks on
  }
  cp_async_wait<0>();
  __syncthreads();

  // The four warps' (m, ℓ, O) merge through shared memory (the K/V ring is free now).
  float* red_O = reinterpret_cast<float*>(smem + kRows * kD * 2);  // [kWarps][kRows][d]
  float* red_m = red_O + kWarps * kRows * kD;                      // [kWarps][kRows]
  float* red_l = red_m + kWarps * kRows;                           // [kWarps][kRows]
  float* red_max = red_l + kWarps * kRows;                         // [kWarps][kRows]
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = reg_l[mt][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int r = 16 * mt + lane / 4 + 8 * h;
      if (lane % 4 == 0) {
        red_m[warp * kRows + r] = reg_m[mt][h];
        red_l[warp * kRows + r] = l;
        red_max[warp * kRows + r] = reg_max[mt][h];
      }
#pragma unroll
      for (int t = 0; t < kDTiles; ++t) {
        const int col = t * 8 + (lane % 4) * 2;
        *reinterpret_cast<float2*>(red_O + (warp * kRows + r) * kD + col) = make_float2(reg_O[mt][t][2 * h], reg_O[mt][t][2 * h + 1]);
      }
    }
  __syncthreads();

  const bool partial = geo.splits > 1;
  const std::int64_t part_row0 = (static_cast<std::int64_t>(inst) * geo.splits + s) * geo.R + row0;
  for (int k = tid; k < rows * kD; k += kThreads) {
    const int r = k / kD, x = k % kD;
    float m = geo.phi_log2, weight[kWarps];
    if constexpr (kSync) {
      m = -INFINITY;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) m = fmaxf(m, red_m[w * kRows + r]);
    }
    float l = 0.f, o = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      weight[w] = kSync ? (m == -INFINITY ? 0.f : fast_exp2(red_m[w * kRows + r] - m)) : 1.f;
      l += weight[w] * red_l[w * kRows + r];
      o += weight[w] * red_O[(w * kRows + r) * kD + x];
    }
    if constexpr (kUnified) {
      if (x == 0 && !recompute) {  // leaving φ's safe range: this row block is recomputed
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, red_max[w * kRows + r]);
        if (mx != -INFINITY && (mx - geo.phi_log2 > kAboveLog2<T> || geo.phi_log2 - mx > kBelowLog2<T>))
          fallback[inst * geo.Tr + i] = 1;
      }
    }
    const bool normalise = kSync || !partial;  // the unified partials stay unnormalised
    const float out = normalise ? (l > 0.f ? o / l : 0.f) : o;
    if (partial) {
      hbm_O_part[(part_row0 + r) * kD + x] = out;
      if (x == 0) hbm_lse_part[part_row0 + r] = normalise ? (l > 0.f ? m + log2f(l) : -INFINITY) : l;
    } else {
      hbm_O[geo.q_row(inst, row0 + r, kD) + x] = from_float<T>(out);
      if (x == 0 && hbm_L != nullptr) hbm_L[geo.q_row(inst, row0 + r, 1)] = l > 0.f ? (m + log2f(l)) / kLog2e : -INFINITY;
    }
  }
}

// The combine: one warp per packed row; O = Σ_s e^(LSE_s − LSE)·O_part_s (synchronised partials,
// LSE_s in base 2) or Σ_s O_part_s / Σ_s ℓ_s (unified partials of a row block that stayed in range).
template <typename T, int kD, int kRows, bool kUnified>
__global__ void __launch_bounds__(kThreads)
decode_combine_kernel(const float* __restrict__ hbm_O_part, const float* __restrict__ hbm_lse_part, const int* __restrict__ fallback,
               T* __restrict__ hbm_O, DecodeGeometry geo) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int inst = blockIdx.y;
  const int S = geo.splits;
  for (int r = blockIdx.x * kWarps + warp; r < geo.R; r += gridDim.x * kWarps) {
    const bool unified = kUnified && fallback[inst * geo.Tr + r / kRows] == 0;
    const float* lse = hbm_lse_part + static_cast<std::int64_t>(inst) * S * geo.R + r;  // stride R per split
    float m = -INFINITY;
    if (!unified)
      for (int s = lane; s < S; s += 32) m = fmaxf(m, lse[static_cast<std::int64_t>(s) * geo.R]);
#pragma unroll
    for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float total = 0.f;
    for (int s = lane; s < S; s += 32) {
      const float v = lse[static_cast<std::int64_t>(s) * geo.R];
      total += unified ? v : (m == -INFINITY ? 0.f : fast_exp2(v - m));
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) total += __shfl_xor_sync(0xffffffffu, total, o);
    float acc[kD / 32] = {};
    for (int s = 0; s < S; ++s) {
      const float v = lse[static_cast<std::int64_t>(s) * geo.R];
      const float w = unified ? 1.f : (m == -INFINITY ? 0.f : fast_exp2(v - m));
      if (w == 0.f) continue;
      const float* part = hbm_O_part + ((static_cast<std::int64_t>(inst) * S + s) * geo.R + r) * kD;
#pragma unroll
      for (int k = 0; k < kD / 32; ++k) acc[k] += w * part[lane + 32 * k];
    }
    const float inv = total > 0.f ? 1.f / total : 0.f;
    T* O = hbm_O + geo.q_row(inst, r, kD);
#pragma unroll
    for (int k = 0; k < kD / 32; ++k) O[lane + 32 * k] = from_float<T>(acc[k] * inv);
  }
}

DecodeGeometry geometry(const AttentionProblem& p, int rows_per_cta, int Bc) {
  DecodeGeometry geo;
  geo.N = static_cast<int>(p.seq_len);
  geo.Nq = static_cast<int>(p.Nq());
  geo.H = static_cast<int>(p.heads);
  geo.Hkv = static_cast<int>(p.Hkv());
  geo.g = geo.H / geo.Hkv;
  geo.R = geo.g * geo.Nq;
  geo.Tr = (geo.R + rows_per_cta - 1) / rows_per_cta;
  geo.Tc = (geo.N + Bc - 1) / Bc;
  geo.splits = static_cast<int>(std::clamp<std::int64_t>(p.kv_splits, 1, geo.Tc));  // as BlockGrid clamps it
  geo.causal = p.causal;
  geo.scale_log2 = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim)) * 1.4426950408889634);
  geo.phi_log2 = static_cast<float>(p.unified_max.value_or(default_unified_max(p.seq_len)) * 1.4426950408889634);
  return geo;
}

template <int kD, int kRows, int kBc>
constexpr int split_smem_bytes() {
  constexpr int ring = kRows * kD * 2 + kStages * 2 * kBc * kD * 2;
  constexpr int merge = kRows * kD * 2 + kWarps * kRows * (kD + 3) * 4;
  return ring > merge ? ring : merge;
}

template <typename T, int kD, int kRows, int kBc, bool kCausal, bool kUnified>
void launch_causal(const AttentionProblem& p, const DeviceTensors& t, cudaStream_t stream, LaunchInfo* info) {
  constexpr int kSmem = split_smem_bytes<kD, kRows, kBc>();
  const DecodeGeometry geo = geometry(p, kRows, kBc);
  const dim3 grid(geo.splits * geo.Tr, static_cast<unsigned>(p.batch * geo.Hkv));
  auto split = decode_split_kernel<T, kD, kRows, kBc, kCausal, kUnified>;
  auto synchronised = decode_split_kernel<T, kD, kRows, kBc, kCausal, false>;
  CUDA_CHECK(cudaFuncSetAttribute(split, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CUDA_CHECK(cudaFuncSetAttribute(synchronised, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  if (info != nullptr) {
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, split));
    info->threads_per_cta = kThreads;
    info->registers_per_thread = attr.numRegs;
    info->smem_bytes_per_cta = static_cast<int>(kSmem + attr.sharedSizeBytes);
    info->ctas = static_cast<long long>(grid.x) * grid.y;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info->ctas_per_sm, split, kThreads, kSmem));
    return;
  }
  int* flags = t.fallback;
  if (kUnified) {
    if (flags == nullptr) throw std::invalid_argument("flashdecoding++: the fallback flags are missing");
    CUDA_CHECK(cudaMemsetAsync(flags, 0, sizeof(int) * static_cast<std::size_t>(grid.y) * geo.Tr, stream));
  }
  auto args = [&](auto kernel, bool recompute) {
    kernel<<<grid, kThreads, kSmem, stream>>>(t.at<const T>(Tensor::Q), t.at<const T>(Tensor::K), t.at<const T>(Tensor::V),
                                              t.at<T>(Tensor::O), t.at<float>(Tensor::lse), t.at<float>(Tensor::O_part),
                                              t.at<float>(Tensor::lse_part), flags, geo, recompute);
    CUDA_CHECK_LAUNCH();
  };
  args(split, false);
  if (kUnified) args(synchronised, true);  // only the flagged row blocks do work
  if (geo.splits > 1) {
    const dim3 combine_grid(static_cast<unsigned>((geo.R + kWarps - 1) / kWarps), grid.y);
    decode_combine_kernel<T, kD, kRows, kUnified><<<combine_grid, kThreads, 0, stream>>>(
        t.at<const float>(Tensor::O_part), t.at<const float>(Tensor::lse_part), flags, t.at<T>(Tensor::O), geo);
    CUDA_CHECK_LAUNCH();
  }
}

template <typename T, int kD, int kRows, int kBc, bool kUnified>
void launch_shape(const AttentionProblem& p, bool, const DeviceTensors& t, cudaStream_t s, LaunchInfo* info) {
  if (p.block_mask) throw std::invalid_argument("split-KV decoding takes no block mask");
  if (p.causal) launch_causal<T, kD, kRows, kBc, true, kUnified>(p, t, s, info);
  else launch_causal<T, kD, kRows, kBc, false, kUnified>(p, t, s, info);
}

template <bool kUnified>
struct Row {
  template <int D, int ROWS, int BC>
  static constexpr CompiledShape row() {
    return {D, ROWS, BC, &launch_shape<__half, D, ROWS, BC, kUnified>, &launch_shape<__nv_bfloat16, D, ROWS, BC, kUnified>};
  }
};

// Br is the query rows one CTA packs (g·NQ ≤ 16 in one, ≤ 32 in one with two m16 groups), Bc the
// K/V block. The first per d is the default. One table for both rooms.
template <bool kUnified>
constexpr auto kShapes = shape_table<kernel_tiles::split_kv, Row<kUnified>>();

class SplitKvKernels : public KernelFamily {
public:
  std::vector<ScratchTensor> scratch(const AttentionProblem& p) const override {
    const std::int64_t instances = p.batch * p.Hkv(), R = p.heads / p.Hkv() * p.Nq();
    // O_part and lse_part for the most splits any compiled shape can take (one per 64-key block).
    const std::int64_t splits = std::clamp<std::int64_t>(p.kv_splits, 1, (p.seq_len + 63) / 64);
    return {{Tensor::lse, p.batch * p.heads * p.Nq() * kStatBytes},
            {Tensor::O_part, instances * splits * R * p.head_dim * kStatBytes},
            {Tensor::lse_part, instances * splits * R * kStatBytes}};
  }
  bool takes_query_len() const override { return true; }
  bool takes_kv_heads() const override { return true; }
  std::int64_t default_max_n() const override { return 131072; }
  const char* launch_note() const override { return "the split kernel (the combine is a second, small launch)"; }
};

class FlashDecodingKernels final : public SplitKvKernels {
public:
  Algo algo() const override { return flash_decoding_room(); }
  std::span<const CompiledShape> shapes() const override { return kShapes<false>; }
  const char* profiler_names() const override { return "decode_split_kernel|decode_combine_kernel"; }
};

class FlashDecodingPPKernels final : public SplitKvKernels {
public:
  Algo algo() const override { return flashdecoding_pp_room(); }
  std::span<const CompiledShape> shapes() const override { return kShapes<true>; }
  const char* profiler_names() const override { return "decode_split_kernel|decode_combine_kernel"; }
  std::int64_t fallback_flags(const AttentionProblem& p) const override {
    return p.batch * p.Hkv() * ((p.heads / p.Hkv() * p.Nq() + 15) / 16);
  }
};

}  // namespace

const KernelFamily& flash_decoding_kernels() {
  static const FlashDecodingKernels family;
  return family;
}

const KernelFamily& flashdecoding_pp_kernels() {
  static const FlashDecodingPPKernels family;
  return family;
}

}  // namespace hbmlab::gpu
