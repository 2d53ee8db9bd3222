// The SM's pipes, one at a time: how many bytes or operations per SM clock each sustains when the
// SM is given enough independent work, measured with the SM's own cycle counter (clock64):
//   smem_ld    ld.shared.v4 (16 bytes a thread, a warp's 512 bytes contiguous: no bank conflict);
//   ldmatrix   ldmatrix.x4 (512 bytes a warp instruction, eight 16-byte rows per 8x8 matrix);
//   smem_st    st.shared.v4;
//   mma.sync   m16n8k16 fp16 in, fp32 accumulate, with 1, 2, 4, 8, 16 warps on the SM, each warp
//              running 8 independent accumulators (as a 16-row stripe of a 16x64 tile does);
//   wgmma      m64nNk16 fp16 in, fp32 accumulate, both operands from shared memory, N = 64, 128,
//              256, one or two warpgroups, 8 k-steps into one accumulator per commit group;
//   ex2        ex2.approx.ftz.f32 (the exponent unit, MUFU.EX2), 8 independent chains a thread;
//   ffma       fma.rn.f32, 8 independent chains a thread;
//   issue      fma.rn.f32 and lop3.b32 (xor) in turn (two pipes, FMA and ALU, so the issue slot may limit).
// Each case runs one CTA per SM (the dynamic shared memory asked for leaves room for one), times
// the loop between two barriers with clock64 in thread 0, and reports the median over the SMs of
// work / cycles; the clock is the median cycles over the median event time of the launches.
// Operands are non-zero (a hash of the thread index), never all zeros.
// Build and run: gpu/bench/pipes.sh OUTDIR
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.cuh"

namespace {

constexpr int kSmemBytes = 160 * 1024;  // more than half of the 228 KiB: one CTA per SM

struct Out {
  long long* cycles;  // one per CTA
  unsigned* sink;     // keeps results alive
};

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ void fill_smem(std::uint32_t* words, int count) {
  for (int i = threadIdx.x; i < count; i += blockDim.x) words[i] = bench::half2_bits(i + 1, 2.0f);
  asm volatile("fence.proxy.async.shared::cta;\n" ::);  // wgmma reads it through the async proxy
  __syncthreads();
}

__device__ __forceinline__ long long start_clock() {
  __syncthreads();
  return clock64();
}
__device__ __forceinline__ void stop_clock(long long t0, const Out& out) {
  __syncthreads();
  if (threadIdx.x == 0) out.cycles[blockIdx.x] = clock64() - t0;
}

// [SECTION] shared memory

enum class SmemOp { ld_v4, ldmatrix_x4, st_v4 };
constexpr int kSmemThreads = 1024;
constexpr int kSmemStride = 16 * kSmemThreads;  // bytes the whole block covers in one access
constexpr int kSmemAccesses = 8;                // per thread and iteration (9 x 16 KiB fit in kSmemBytes)

// Thread t addresses 16 bytes at 16·t (+ a multiple of the block's 16 KiB): each warp's 512 bytes
// are contiguous, so an access is 4 wavefronts of 128 bytes with no bank conflict; ldmatrix.x4
// takes lane t's address as row t%8 of matrix t/8, the same 512 contiguous bytes. An iteration
// makes 8 accesses at 8 different addresses, then moves all of them by 0 or 16 KiB as a bit of the
// data it just loaded says, so the compiler can neither merge two loads nor hoist them out of the
// loop; all four registers loaded are used, so no load is narrowed.
template <SmemOp kOp>
__global__ void __launch_bounds__(kSmemThreads) smem_kernel(int iters, Out out) {
  extern __shared__ __align__(1024) std::uint32_t smem[];
  fill_smem(smem, kSmemBytes / 4);
  const std::uint32_t base = smem_addr(smem) + 16 * threadIdx.x;
  std::uint32_t acc = threadIdx.x, acc2 = 0, off = 0, next = 0;
  const long long t0 = start_clock();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < kSmemAccesses; ++u) {
      const std::uint32_t at = base + off + u * kSmemStride;
      std::uint32_t x, y, z, w;
      if constexpr (kOp == SmemOp::ld_v4) {
        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(x), "=r"(y), "=r"(z), "=r"(w) : "r"(at));
        acc ^= x ^ y;
        acc2 ^= z ^ w;
        if (u == 0) next = y & kSmemStride;
      } else if constexpr (kOp == SmemOp::ldmatrix_x4) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(x), "=r"(y), "=r"(z), "=r"(w) : "r"(at));
        acc ^= x ^ y;
        acc2 ^= z ^ w;
        if (u == 0) next = y & kSmemStride;
      } else {
        asm volatile("st.shared.v4.u32 [%0], {%1,%1,%1,%1};\n" ::"r"(at), "r"(acc));
        acc += 1;
      }
    }
    off = kOp == SmemOp::st_v4 ? off ^ kSmemStride : next;
  }
  stop_clock(t0, out);
  if ((acc ^ acc2) == 0x12345678u) out.sink[0] = acc;
}

// [SECTION] tensor pipe: mma.sync

constexpr int kMmaChains = 8;

