// standard: the paper's Algorithm 0 — S = τ·Q Kᵀ written to HBM, P = softmax(S) read and written
// through HBM, O = P V — as three kernels, S and P (N × N each, problem dtype) really in HBM.
// Run: hbmlab measure --algo standard --seq-len 2048 --head-dim 64 [--blocks 64x64]
//
// Versions:
//   v1 three kernels: qk_kernel (tensor-core GEMM through WMMA 16×16×16, fp32 accumulate, one
//      Br × Bc tile of S per CTA), softmax_kernel (one CTA per row: the whole row of S read once
//      into shared memory, P written once; causal masks keys after the query, still N² traffic), pv_kernel (tensor-core
//      GEMM, one Br × d tile of O per CTA, P and V streamed in Bc-wide slices).
//   v2 bandwidth: S leaves qk_kernel in 16-byte stores; softmax_kernel sizes its CTA to the row
//      (64 to 256 threads) and moves S and P in 16-byte vectors; pv_kernel double-buffers P_ij, V_j
//      with cp.async. Each falls back to element-wise access when N is not a multiple of 8. v1 ran
//      at 1.0 to 1.6 TB/s per kernel on the H100 (ncu); see gpu/README.md for v2.
//      Known, intended difference from the flash kernels: S is rounded to the problem dtype before
//      the softmax, as the paper's HBM-resident S is; at logits near 1e4 (the large_logits stress
//      input) one fp16 ulp is 8, so that check is reported but not held to the tolerance.
#include <mma.h>

#include <algorithm>
#include <cmath>

#include "gpu/ptx.cuh"
#include "gpu/kernels.hpp"

namespace hbmlab {
// The rooms these kernels run, bound by their objects (sim/algo/registry.cpp lists the same accessors).
const Algorithm& standard_room();  // sim/algo/standard
}  // namespace hbmlab

