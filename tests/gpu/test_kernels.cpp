// GPU tests [gpu]: each compiled (algorithm, dtype, d, Br x Bc) against the fp64 CPU reference on
// fresh random inputs, ragged N, causal and not, and the stress inputs. Skips without a GPU.
// Run: ctest -L gpu   (or build/tests/gpu/hbmlab_tests_gpu)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <unistd.h>
#include <optional>
#include <vector>
#include <string>

#include <cuda_runtime.h>

#include "gpu/runner.hpp"
#include "sim/algo/block_sparse/masks.hpp"

using namespace hbmlab;
using namespace hbmlab::gpu;

namespace {

// One batch of `bh` heads of N rows at the shape's head dimension and dtype.
AttentionProblem problem_for(const KernelShape& s, std::int64_t N, std::int64_t bh, bool causal, const char* block_mask = nullptr) {
  AttentionProblem p;
  p.batch = 1;
  p.heads = bh;
  p.seq_len = N;
  p.head_dim = s.d;
  p.dtype = s.dtype;
  p.causal = causal;
  if (block_mask) p.block_mask = parse_block_mask(block_mask);
  return p;
}

CheckResult check_shape(const KernelShape& s, std::int64_t N, std::int64_t bh, bool causal, InputKind kind, std::uint64_t seed,
                        bool kv_descending = false, const char* block_mask = nullptr, std::int64_t full_rows_max_n = 4096) {
  const AttentionProblem p = problem_for(s, N, bh, causal, block_mask);
  AttentionBuffers buf(p, s.algo, s.blocks);
  const CheckResult r = check_kernel(p, s.blocks, kv_descending, kind, seed, buf, full_rows_max_n);
  INFO(to_string(s.algo) << " " << to_string(s.dtype) << " d=" << s.d << " " << s.blocks.Br << "x" << s.blocks.Bc
                         << " N=" << N << " causal=" << causal << " descending=" << kv_descending
                         << " mask=" << (block_mask ? block_mask : "none")
                         << " input=" << to_string(kind)
                         << " max_abs_error=" << r.max_abs_error << " error/tolerance=" << r.worst_ratio << " "
                         << r.note);
  CHECK(r.all_written);
  if (family_of(s.algo).intended_difference(kind).empty()) CHECK(r.pass);
  return r;
}

bool has_kernel(Algo algo) {
  for (const KernelShape& s : compiled_shapes())
    if (s.algo == algo) return true;
  return false;
}

}  // namespace

TEST_CASE("every compiled kernel shape matches the fp64 reference on ragged N", "[gpu]") {
  std::uint64_t seed = 11;
  for (const KernelShape& s : compiled_shapes())
    for (std::int64_t N : {97, 320})
      for (bool causal : {false, true}) check_shape(s, N, 3, causal, InputKind::unit, ++seed);
}

TEST_CASE("default shapes survive the stress inputs", "[gpu]") {
  std::uint64_t seed = 101;
  for (Algo algo : algorithms())
    for (Dtype dtype : {Dtype::fp16, Dtype::bf16})
      if (has_kernel(algo))  // flash3 is left out on a GPU that is not a Hopper
      for (int d : {64, 128}) {
        const KernelShape s{algo, dtype, d, default_blocks(algo, dtype, d)};
        for (InputKind kind : {InputKind::large_logits, InputKind::dominant_key})
          for (bool causal : {false, true}) check_shape(s, 257, 2, causal, kind, ++seed);
      }
}

TEST_CASE("flash2 at a larger N, several blocks, checked on sampled rows", "[gpu]") {
  for (const KernelShape& s : compiled_shapes())
    if (s.algo == algo_named("flash2") && s.dtype == Dtype::fp16)
      for (bool causal : {false, true}) check_shape(s, 4000, 2, causal, InputKind::unit, 7);
}

TEST_CASE("flash2 visiting K/V blocks from the last one down matches the fp64 reference", "[gpu]") {
  std::uint64_t seed = 211;
  for (const KernelShape& s : compiled_shapes())
    if (s.algo == algo_named("flash2"))
      for (std::int64_t N : {97, 320, 1000})
        for (bool causal : {false, true}) check_shape(s, N, 2, causal, InputKind::unit, ++seed, true);
  const KernelShape f2{algo_named("flash2"), Dtype::fp16, 128, default_blocks(algo_named("flash2"), Dtype::fp16, 128)};
  for (InputKind kind : {InputKind::large_logits, InputKind::dominant_key})
    for (bool causal : {false, true}) check_shape(f2, 257, 2, causal, kind, ++seed, true);
}