__global__ void mma_sync_kernel(int iters, Out out) {
  std::uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = bench::half2_bits(threadIdx.x * 8 + i, 2.0f);
  for (int i = 0; i < 2; ++i) b[i] = bench::half2_bits(threadIdx.x * 8 + 4 + i, 2.0f);
  float c[kMmaChains][4] = {};
  const long long t0 = start_clock();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
#pragma unroll
      for (int k = 0; k < kMmaChains; ++k) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      }
    }
  }
  stop_clock(t0, out);
  float s = 0;
  for (int k = 0; k < kMmaChains; ++k) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
  if (s == 1234.5f) out.sink[0] = 1;
}

// [SECTION] tensor pipe: wgmma (sm_90a)

// The 64-bit shared-memory matrix descriptor: start address, leading and stride byte offsets
// (each in 16-byte units), no swizzle. The operands' layout does not change the rate.
__device__ __forceinline__ std::uint64_t smem_desc(std::uint32_t addr, std::uint32_t lead, std::uint32_t stride) {
  return static_cast<std::uint64_t>((addr >> 4) & 0x3fff) | (static_cast<std::uint64_t>((lead >> 4) & 0x3fff) << 16) |
         (static_cast<std::uint64_t>((stride >> 4) & 0x3fff) << 32);
}

// PTX has no array operands: the accumulator fragments are written out in full.
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(1));
}
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(1));
}
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(1));
}

template <int N> struct Wgmma;
template <> struct Wgmma<64> {
  static __device__ __forceinline__ void run(float (&d)[32], std::uint64_t a, std::uint64_t b) { wgmma_m64n64k16(d, a, b); }
};
template <> struct Wgmma<128> {
  static __device__ __forceinline__ void run(float (&d)[64], std::uint64_t a, std::uint64_t b) { wgmma_m64n128k16(d, a, b); }
};
template <> struct Wgmma<256> {
  static __device__ __forceinline__ void run(float (&d)[128], std::uint64_t a, std::uint64_t b) { wgmma_m64n256k16(d, a, b); }
};

constexpr int kWgmmaKSteps = 8;  // wgmma instructions per commit group, as a 64x128-deep tile

template <int N>
__global__ void wgmma_kernel(int iters, Out out) {
  extern __shared__ __align__(1024) std::uint32_t smem[];
  fill_smem(smem, kSmemBytes / 4);
  // A: 64 x 16 per k-step, B: N x 16, K-major core matrices of 8 rows x 16 bytes; each warpgroup
  // and k-step reads its own bytes.
  const int wg = threadIdx.x / 128;
  const std::uint32_t base = smem_addr(smem) + wg * 65536;
  float d[N / 2] = {};
  const long long t0 = start_clock();
  for (int it = 0; it < iters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k = 0; k < kWgmmaKSteps; ++k) {
      const std::uint64_t a = smem_desc(base + k * 256, 128, 256 * kWgmmaKSteps);
      const std::uint64_t b = smem_desc(base + 32768 + k * 256, 128, 256 * kWgmmaKSteps);
      Wgmma<N>::run(d, a, b);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  }
  stop_clock(t0, out);
  float s = 0;
  for (int i = 0; i < N / 2; ++i) s += d[i];
  if (s == 1234.5f) out.sink[0] = 1;
}

// [SECTION] exponent unit, FP32 FMA, issue

enum class AluOp { ex2, ffma, issue };
constexpr int kAluChains = 8;

template <AluOp kOp>
__global__ void alu_kernel(int iters, Out out) {
  float x[kAluChains];
  std::uint32_t y[kAluChains];
  for (int k = 0; k < kAluChains; ++k) {
    x[k] = static_cast<float>(bench::hash(threadIdx.x * 16 + k) & 0xffff) / 65536.0f;
    y[k] = bench::hash(threadIdx.x * 16 + k + 8);
  }
  const float m = 0.999f, c = 0.001f;
  const long long t0 = start_clock();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
#pragma unroll
      for (int k = 0; k < kAluChains; ++k) {
        if constexpr (kOp == AluOp::ex2) {
          // x ← 2^(−x) stays in (0.5, 1]: a bounded chain, one MUFU.EX2 per step.
          asm volatile("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(x[k]) : "f"(-x[k]));
        } else if constexpr (kOp == AluOp::ffma) {
          asm volatile("fma.rn.f32 %0, %0, %1, %2;\n" : "+f"(x[k]) : "f"(m), "f"(c));
        } else {
          asm volatile("fma.rn.f32 %0, %0, %1, %2;\n" : "+f"(x[k]) : "f"(m), "f"(c));
          // A three-input xor with two FMA chains' bits: two steps cannot be folded into one LOP3.
          asm volatile("lop3.b32 %0, %0, %1, %2, 0x96;\n"
                       : "+r"(y[k]) : "r"(__float_as_uint(x[k])), "r"(__float_as_uint(x[(k + 1) % kAluChains])));
        }
      }
    }
  }
  stop_clock(t0, out);
  float s = 0;
  std::uint32_t t = 0;
  for (int k = 0; k < kAluChains; ++k) { s += x[k]; t ^= y[k]; }
  if (s == 1234.5f || t == 0x12345678u) out.sink[0] = 1;
}