namespace hbmlab::gpu {
namespace {

using namespace nvcuda;
constexpr int kWarps = 4;
constexpr int kPad = 8;  // elements of padding per shared-memory row (WMMA needs ld % 8 == 0)

// S_ij = τ Q_i K_jᵀ for one (Br, Bc) tile; d fits in shared memory whole.
template <typename T, int kD, int kBr, int kBc>
__global__ void __launch_bounds__(kWarps * 32)
qk_kernel(const T* __restrict__ hbm_Q, const T* __restrict__ hbm_K, T* __restrict__ hbm_S, int N, float scale) {
  static_assert(kBr % 32 == 0 && kBc % 32 == 0, "Br, Bc must be multiples of 32 (2 × 2 warps of 16 × 16 tiles)");
  constexpr int kLd = kD + kPad;
  constexpr int kWarpRows = kBr / 2, kWarpCols = kBc / 2;  // 2 × 2 warps
  constexpr int kFr = kWarpRows / 16, kFc = kWarpCols / 16;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sram_Qi = reinterpret_cast<T*>(smem);          // (Br, d + pad)
  T* sram_Kj = sram_Qi + kBr * kLd;                  // (Bc, d + pad)
  float* sram_S = reinterpret_cast<float*>(smem);    // (Br, Bc + 4), reuses the tiles after the GEMM

  const int tid = threadIdx.x, warp = tid / 32;
  const int r0 = blockIdx.y * kBr, c0 = blockIdx.x * kBc;
  const std::int64_t bh = blockIdx.z;
  const T* Q = hbm_Q + bh * N * kD;
  const T* K = hbm_K + bh * N * kD;
  constexpr int kVec = 8;  // 16-byte loads
  for (int k = tid; k < kBr * kD / kVec; k += kWarps * 32) {
    const int r = k / (kD / kVec), e = (k % (kD / kVec)) * kVec;
    int4 v = make_int4(0, 0, 0, 0);
    if (r0 + r < N) v = *reinterpret_cast<const int4*>(Q + static_cast<std::int64_t>(r0 + r) * kD + e);
    *reinterpret_cast<int4*>(sram_Qi + r * kLd + e) = v;
  }
  for (int k = tid; k < kBc * kD / kVec; k += kWarps * 32) {
    const int r = k / (kD / kVec), e = (k % (kD / kVec)) * kVec;
    int4 v = make_int4(0, 0, 0, 0);
    if (c0 + r < N) v = *reinterpret_cast<const int4*>(K + static_cast<std::int64_t>(c0 + r) * kD + e);
    *reinterpret_cast<int4*>(sram_Kj + r * kLd + e) = v;
  }
  __syncthreads();
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kFr][kFc];
  for (int a = 0; a < kFr; ++a)
    for (int b = 0; b < kFc; ++b) wmma::fill_fragment(acc[a][b], 0.f);
  const int wr = (warp / 2) * kWarpRows, wc = (warp % 2) * kWarpCols;
  for (int k = 0; k < kD; k += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[kFr];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb[kFc];  // Kᵀ: K rows are columns
    for (int a = 0; a < kFr; ++a) wmma::load_matrix_sync(fa[a], sram_Qi + (wr + a * 16) * kLd + k, kLd);
    for (int b = 0; b < kFc; ++b) wmma::load_matrix_sync(fb[b], sram_Kj + (wc + b * 16) * kLd + k, kLd);
    for (int a = 0; a < kFr; ++a)
      for (int b = 0; b < kFc; ++b) wmma::mma_sync(acc[a][b], fa[a], fb[b], acc[a][b]);
  }
  __syncthreads();
  constexpr int kLdS = kBc + 4;
  for (int a = 0; a < kFr; ++a)
    for (int b = 0; b < kFc; ++b)
      wmma::store_matrix_sync(sram_S + (wr + a * 16) * kLdS + wc + b * 16, acc[a][b], kLdS, wmma::mem_row_major);
  __syncthreads();
  T* S = hbm_S + bh * N * N;
  if (N % kVec == 0) {  // rows start on 16 bytes: eight elements of S per store
    for (int k = tid; k < kBr * kBc / kVec; k += kWarps * 32) {
      const int r = k / (kBc / kVec), c = (k % (kBc / kVec)) * kVec;
      if (r0 + r >= N || c0 + c >= N) continue;  // N % 8 == 0: the eight columns are all in or all out
      const int4 v = pack8<T>(sram_S + r * kLdS + c, scale);
      *reinterpret_cast<int4*>(S + static_cast<std::int64_t>(r0 + r) * N + c0 + c) = v;
    }
    return;
  }
  for (int k = tid; k < kBr * kBc; k += kWarps * 32) {
    const int r = k / kBc, c = k % kBc;
    if (r0 + r < N && c0 + c < N)
      S[static_cast<std::int64_t>(r0 + r) * N + c0 + c] = from_float<T>(sram_S[r * kLdS + c] * scale);
  }
}

// P = softmax(S) row by row, one CTA per row (blockDim.x threads, a multiple of 32, at most 256);
// keys after the query are masked when causal.
constexpr int kSoftmaxMaxThreads = 256;

__device__ __forceinline__ float block_reduce(float x, bool is_max, float* red) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  auto op = [is_max](float a, float b) { return is_max ? fmaxf(a, b) : a + b; };
  for (int o = 16; o > 0; o /= 2) x = op(x, __shfl_xor_sync(0xffffffffu, x, o));
  if (lane == 0) red[warp] = x;
  __syncthreads();
  x = lane < warps ? red[lane] : (is_max ? -INFINITY : 0.f);
  for (int o = 16; o > 0; o /= 2) x = op(x, __shfl_xor_sync(0xffffffffu, x, o));
  __syncthreads();  // red is reused by the next reduction
  return x;
}