TEST_CASE("flash2 backward: dQ, dK, dV against the fp64 reference backward over several K/V and row blocks",
          "[gpu][backward]") {
  // The ragged-N test above takes every backward shape at N = 97 and 320 (one to five blocks); here
  // N = 1000 gives 8 to 16 of each, all rows and keys compared, and N = 3000 the sampled check that
  // `hbmlab measure` uses above N = 1024.
  const Algo bwd = algo_named("flash2", Pass::backward);
  std::uint64_t seed = 801;
  for (const KernelShape& s : compiled_shapes())
    if (s.algo == bwd)
      for (bool causal : {false, true}) check_shape(s, 1000, 2, causal, InputKind::unit, ++seed);
  for (Dtype dtype : {Dtype::fp16, Dtype::bf16})
    for (int d : {64, 128}) {
      const KernelShape s{bwd, dtype, d, default_blocks(bwd, dtype, d)};
      for (bool causal : {false, true}) check_shape(s, 3000, 2, causal, InputKind::unit, ++seed, false, nullptr, 1024);
    }
}

TEST_CASE("flash2 backward on the stress inputs: finite everywhere, dominant_key within the tolerance", "[gpu][backward]") {
  // A query's own key far ahead (dominant_key) is held to the tolerance; scores of ±1e4
  // (large_logits) are the family's intended difference (its error is reported, finiteness held).
  const Algo bwd = algo_named("flash2", Pass::backward);
  std::uint64_t seed = 901;
  for (Dtype dtype : {Dtype::fp16, Dtype::bf16})
    for (int d : {64, 128}) {
      const KernelShape s{bwd, dtype, d, default_blocks(bwd, dtype, d)};
      for (InputKind kind : {InputKind::large_logits, InputKind::dominant_key})
        for (bool causal : {false, true}) {
          const CheckResult r = check_shape(s, 257, 2, causal, kind, ++seed);
          WARN("flash2 backward " << to_string(dtype) << " d=" << d << " " << to_string(kind) << " causal=" << causal
                                  << ": max |error| " << r.max_abs_error << ", error/tolerance " << r.worst_ratio);
        }
    }
}

TEST_CASE("flash3 at every rung of its ladder matches the fp64 reference", "[gpu][flash3]") {
  // v1 TMA + wgmma, v2 + producer warpgroup and setmaxnreg, v3 + pingpong and overlap, v4 + persistent CTAs
  // (HBMLAB_FLASH3_VERSION): ragged N below, at and across the 128-row tiles and the K/V ring's
  // wrap (N = 1000: 8 blocks through 2 or 3 stages), causal and not, fp16 and bf16, d = 64 and 128.
  if (!has_kernel(algo_named("flash3"))) {
    WARN("flash3 skipped: it needs a Hopper GPU");
    return;
  }
  std::uint64_t seed = 1001;
  for (const char* version : {"1", "2", "3", "4"}) {
    setenv("HBMLAB_FLASH3_VERSION", version, 1);
    for (const KernelShape& s : compiled_shapes())
      if (s.algo == algo_named("flash3"))
        for (std::int64_t N : {1, 97, 128, 320, 1000})
          for (bool causal : {false, true}) {
            INFO("HBMLAB_FLASH3_VERSION=" << version);
            check_shape(s, N, 3, causal, InputKind::unit, ++seed);
          }
  }
  unsetenv("HBMLAB_FLASH3_VERSION");
  // Several row blocks per (batch, head) and many K/V blocks, checked on sampled rows.
  for (const KernelShape& s : compiled_shapes())
    if (s.algo == algo_named("flash3"))
      for (bool causal : {false, true}) check_shape(s, 4000, 2, causal, InputKind::unit, ++seed);
}