// [SECTION] the driver

struct Case {
  std::string name;     // the pipe and instruction
  std::string unit;     // what `per_clock` counts
  void (*kernel)(int, Out);
  int threads;
  int smem;             // dynamic shared memory bytes
  int iters;
  double work_per_iter; // units of `unit` per CTA and loop iteration
  double instr_per_iter;  // warp instructions of the measured kind per CTA and iteration
};

}  // namespace

int main(int argc, char** argv) {
  const char* me = "pipes";
  cudaDeviceProp prop{};
  bench::check(cudaGetDeviceProperties(&prop, 0), me, "cudaGetDeviceProperties");
  const int sms = prop.multiProcessorCount;

  std::vector<Case> cases;
  const double smem_bytes = 16.0 * kSmemAccesses * kSmemThreads;  // accesses of 16 bytes per thread
  const double smem_instr = 1.0 * kSmemAccesses * kSmemThreads / 32;
  cases.push_back({"smem ld.shared.v4", "bytes", smem_kernel<SmemOp::ld_v4>, kSmemThreads, kSmemBytes, 2000, smem_bytes, smem_instr});
  cases.push_back({"smem ldmatrix.x4", "bytes", smem_kernel<SmemOp::ldmatrix_x4>, kSmemThreads, kSmemBytes, 2000, smem_bytes, smem_instr});
  cases.push_back({"smem st.shared.v4", "bytes", smem_kernel<SmemOp::st_v4>, kSmemThreads, kSmemBytes, 2000, smem_bytes, smem_instr});
  const double mma_flop = 2.0 * 16 * 8 * 16;
  for (int warps : {1, 2, 4, 8, 16}) {
    const double n = 4.0 * kMmaChains * warps;
    cases.push_back({"mma.sync m16n8k16 " + std::to_string(warps) + "w", "flop", mma_sync_kernel, 32 * warps, kSmemBytes,
                     2000, n * mma_flop, n});
  }
  for (int wgs : {1, 2}) {
    const std::string w = " " + std::to_string(wgs) + "wg";
    const double n = kWgmmaKSteps * wgs;
    cases.push_back({"wgmma m64n64k16" + w, "flop", wgmma_kernel<64>, 128 * wgs, kSmemBytes, 1000, n * 2.0 * 64 * 64 * 16, n});
    cases.push_back({"wgmma m64n128k16" + w, "flop", wgmma_kernel<128>, 128 * wgs, kSmemBytes, 1000, n * 2.0 * 64 * 128 * 16, n});
    cases.push_back({"wgmma m64n256k16" + w, "flop", wgmma_kernel<256>, 128 * wgs, kSmemBytes, 500, n * 2.0 * 64 * 256 * 16, n});
  }
  const double alu_per_thread = 4.0 * kAluChains;
  for (int warps : {8, 32}) {
    const double instr = alu_per_thread * warps;
    const std::string w = " " + std::to_string(warps) + "w";
    cases.push_back({"ex2.approx.ftz.f32" + w, "ex2", alu_kernel<AluOp::ex2>, 32 * warps, kSmemBytes, 1000, instr * 32, instr});
    cases.push_back({"fma.rn.f32" + w, "flop", alu_kernel<AluOp::ffma>, 32 * warps, kSmemBytes, 4000, instr * 64, instr});
    cases.push_back({"issue ffma+xor" + w, "instr", alu_kernel<AluOp::issue>, 32 * warps, kSmemBytes, 4000, 2 * instr, 2 * instr});
  }

  long long* cycles = nullptr;
  unsigned* sink = nullptr;
  bench::check(cudaMalloc(&cycles, sms * sizeof(long long)), me, "cudaMalloc cycles");
  bench::check(cudaMalloc(&sink, sizeof(unsigned)), me, "cudaMalloc sink");
  std::printf("device %s, %d SMs, one CTA per SM; rates per SM clock (clock64), median over SMs of 5 launches\n",
              prop.name, sms);
  std::printf("%-26s %6s %12s %14s %10s %9s\n", "case", "thr", "per clk/SM", "warp instr/clk", "cycles", "MHz");
  for (const Case& c : cases) {
    bench::check(cudaFuncSetAttribute(c.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, c.smem), me, c.name.c_str());
    std::vector<double> rates, clocks;
    const auto launch = [&] { c.kernel<<<sms, c.threads, c.smem>>>(c.iters, Out{cycles, sink}); };
    for (const bench::SmLaunch& r : bench::time_per_sm(launch, sms, cycles, me, c.name.c_str())) {
      rates.push_back(c.work_per_iter * c.iters / r.median_cycles);
      clocks.push_back(r.mhz);
    }
    const double rate = bench::median(rates);
    const double instr_rate = rate / c.work_per_iter * c.instr_per_iter;
    std::printf("%-26s %6d %12.1f %14.3f %10.0f %9.0f   %s\n", c.name.c_str(), c.threads, rate, instr_rate,
                c.work_per_iter * c.iters / rate, bench::median(clocks), c.unit.c_str());
  }
  (void)argc;
  (void)argv;
  return 0;
}