template <typename T>
__global__ void __launch_bounds__(kSoftmaxMaxThreads) softmax_kernel(const T* __restrict__ hbm_S, T* __restrict__ hbm_P,
                                                                     int N, bool causal) {
  extern __shared__ float sram_row[];  // (N)
  __shared__ float red[32];
  const std::int64_t row_id = blockIdx.x;  // bh·N + r
  const int r = static_cast<int>(row_id % N);
  const T* S = hbm_S + row_id * N;
  T* P = hbm_P + row_id * N;
  const int tid = threadIdx.x, threads = blockDim.x;
  const int valid = causal ? r + 1 : N;
  // Algorithm 0 reads all of S, masked or not (docs/design.md#standard-attention: standard stays N²).
  float mx = -INFINITY;
  if (N % 8 == 0) {
#pragma unroll 4
    for (int v = tid; v < N / 8; v += threads) {
      const int4 raw = *reinterpret_cast<const int4*>(S + v * 8);
      const T* x = reinterpret_cast<const T*>(&raw);
      for (int e = 0; e < 8; ++e) {
        const int c = v * 8 + e;
        const float s = c < valid ? to_float(x[e]) : -INFINITY;
        sram_row[c] = s;
        mx = fmaxf(mx, s);
      }
    }
  } else {
    for (int c = tid; c < N; c += threads) {
      const float raw = to_float(S[c]);
      const float s = c < valid ? raw : -INFINITY + 0.f * raw;  // 0·s keeps the masked load
      sram_row[c] = s;
      mx = fmaxf(mx, s);
    }
  }
  mx = block_reduce(mx, true, red);
  float sum = 0.f;
  for (int c = tid; c < N; c += threads) {
    const float e = expf(sram_row[c] - mx);
    sram_row[c] = e;
    sum += e;
  }
  const float inv = 1.f / block_reduce(sum, false, red);
  if (N % 8 == 0) {
    for (int v = tid; v < N / 8; v += threads) {  // block_reduce's barrier: every element is written
      const int4 out = pack8<T>(sram_row + v * 8, inv);
      *reinterpret_cast<int4*>(P + v * 8) = out;
    }
  } else {
    for (int c = tid; c < N; c += threads) P[c] = from_float<T>(sram_row[c] * inv);
  }
}

// Threads for one row: a 16-byte vector each, 64 to 256 of them.
int softmax_threads(int N) { return std::min(kSoftmaxMaxThreads, std::max(64, (N / 8 + 31) / 32 * 32)); }

// O_i = P_i V for one (Br, d) tile of O; P and V stream through shared memory in Bc-wide slices,
// two stages deep: cp.async fetches P_i,j+1 and V_j+1 while the tensor cores work on P_ij V_j.
template <typename T, int kD, int kBr, int kBc>
struct PvTiles {
  static constexpr int kLdP = kBc + kPad, kLdV = kD + kPad, kLdO = kD + 4;
  static constexpr int kStage = kBr * kLdP + kBc * kLdV;  // elements of one stage
  static constexpr int kSmem = 2 * kStage * 2 > kBr * kLdO * 4 ? 2 * kStage * 2 : kBr * kLdO * 4;
};