TEST_CASE("flash3 v4 under a causal mask writes every row block of many heads walked in pairs", "[gpu][flash3]") {
  // v4 takes causal tiles two by two (rows i and Tr − 1 − i; every second head backwards when Tr is
  // odd): here more pairs than CTAs, so each walks several through one ring, at Tr odd and even
  // (N = 600: Tr = 5 at Br = 128, 4 at 192; N = 900: 8 and 5), with B·H odd and even so that the last
  // head, checked against the reference, runs forwards or backwards. O starts as all-ones bits (NaN):
  // no element of any head may keep them.
  if (!has_kernel(algo_named("flash3"))) {
    WARN("flash3 skipped: it needs a Hopper GPU");
    return;
  }
  setenv("HBMLAB_FLASH3_VERSION", "4", 1);
  std::uint64_t seed = 1501;
  for (const KernelShape& s : compiled_shapes())
    if (s.algo == algo_named("flash3"))
      for (std::int64_t N : {600, 900})
        for (std::int64_t bh : {119, 120}) {
          const AttentionProblem p = problem_for(s, N, bh, true);
          AttentionBuffers buf(p, s.algo, s.blocks);
          const CheckResult r = check_kernel(p, s.blocks, false, InputKind::unit, ++seed, buf);
          INFO(to_string(s.dtype) << " d=" << s.d << " " << s.blocks.Br << "x" << s.blocks.Bc << " N=" << N << " B*H=" << bh
                                  << " max_abs_error=" << r.max_abs_error << " error/tolerance=" << r.worst_ratio);
          CHECK(r.pass);
          std::vector<std::uint16_t> o(static_cast<std::size_t>(buf.q_elems()));
          REQUIRE(cudaMemcpy(o.data(), buf.tensors().at(Tensor::O), o.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
          const auto unwritten = std::count(o.begin(), o.end(), std::uint16_t{0xFFFF});  // check_kernel's poison
          CHECK(unwritten == 0);
        }
  unsetenv("HBMLAB_FLASH3_VERSION");
}

TEST_CASE("flash3 backward (wgmma) matches the fp64 reference backward: ragged N, causal, several blocks",
          "[gpu][flash3][backward]") {
  // Below, at and across the 64-query row blocks, the 128-key K/V blocks and the two-stage Q_i/dO_i
  // ring (N = 1000: 16 row blocks and 8 K/V blocks; N = 3000: the sampled check `hbmlab measure`
  // uses above N = 1024); then the stress inputs. O and L come from the flash3 forward kernel.
  const Algo bwd = algo_named("flash3", Pass::backward);
  if (!has_kernel(bwd)) {
    WARN("flash3 backward skipped: it needs a Hopper GPU");
    return;
  }
  std::uint64_t seed = 1201;
  for (const KernelShape& s : compiled_shapes())
    if (s.algo == bwd)
      for (std::int64_t N : {1, 63, 128, 200, 1000})
        for (bool causal : {false, true}) check_shape(s, N, 2, causal, InputKind::unit, ++seed);
  for (Dtype dtype : {Dtype::fp16, Dtype::bf16})
    for (int d : {64, 128}) {
      const KernelShape s{bwd, dtype, d, default_blocks(bwd, dtype, d)};
      for (bool causal : {false, true}) check_shape(s, 3000, 2, causal, InputKind::unit, ++seed, false, nullptr, 1024);
      for (InputKind kind : {InputKind::large_logits, InputKind::dominant_key})
        for (bool causal : {false, true}) check_shape(s, 257, 2, causal, kind, ++seed);
    }
}

TEST_CASE("only flash2 takes the descending K/V order", "[gpu]") {
  AttentionProblem p;
  p.seq_len = 128;
  p.head_dim = 64;
  const Blocks b = default_blocks(algo_named("flash1"), Dtype::fp16, 64);
  AttentionBuffers buf(p, algo_named("flash1"), b);
  CHECK_THROWS_AS(launch(algo_named("flash1"), p, b, buf.tensors(), nullptr, true), std::invalid_argument);
}

TEST_CASE("flash2 with a block mask matches the fp64 masked reference", "[gpu][block-sparse]") {
  // random:0.05 leaves rows with no kept block: their O must be 0, not NaN.
  std::uint64_t seed = 401;
  for (const KernelShape& s : compiled_shapes())
    if (s.algo == algo_named("flash2"))
      for (const char* mask : {"local:150", "butterfly", "random:0.3:7", "random:0.05:3"})
        for (bool causal : {false, true})
          for (bool descending : {false, true}) check_shape(s, 1000, 2, causal, InputKind::unit, ++seed, descending, mask);
  const KernelShape f2{algo_named("flash2"), Dtype::bf16, 64, default_blocks(algo_named("flash2"), Dtype::bf16, 64)};
  for (InputKind kind : {InputKind::large_logits, InputKind::dominant_key})
    check_shape(f2, 777, 2, true, kind, ++seed, false, "local:200");
}

TEST_CASE("flash3 with a block mask matches the fp64 masked reference", "[gpu][block-sparse][flash3]") {
  // Every compiled flash3 shape (fp16 and bf16; d = 64 at 192 × 128 and 128 × 128, d = 128 at 128 × 128)
  // at every rung: sliding windows (local:W; with causal, Mistral's), butterfly, random densities
  // (random:0.05 empties whole row blocks: their O must be 0, not NaN; under v4 such tiles sit between
  // full ones on one CTA's walk), causal on and off, ragged N (97: one partial tile; 1000: 6 or 8 row
  // blocks and 8 K/V blocks through the ring's wrap). The mask is read at flash3's own blocks.
  if (!has_kernel(algo_named("flash3"))) {
    WARN("flash3 skipped: it needs a Hopper GPU");
    return;
  }
  std::uint64_t seed = 1401;
  for (const char* version : {"1", "2", "3", "4"}) {
    setenv("HBMLAB_FLASH3_VERSION", version, 1);
    for (const KernelShape& s : compiled_shapes())
      if (s.algo == algo_named("flash3"))
        for (std::int64_t N : {97, 1000})
          for (const char* mask : {"local:150", "local:600", "butterfly", "random:0.3:7", "random:0.05:3"})
            for (bool causal : {false, true}) {
              INFO("HBMLAB_FLASH3_VERSION=" << version);
              check_shape(s, N, 2, causal, InputKind::unit, ++seed, false, mask);
            }
  }
  unsetenv("HBMLAB_FLASH3_VERSION");
  // The default rung (v3 with a mask) over many blocks, checked on sampled rows; then the stress inputs.
  for (const KernelShape& s : compiled_shapes())
    if (s.algo == algo_named("flash3"))
      for (bool causal : {false, true}) check_shape(s, 5000, 2, causal, InputKind::unit, ++seed, false, "local:1024", 1024);
  for (Dtype dtype : {Dtype::fp16, Dtype::bf16})
    for (int d : {64, 128}) {
      const KernelShape s{algo_named("flash3"), dtype, d, default_blocks(algo_named("flash3"), dtype, d)};
      for (InputKind kind : {InputKind::large_logits, InputKind::dominant_key})
        check_shape(s, 777, 2, true, kind, ++seed, false, "local:200");
    }
}

TEST_CASE("kernels without block-mask support refuse one", "[gpu][block-sparse]") {
  // Every family of this build that does not take a mask refuses it at launch (flash2 and flash3 take one).
  int refused = 0;
  for (const KernelFamily* f : kernel_families()) {
    const Algo algo = f->algo();
    if (algo == algo_named("flash2") || algo == algo_named("flash3")) {
      CHECK(f->takes_block_mask());
      continue;
    }
    CHECK_FALSE(f->takes_block_mask());
    AttentionProblem p;
    p.seq_len = 256;
    p.head_dim = 64;
    p.block_mask = parse_block_mask("butterfly");
    const Blocks b = default_blocks(algo, Dtype::fp16, 64);
    AttentionBuffers buf(p, algo, b);
    INFO(to_string(algo));
    CHECK_THROWS_AS(launch(algo, p, b, buf.tensors(), nullptr), std::invalid_argument);
    ++refused;
  }
  CHECK(refused >= 2);  // standard and flash1 at least
}

TEST_CASE("a mask file of another grid is refused with a line naming the file and the grid", "[gpu][block-sparse]") {
  // Tr × Tc = 2 × 4 is flash2's d = 128 grid at N = 256 (128 × 64); flash3's (128 × 128) is 2 × 2.
  const std::string path = "/tmp/hbmlab-gpu-test-mask-" + std::to_string(::getpid()) + ".txt";
  std::FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fputs("1100\n0110\n", f);
  std::fclose(f);
  AttentionProblem p;
  p.seq_len = 256;
  p.head_dim = 128;
  p.block_mask = parse_block_mask(path);
  CHECK_NOTHROW(AttentionBuffers(p, algo_named("flash2"), Blocks{128, 64}));
  CHECK_THROWS_WITH(AttentionBuffers(p, algo_named("flash2"), Blocks{128, 128}),
                    Catch::Contains(path) && Catch::Contains("Tr × Tc = 2 × 2"));
  std::remove(path.c_str());
}

namespace {

// One decoding problem through a split-KV kernel; returns the fallback flags the launch left.
std::vector<int> check_decode(const KernelShape& s, std::int64_t N, std::int64_t Nq, std::int64_t H, std::int64_t Hkv,
                              std::int64_t splits, bool causal, InputKind kind, std::uint64_t seed,
                              std::optional<double> unified_max = std::nullopt) {
  AttentionProblem p;
  p.batch = 2;
  p.heads = H;
  p.kv_heads = Hkv;
  p.seq_len = N;
  p.query_len = Nq;
  p.head_dim = s.d;
  p.dtype = s.dtype;
  p.causal = causal;
  p.kv_splits = splits;
  p.unified_max = unified_max;
  AttentionBuffers buf(p, s.algo, s.blocks);
  const CheckResult r = check_kernel(p, s.blocks, false, kind, seed, buf, 4096);
  INFO(to_string(s.algo) << " " << to_string(s.dtype) << " d=" << s.d << " rows " << s.blocks.Br << " Bc " << s.blocks.Bc
                         << " N=" << N << " NQ=" << Nq << " H=" << H << " HKV=" << Hkv << " S=" << splits
                         << " causal=" << causal << " input=" << to_string(kind) << " max_abs_error=" << r.max_abs_error
                         << " error/tolerance=" << r.worst_ratio << " " << r.note);
  CHECK(r.all_written);
  CHECK(r.pass);
  std::vector<int> flags(static_cast<std::size_t>(family_of(s.algo).fallback_flags(p)));
  if (!flags.empty())
    CUDA_CHECK(cudaMemcpy(flags.data(), buf.tensors().fallback, flags.size() * sizeof(int), cudaMemcpyDeviceToHost));
  return flags;
}

bool any_set(const std::vector<int>& flags) {
  for (int f : flags)
    if (f != 0) return true;
  return false;
}

}  // namespace

TEST_CASE("split-KV decoding kernels match the fp64 reference: GQA, NQ, splits, ragged N, causal", "[gpu][decoding]") {
  struct Case {
    std::int64_t N, Nq, H, Hkv, splits;
  };
  // g·NQ from 1 to 32 rows (one or two row blocks at 16 rows), a split per block and splits of uneven size.
  const Case cases[] = {{1000, 1, 8, 2, 1}, {4097, 1, 32, 8, 7}, {3000, 4, 8, 2, 16}, {2000, 8, 8, 2, 5},
                        {777, 3, 6, 6, 3},  {513, 2, 4, 1, 9},   {96, 1, 4, 4, 2}};
  std::uint64_t seed = 601;
  for (const char* name : {"flash-decoding", "flashdecoding++"})
    for (const KernelShape& s : compiled_shapes())
      if (s.algo == algo_named(name))
        for (const Case& c : cases)
          for (bool causal : {false, true}) {
            const std::vector<int> flags = check_decode(s, c.N, c.Nq, c.H, c.Hkv, c.splits, causal, InputKind::unit, ++seed);
            CHECK_FALSE(any_set(flags));  // unit inputs stay within φ's safe range: no fallback
          }
}

TEST_CASE("flashdecoding++ falls back when scores leave the unified max's range, and stays exact", "[gpu][decoding]") {
  const Algo pp = algo_named("flashdecoding++");
  std::uint64_t seed = 701;
  for (Dtype dtype : {Dtype::fp16, Dtype::bf16})
    for (int d : {64, 128}) {
      const KernelShape s{pp, dtype, d, default_blocks(pp, dtype, d)};
      // φ far above every score: e^(x − φ) would vanish; far below: it would overflow.
      for (double phi : {200.0, -200.0}) CHECK(any_set(check_decode(s, 3000, 1, 8, 2, 6, false, InputKind::unit, ++seed, phi)));
      // Scores of ±tens: the default φ = √(2 ln N) is out of range for them.
      for (InputKind kind : {InputKind::large_logits, InputKind::dominant_key})
        check_decode(s, 1500, 2, 8, 4, 4, true, kind, ++seed);
      const KernelShape f{algo_named("flash-decoding"), dtype, d, default_blocks(algo_named("flash-decoding"), dtype, d)};
      for (InputKind kind : {InputKind::large_logits, InputKind::dominant_key})
        check_decode(f, 1500, 2, 8, 4, 4, true, kind, ++seed);
    }
}