template <typename T, int kD, int kBr, int kBc>
__global__ void __launch_bounds__(kWarps * 32)
pv_kernel(const T* __restrict__ hbm_P, const T* __restrict__ hbm_V, T* __restrict__ hbm_O, int N) {
  static_assert(kBr % 64 == 0 || kBr == 32, "Br must be 32 or a multiple of 64");
  static_assert(kBc % 16 == 0 && kD % 64 == 0, "Bc multiple of 16, d multiple of 64");
  using Tiles = PvTiles<T, kD, kBr, kBc>;
  constexpr int kLdP = Tiles::kLdP, kLdV = Tiles::kLdV, kLdO = Tiles::kLdO;
  constexpr int kWarpRows = kBr / kWarps < 16 ? 16 : kBr / kWarps;
  constexpr int kRowWarps = kBr / kWarpRows;            // warps along rows
  constexpr int kColWarps = kWarps / kRowWarps;         // warps along d
  constexpr int kWarpCols = kD / kColWarps;
  constexpr int kFr = kWarpRows / 16, kFc = kWarpCols / 16;
  extern __shared__ __align__(128) unsigned char smem[];
  T* stages = reinterpret_cast<T*>(smem);          // 2 × [(Br, Bc + pad) of P, (Bc, d + pad) of V]
  float* sram_O = reinterpret_cast<float*>(smem);  // (Br, d + 4) after the loop

  const int tid = threadIdx.x, warp = tid / 32;
  const int r0 = blockIdx.x * kBr;
  const std::int64_t bh = blockIdx.y;
  const T* P = hbm_P + bh * N * N;
  const T* V = hbm_V + bh * N * kD;
  const bool vector_rows = N % 8 == 0;  // P's rows start on 16 bytes
  auto load = [&](int stage, int c0) {
    T* sram_P = stages + stage * Tiles::kStage;
    T* sram_V = sram_P + kBr * kLdP;
    if (vector_rows) {
      for (int k = tid; k < kBr * kBc / 8; k += kWarps * 32) {
        const int r = k / (kBc / 8), c = (k % (kBc / 8)) * 8;
        const bool in = r0 + r < N && c0 + c < N;
        cp_async_16(smem_u32(sram_P + r * kLdP + c), in ? P + static_cast<std::int64_t>(r0 + r) * N + c0 + c : P,
                    in ? 16 : 0);
      }
    } else {
      for (int k = tid; k < kBr * kBc; k += kWarps * 32) {
        const int r = k / kBc, c = k % kBc;
        sram_P[r * kLdP + c] = (r0 + r < N && c0 + c < N) ? P[static_cast<std::int64_t>(r0 + r) * N + c0 + c]
                                                           : from_float<T>(0.f);
      }
    }
    for (int k = tid; k < kBc * kD / 8; k += kWarps * 32) {
      const int r = k / (kD / 8), e = (k % (kD / 8)) * 8;
      const bool in = c0 + r < N;
      cp_async_16(smem_u32(sram_V + r * kLdV + e), in ? V + static_cast<std::int64_t>(c0 + r) * kD + e : V,
                  in ? 16 : 0);
    }
    cp_async_commit();
  };

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kFr][kFc];
  for (int a = 0; a < kFr; ++a)
    for (int b = 0; b < kFc; ++b) wmma::fill_fragment(acc[a][b], 0.f);
  const int wr = (warp / kColWarps) * kWarpRows, wc = (warp % kColWarps) * kWarpCols;
  const int Tc = (N + kBc - 1) / kBc;
  load(0, 0);
  for (int j = 0; j < Tc; ++j) {
    if (j + 1 < Tc) load((j + 1) % 2, (j + 1) * kBc);  // the stage read in step j − 1: freed by its barrier
    else cp_async_commit();                            // an empty group keeps the wait count uniform
    cp_async_wait<1>();
    __syncthreads();
    const T* sram_P = stages + (j % 2) * Tiles::kStage;
    const T* sram_V = sram_P + kBr * kLdP;
    for (int k = 0; k < kBc; k += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[kFr];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
      for (int a = 0; a < kFr; ++a) wmma::load_matrix_sync(fa[a], sram_P + (wr + a * 16) * kLdP + k, kLdP);
      for (int b = 0; b < kFc; ++b) {
        wmma::load_matrix_sync(fb, sram_V + k * kLdV + wc + b * 16, kLdV);
        for (int a = 0; a < kFr; ++a) wmma::mma_sync(acc[a][b], fa[a], fb, acc[a][b]);
      }
    }
    __syncthreads();
  }
  cp_async_wait<0>();
  __syncthreads();
  for (int a = 0; a < kFr; ++a)
    for (int b = 0; b < kFc; ++b)
      wmma::store_matrix_sync(sram_O + (wr + a * 16) * kLdO + wc + b * 16, acc[a][b], kLdO, wmma::mem_row_major);
  __syncthreads();
  T* O = hbm_O + bh * N * kD;
  for (int k = tid; k < kBr * kD / 8; k += kWarps * 32) {
    const int r = k / (kD / 8), e = (k % (kD / 8)) * 8;
    if (r0 + r >= N) continue;
    const int4 out = pack8<T>(sram_O + r * kLdO + e);
    *reinterpret_cast<int4*>(O + static_cast<std::int64_t>(r0 + r) * kD + e) = out;
  }
}

template <typename T, int kD, int kBr, int kBc>
void launch_shape(const AttentionProblem& p, bool, const DeviceTensors& t, cudaStream_t stream, LaunchInfo* info) {
  const int N = static_cast<int>(p.seq_len);
  const unsigned bh = static_cast<unsigned>(p.instances());
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kD)));
  constexpr int kSmemQK = (kBr + kBc) * (kD + kPad) * 2 > kBr * (kBc + 4) * 4 ? (kBr + kBc) * (kD + kPad) * 2
                                                                               : kBr * (kBc + 4) * 4;
  auto qk = qk_kernel<T, kD, kBr, kBc>;
  CUDA_CHECK(cudaFuncSetAttribute(qk, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemQK));
  if (info != nullptr) {
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, qk));
    info->threads_per_cta = kWarps * 32;
    info->registers_per_thread = attr.numRegs;
    info->smem_bytes_per_cta = static_cast<int>(kSmemQK + attr.sharedSizeBytes);
    info->ctas = static_cast<long long>((N + kBc - 1) / kBc) * ((N + kBr - 1) / kBr) * bh;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info->ctas_per_sm, qk, kWarps * 32, kSmemQK));
    return;
  }
  qk<<<dim3((N + kBc - 1) / kBc, (N + kBr - 1) / kBr, bh), kWarps * 32, kSmemQK, stream>>>(
      t.at<const T>(Tensor::Q), t.at<const T>(Tensor::K), t.at<T>(Tensor::S), N, scale);
  CUDA_CHECK_LAUNCH();
  const int smem_row = N * 4;
  CUDA_CHECK(cudaFuncSetAttribute(softmax_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_row));
  softmax_kernel<T><<<static_cast<unsigned>(bh * static_cast<unsigned>(N)), softmax_threads(N), smem_row, stream>>>(
      t.at<const T>(Tensor::S), t.at<T>(Tensor::P), N, p.causal);
  CUDA_CHECK_LAUNCH();
  constexpr int kSmemPV = PvTiles<T, kD, kBr, kBc>::kSmem;
  auto pv = pv_kernel<T, kD, kBr, kBc>;
  CUDA_CHECK(cudaFuncSetAttribute(pv, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemPV));
  pv<<<dim3((N + kBr - 1) / kBr, bh), kWarps * 32, kSmemPV, stream>>>(t.at<const T>(Tensor::P),
                                                                      t.at<const T>(Tensor::V), t.at<T>(Tensor::O), N);
  CUDA_CHECK_LAUNCH();
}

// A row of the shape table: launch_shape in fp16 and bf16.
struct Row {
  template <int D, int BR, int BC>
  static constexpr CompiledShape row() {
    return {D, BR, BC, &launch_shape<__half, D, BR, BC>, &launch_shape<__nv_bfloat16, D, BR, BC>};
  }
};

constexpr auto kShapes = shape_table<kernel_tiles::standard, Row>();

class StandardKernels final : public KernelFamily {
public:
  Algo algo() const override { return standard_room(); }
  std::span<const CompiledShape> shapes() const override { return kShapes; }
  std::vector<ScratchTensor> scratch(const AttentionProblem& p) const override {
    const std::int64_t bytes = p.instances() * p.seq_len * p.seq_len * p.elem_bytes();
    return {{Tensor::S, bytes}, {Tensor::P, bytes}};
  }
  std::string intended_difference(InputKind kind) const override {
    if (kind != InputKind::large_logits) return {};
    return "standard rounds S to the dtype before the softmax: at logits ~1e4 that is an intended difference";
  }
  const char* profiler_names() const override { return "qk_kernel|softmax_kernel|pv_kernel"; }
  std::int64_t default_max_n() const override { return 16384; }
  const char* launch_note() const override { return "the S = QK^T kernel of the three"; }
};

}  // namespace

const KernelFamily& standard_kernels() {
  static const StandardKernels family;
  return family;
}

}  // namespace hbmlab::gpu
