// The backward pass (--pass backward): exact HBM counts of the three backward rooms on hand-worked
// toy problems, gradients through their tiles against the fp64 reference (itself checked by finite
// differences), the engine's launch plans against the counts, the bounds of Theorem 5, and the CLI.
// Run: build/tests/hbmlab_tests_core "[backward]"
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <sstream>
#include <tuple>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "sim/algo/block_sparse/masks.hpp"
#include "sim/algo/blocks.hpp"
#include "sim/bounds/bounds.hpp"
#include "sim/cli/cli.hpp"
#include "tests/core/cli_run.hpp"
#include "sim/engine/replay.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/engine/timing.hpp"
#include "sim/numerics/attention.hpp"
#include "sim/spec/gpu_spec.hpp"

using namespace hbmlab;
using hbmlab::testing::Run;
using hbmlab::testing::run;

namespace {

Algo backward(std::string_view name) { return algo_named(name, Pass::backward); }

AttentionProblem toy_problem(std::int64_t N, std::int64_t d, bool causal = false) {
  return AttentionProblem{1, 1, N, d, Dtype::fp16, causal};
}

void check_tensor(const Counts& c, Tensor t, std::int64_t read_bytes, std::int64_t write_bytes) {
  INFO("tensor " << tensor_key(t));
  CHECK(c[t].read_bytes == read_bytes);
  CHECK(c[t].write_bytes == write_bytes);
}

// A block mask given as Tr strings of Tc characters '0' or '1', as a mask file would be.
struct Pattern final : BlockMask {
  explicit Pattern(std::vector<std::string> rows) : rows(std::move(rows)) {}
  bool keeps(const BlockGrid&, std::int64_t i, std::int64_t j) const override { return rows.at(i).at(j) == '1'; }
  std::string spec() const override { return "pattern"; }
  std::vector<std::string> rows;
};

}  // namespace

// [SECTION] Exact counts, worked by hand (fp16: 2 bytes an element, statistics 4)

TEST_CASE("backward rooms: one per self-attention forward room, same names, in the registry's order", "[io][backward]") {
  // The decoding rooms (split-KV) have no backward: decoding is inference.
  std::vector<Algo> forward;
  for (Algo f : algorithms(Pass::forward))
    if (!f->supports().splits) forward.push_back(f);
  REQUIRE(algorithms(Pass::backward).size() == forward.size());
  for (std::size_t k = 0; k < forward.size(); ++k) {
    const Algo f = forward[k], b = algorithms(Pass::backward)[k];
    CHECK(f->name() == b->name());
    CHECK(b->pass() == Pass::backward);
    CHECK(to_string(b) == std::string(f->name()) + " backward");
    CHECK(b->forward_state(toy_problem(16, 4)).has_value());
    CHECK_FALSE(f->forward_state(toy_problem(16, 4)).has_value());
  }
}

TEST_CASE("standard backward, N=16 d=4: Algorithm 3's seven N² and eight Nd passes", "[io][backward]") {
  const Counts c = count_instance(backward("standard"), toy_problem(16, 4), {4, 8});
  check_tensor(c, Tensor::P, 1024, 0);    // read at lines 1 and 3: 2 · 256 elements · 2 B
  check_tensor(c, Tensor::dP, 512, 512);  // written at line 2, read at line 3
  check_tensor(c, Tensor::dS, 1024, 512); // written at line 3, read at lines 4 and 5
  check_tensor(c, Tensor::dO, 256, 0);    // lines 1 and 2: 2 · 64 elements
  for (Tensor t : {Tensor::Q, Tensor::K, Tensor::V}) check_tensor(c, t, 128, 0);
  for (Tensor t : {Tensor::dQ, Tensor::dK, Tensor::dV}) check_tensor(c, t, 0, 128);
  CHECK(c.accesses() == 7 * 16 * 16 + 8 * 16 * 4);  // 1792 + 512
  CHECK(c.matmul_flops == 4 * 2 * 16 * 16 * 4);     // dV, dP, dQ, dK: 2N²d each; S is not recomputed
  CHECK_FALSE(c.touches(Tensor::S));
}

TEST_CASE("flash1 backward, N=16 d=4, Br=4 Bc=8: Tr=4, Tc=2", "[io][backward]") {
  const Counts c = count_instance(backward("flash1"), toy_problem(16, 4), {4, 8});
  check_tensor(c, Tensor::K, 128, 0);     // N·d once
  check_tensor(c, Tensor::V, 128, 0);
  for (Tensor t : {Tensor::Q, Tensor::O, Tensor::dO}) check_tensor(c, t, 256, 0);  // Tc·N·d = 128 elements
  check_tensor(c, Tensor::dQ, 256, 384);  // read Tc·Nd; written (1 + Tc)·Nd = 192 elements (line 5, line 21)
  check_tensor(c, Tensor::l, 128, 0);     // Tc·N = 32 fp32
  check_tensor(c, Tensor::m, 128, 0);
  check_tensor(c, Tensor::dK, 0, 256);    // 2·N·d: zeroed at line 5, written at line 24
  check_tensor(c, Tensor::dV, 0, 256);
  for (Tensor t : {Tensor::S, Tensor::P, Tensor::dP, Tensor::dS, Tensor::D}) CHECK_FALSE(c.touches(t));
  CHECK(c.matmul_flops == 8 * 5 * (2 * 4 * 8 * 4));  // 8 pairs, five Br×Bc×d matmuls each
  // 4 + 2·2 stores at line 5; per j: K_j, V_j, 4 × (6 loads, 8 computes, 1 store), dK_j and dV_j.
  CHECK(c.steps == 8 + 2 * (2 + 4 * 15 + 2));
}

TEST_CASE("flash2 backward, N=16 d=4, Br=4 Bc=8: D once, no O in the inner loop", "[io][backward]") {
  const Counts c = count_instance(backward("flash2"), toy_problem(16, 4), {4, 8});
  check_tensor(c, Tensor::O, 128, 0);     // N·d, once, for D (line 4)
  check_tensor(c, Tensor::dO, 384, 0);    // (1 + Tc)·N·d = 192 elements
  check_tensor(c, Tensor::D, 128, 64);    // written N fp32 = 64 B; read Tc·N = 32 fp32
  check_tensor(c, Tensor::lse, 128, 0);   // Tc·N fp32
  check_tensor(c, Tensor::Q, 256, 0);     // Tc·N·d
  check_tensor(c, Tensor::dQ, 256, 384);  // read Tc·Nd; written (1 + Tc)·Nd
  check_tensor(c, Tensor::K, 128, 0);
  check_tensor(c, Tensor::V, 128, 0);
  check_tensor(c, Tensor::dK, 0, 128);    // once: FA-2 does not zero dK, dV in HBM
  check_tensor(c, Tensor::dV, 0, 128);
  CHECK_FALSE(c.touches(Tensor::l));
  CHECK_FALSE(c.touches(Tensor::m));
}

TEST_CASE("causal backward skips the pairs above the diagonal; standard stays N²", "[io][backward][causal]") {
  // Br = 4, Bc = 8, N = 16: row blocks 0 and 1 (queries 0–7) skip K/V block 1, 6 of 8 pairs kept.
  const Counts f1 = count_instance(backward("flash1"), toy_problem(16, 4, true), {4, 8});
  CHECK(f1.skipped_blocks == 2);
  check_tensor(f1, Tensor::K, 128, 0);        // both columns keep a pair
  check_tensor(f1, Tensor::Q, 192, 0);        // 6 pairs × 4 rows × 4 × 2 B
  check_tensor(f1, Tensor::dQ, 192, 128 + 192);
  check_tensor(f1, Tensor::l, 96, 0);         // 6 × 4 fp32
  check_tensor(f1, Tensor::dK, 0, 256);
  CHECK(f1.matmul_flops == 6 * 5 * (2 * 4 * 8 * 4));
  const Counts f2 = count_instance(backward("flash2"), toy_problem(16, 4, true), {4, 8});
  check_tensor(f2, Tensor::dO, 128 + 192, 0);
  check_tensor(f2, Tensor::D, 96, 64);
  CHECK(count_instance(backward("standard"), toy_problem(16, 4, true), {4, 8}) ==
        count_instance(backward("standard"), toy_problem(16, 4, false), {4, 8}));
}

TEST_CASE("ragged backward blocks move only their real rows; D stays fp32", "[io][backward]") {
  // N = 10: Q blocks of 4, 4, 2 rows; K/V blocks of 8 and 2 rows.
  AttentionProblem p = toy_problem(10, 4);
  const Counts c = count_instance(backward("flash2"), p, {4, 8});
  check_tensor(c, Tensor::dO, 3 * 40 * 2, 0);  // (1 + Tc)·N·d
  check_tensor(c, Tensor::Q, 2 * 40 * 2, 0);
  check_tensor(c, Tensor::D, 2 * 10 * 4, 10 * 4);
  p.dtype = Dtype::fp32;
  const Counts c32 = count_instance(backward("flash2"), p, {4, 8});
  check_tensor(c32, Tensor::Q, 2 * 40 * 4, 0);
  check_tensor(c32, Tensor::D, 2 * 10 * 4, 10 * 4);  // unchanged
}

TEST_CASE("backward narration names Algorithm 4's and FA-2 Algorithm 2's lines", "[io][backward][narration]") {
  const Algo f1 = backward("flash1"), f2 = backward("flash2");
  const std::vector<Step> s1 = record_steps(f1, toy_problem(16, 4), {4, 8});
  CHECK(f1->narrate(s1.front()) == "line 5: initialise dQ_1 ← 0 in HBM (32 B)");
  const auto v_load = std::find_if(s1.begin(), s1.end(), [](const Step& s) { return s.kind == StepKind::load && s.tensor == Tensor::V; });
  REQUIRE(v_load != s1.end());
  CHECK(f1->narrate(*v_load) == "line 7: load V_1 (8×4, 64 B) from HBM into SRAM; line 8: dK̃_1, dṼ_1 ← 0 on chip");
  const auto dk = std::find_if(s1.begin(), s1.end(), [](const Step& s) { return s.kind == StepKind::store && s.line == 24; });
  REQUIRE(dk != s1.end());
  CHECK(f1->narrate(*dk) == "line 24: write dK_1 (8×4, 64 B) to HBM");
  const std::vector<Step> s2 = record_steps(f2, toy_problem(16, 4), {4, 8});
  const auto d_store = std::find_if(s2.begin(), s2.end(), [](const Step& s) { return s.kind == StepKind::store && s.tensor == Tensor::D; });
  REQUIRE(d_store != s2.end());
  CHECK(f2->narrate(*d_store) == "line 4: write D_1 (4×1, 16 B) to HBM");
  const std::vector<Step> s0 = record_steps(backward("standard"), toy_problem(16, 4), {4, 8});
  CHECK(backward("standard")->narrate(s0.front()) == "line 1: load P_1,1 (4×8, 64 B) from HBM into SRAM");
}

// [SECTION] Blocks and SRAM

TEST_CASE("backward working sets hold more tiles than the forward; defaults fit; bad blocks exit 2", "[io][backward][blocks]") {
  const GpuSpec a100 = load_gpu("a100-40gb");
  const SramBudget sram{a100.sram_bytes_per_sm, a100.sram_bytes_per_block};
  for (std::int64_t d : {32, 64, 128}) {
    const AttentionProblem p{1, 1, 4096, d, Dtype::fp16, false};
    for (Algo b : algorithms(Pass::backward)) {
      INFO(to_string(b) << " d=" << d);
      const Algo f = algo_named(b->name());
      const Blocks blocks{64, 128};
      const BlockChoice choice = choose_blocks(b, p, sram);
      CHECK(choice.working_set_bytes <= a100.sram_bytes_per_block);  // the default, or the largest that fits
      if (b->name() == "standard") {  // a GEMM's tiles, or line 3's three N × N tiles
        CHECK(b->working_set_bytes(p, blocks) >= f->working_set_bytes(p, blocks));
        continue;
      }
      // flash3's backward keeps dK_j, dV_j in registers (no staging tiles), beside a forward that
      // holds a ring of K/V stages.
      if (b->name() != "flash3") CHECK(b->working_set_bytes(p, blocks) > f->working_set_bytes(p, blocks));  // eight B × d tiles, not four
      if (d <= 64) CHECK(choice.origin == "paper default");  // Bc = ⌈M/(8d)⌉ fits as the forward's rule does
    }
  }
  // flash1's backward, by hand: 2 B·(4·64·64 + 4·164·64) + 4 B·3·64 = 117,504 B at M = 83,968, d = 64.
  CHECK(choose_blocks(backward("flash1"), {1, 1, 1024, 64, Dtype::fp16, false}, sram).blocks == Blocks{64, 164});
  CHECK(backward("flash1")->working_set_bytes({1, 1, 1024, 64, Dtype::fp16, false}, {64, 164}) == 117504);
  CHECK_THROWS_WITH(choose_blocks(backward("flash2"), {1, 1, 1024, 64, Dtype::fp16, false}, sram, 128, 256),
                    Catch::StartsWith("--block-cols: "));
}

// [SECTION] Numerics

TEST_CASE("the fp64 reference backward agrees with finite differences of ⟨O, dO⟩", "[numerics][backward]") {
  // A block mask over 2 × 2 blocks (row block 1 keeps no pair: its rows see no key at all).
  BlockGrid masked_grid(7, {2, 2}, false);
  masked_grid.mask = std::make_shared<Pattern>(std::vector<std::string>{"1010", "0000", "0111", "1101"});
  for (bool causal : {false, true})
    for (auto [N, d, grid] : {std::tuple<std::int64_t, std::int64_t, const BlockGrid*>{5, 3, nullptr},
                              {7, 2, nullptr}, {7, 3, &masked_grid}}) {
      INFO("N=" << N << " d=" << d << " causal=" << causal << " block mask=" << (grid != nullptr));
      Inputs in = make_inputs(N, d, InputKind::unit, 17 + N);
      BlockGrid g_causal = grid ? *grid : BlockGrid(N, {N, N}, causal);
      g_causal.causal = causal;
      const BlockGrid* blocks = grid ? &g_causal : nullptr;
      const Gradients g = reference_backward(in, causal, {}, blocks);
      auto loss = [&](const Inputs& x) {  // ⟨O, dO⟩, whose gradient at O is dO
        const Matrix O = reference_attention(x, causal, {}, blocks);
        double sum = 0;
        for (std::size_t k = 0; k < O.data.size(); ++k) sum += O.data[k] * x.dO.data[k];
        return sum;
      };
      const double h = 1e-6;
      double largest = 0;
      auto check = [&](Matrix Inputs::*which, const Matrix& grad) {
        for (std::size_t k = 0; k < grad.data.size(); ++k) {
          Inputs plus = in, minus = in;
          (plus.*which).data[k] += h;
          (minus.*which).data[k] -= h;
          CHECK(grad.data[k] == Approx((loss(plus) - loss(minus)) / (2 * h)).margin(1e-7));
          largest = std::max(largest, std::fabs(grad.data[k]));
        }
      };
      check(&Inputs::Q, g.dQ);
      check(&Inputs::K, g.dK);
      check(&Inputs::V, g.dV);
      CHECK(largest > 0.1);  // gradients of unit scale, not a check against zeros
      if (grid)  // row block 1 (rows 2 and 3) keeps no pair: no gradient reaches its queries
        for (std::int64_t q : {2, 3})
          for (std::int64_t x = 0; x < d; ++x) CHECK(g.dQ(q, x) == 0.0);
    }
}

TEST_CASE("backward rooms' gradients through their tiles match the fp64 reference", "[numerics][backward]") {
  std::mt19937 rng(7);
  auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  for (int k = 0; k < 24; ++k) {
    const std::int64_t N = pick(1, 200), d = pick(1, 64);
    const Blocks blocks{pick(1, 48), pick(1, 64)};
    const bool causal = k % 2 == 1;
    const Inputs in = make_inputs(N, d, InputKind::unit, 500 + k);
    for (Algo algo : algorithms(Pass::backward)) {
      INFO(to_string(algo) << " N=" << N << " d=" << d << " Br=" << blocks.Br << " Bc=" << blocks.Bc << " causal=" << causal);
      const NumericsCheck f32 = check_numerics(algo, Precision::fp32, in, blocks, causal);
      CHECK(f32.compared == "dQ, dK, dV");
      CHECK(f32.finite);
      CHECK(f32.max_abs_error < 1e-4);
      CHECK(check_numerics(algo, Precision::fp64, in, blocks, causal).max_abs_error < 1e-11);
    }
  }
  // Sampled rows: dQ on them, dK and dV summed over their share, on both sides.
  const Inputs in = make_inputs(300, 32, InputKind::unit, 3);
  const std::vector<std::int64_t> rows = sample_rows(300, 64, 16);
  for (Algo algo : algorithms(Pass::backward)) CHECK(check_numerics(algo, Precision::fp32, in, {64, 80}, true, rows).max_abs_error < 1e-4);
}

TEST_CASE("block-sparse backward: gradients of the masked attention, rows with no kept pair stay 0", "[numerics][backward][block-sparse]") {
  const std::int64_t N = 160, d = 32;
  const Blocks blocks{16, 32};  // Tr = 10, Tc = 5
  const Inputs in = make_inputs(N, d, InputKind::unit, 41);
  for (const char* spec : {"local:40", "butterfly", "random:0.3:7", "random:0.15:2"})
    for (bool causal : {false, true}) {
      const auto mask = parse_block_mask(spec);
      BlockGrid grid(N, blocks, causal);
      grid.mask = mask;
      // The mask must matter: the masked reference differs from the dense one.
      const Gradients dense = reference_backward(in, causal), sparse = reference_backward(in, causal, {}, &grid);
      double differs = 0;
      for (std::size_t k = 0; k < dense.dQ.data.size(); ++k) differs = std::max(differs, std::fabs(dense.dQ.data[k] - sparse.dQ.data[k]));
      INFO(spec << " causal=" << causal);
      CHECK(differs > 1e-3);
      for (Algo algo : algorithms(Pass::backward)) {
        if (!algo->supports().block_mask) continue;
        INFO(to_string(algo));
        const NumericsCheck c = check_numerics(algo, Precision::fp32, in, blocks, causal, {}, mask);
        CHECK(c.finite);
        CHECK(c.max_abs_error < 1e-4);
        CHECK(check_numerics(algo, Precision::fp64, in, blocks, causal, {}, mask).max_abs_error < 1e-11);
      }
    }
  // random:0.15:2 empties at least one row block here: its queries see no key, and get no gradient.
  BlockGrid grid(N, blocks, false);
  grid.mask = parse_block_mask("random:0.15:2");
  for (Algo algo : algorithms(Pass::backward)) {
    if (!algo->supports().block_mask) continue;
    const TiledResult t = algo->run_tiled(Precision::fp32, in, grid, {});
    REQUIRE(t.grads);
    std::int64_t empty_row_blocks = 0;
    for (std::int64_t i = 0; i < grid.Tr; ++i) {
      bool any = false;
      for (std::int64_t j = 0; j < grid.Tc; ++j) any = any || !grid.skipped(i, j);
      if (any) continue;
      ++empty_row_blocks;
      for (std::int64_t q = grid.row_begin(i); q < grid.row_begin(i) + grid.rows(i); ++q)
        for (std::int64_t x = 0; x < d; ++x) CHECK(t.grads->dQ(q, x) == 0.0);
    }
    CHECK(empty_row_blocks > 0);
  }
}

TEST_CASE("backward stress inputs: no NaN, fully masked blocks of causal rows", "[numerics][backward][stress]") {
  for (InputKind kind : {InputKind::large_logits, InputKind::dominant_key})
    for (Algo algo : algorithms(Pass::backward))
      for (bool causal : {false, true}) {
        INFO(to_string(algo) << " " << to_string(kind) << " causal=" << causal);
        const Inputs in = make_inputs(96, 32, kind, 11);
        // Br = 16 < Bc = 40: the first rows of a kept pair (i, j) see none of K_j's keys when causal.
        const NumericsCheck c = check_numerics(algo, Precision::fp32, in, {16, 40}, causal);
        CHECK(c.finite);
        CHECK(check_numerics(algo, Precision::fp64, in, {16, 40}, causal).finite);
      }
  // The forward's inputs are unchanged by dO: its draw has a stream of its own.
  const Inputs a = make_inputs(8, 4, InputKind::unit, 5);
  CHECK(a.dO.rows == 8);
  CHECK(a.dO.data != a.Q.data);
}

TEST_CASE("causal rows that see none of a visited block's keys: gradients still match, no NaN", "[numerics][backward][causal]") {
  const std::int64_t N = 150, d = 24;
  const Inputs in = make_inputs(N, d, InputKind::unit, 31);
  for (Blocks b : {Blocks{16, 40}, Blocks{48, 20}, Blocks{7, 64}, Blocks{1, 150}}) {
    // A pair (i, j) is visited when its first key j·Bc is at most its last query; its rows q < j·Bc
    // then have every score of S_ij masked (−∞), so P_ij's row is exp(−∞ − L_q) = 0 throughout.
    std::int64_t masked_rows = 0;
    for (std::int64_t i = 0; i * b.Br < N; ++i)
      for (std::int64_t j = 0; j * b.Bc < N; ++j) {
        const std::int64_t first_key = j * b.Bc, last_query = std::min(N, (i + 1) * b.Br) - 1;
        if (first_key > last_query) continue;
        for (std::int64_t q = i * b.Br; q <= last_query; ++q) masked_rows += q < first_key;
      }
    INFO("Br=" << b.Br << " Bc=" << b.Bc << ": " << masked_rows << " rows of visited pairs fully masked");
    if (b.Br > 1) CHECK(masked_rows > 0);
    for (Algo algo : algorithms(Pass::backward)) {
      INFO(to_string(algo));
      const NumericsCheck c = check_numerics(algo, Precision::fp32, in, b, true);
      CHECK(c.finite);
      CHECK(c.rows_checked == N);
      CHECK(c.max_abs_error < 1e-4);
      CHECK(check_numerics(algo, Precision::fp64, in, b, true).max_abs_error < 1e-11);
    }
  }
}

// [SECTION] Engine

TEST_CASE("backward launch plans: with the L2 off the engine moves exactly the count", "[engine][backward]") {
  const GpuSpec gpu = load_gpu("a100-40gb");
  EngineOptions off;
  off.l2_enabled = false;
  const std::pair<AttentionProblem, Blocks> cases[] = {
      {{2, 3, 1000, 64, Dtype::fp16, false}, {64, 128}},
      {{1, 2, 777, 32, Dtype::bf16, true}, {48, 80}},
      {{4, 1, 256, 128, Dtype::fp32, false}, {32, 32}},
  };
  for (const auto& [p, b] : cases)
    for (Algo algo : algorithms(Pass::backward)) {
      INFO(to_string(algo) << " N=" << p.seq_len << " causal=" << p.causal);
      const Counts core = count_problem(algo, p, b);
      const EngineResult e = run_engine(algo, p, b, gpu, off);
      for (Tensor t : kAllTensors) {
        INFO("tensor " << tensor_key(t));
        CHECK(e.memory[static_cast<int>(t)].dram_read_bytes == core[t].read_bytes);
        CHECK(e.memory[static_cast<int>(t)].dram_write_bytes == core[t].write_bytes);
      }
      CHECK(e.matmul_flops == core.matmul_flops);
      CHECK(e.non_matmul_flops == core.non_matmul_flops);
      CHECK(e.predicted_s > 0);
    }
}

TEST_CASE("flash2's backward launches as FlashAttention-2 does", "[engine][backward]") {
  const GpuSpec gpu = load_gpu("a100-40gb");
  const AttentionProblem p{2, 4, 1024, 64, Dtype::fp16, false};
  const Blocks b{64, 128};  // Tr = 16, Tc = 8
  const std::vector<KernelPlan> plans = plan_kernels(backward("flash2"), p, b, gpu, EngineOptions{});
  REQUIRE(plans.size() == 3);
  CHECK(plans[0].programs.size() == 16);  // D_i and the fp32 dQ_i cleared, per row block
  CHECK(plans[1].programs.size() == 8);   // one CTA per K_j, V_j
  CHECK(plans[2].programs.size() == 16);  // dQ_i converted
  // The main kernel's dQ accesses move fp32 tiles, twice what the count charges for fp16.
  std::int64_t dQ_bytes = 0, dQ_paper = 0;
  for (const TileAccess& a : plans[1].accesses)
    if (a.tensor == Tensor::dQ) {
      dQ_bytes += a.bytes;
      dQ_paper += a.paper_bytes;
    }
  CHECK(dQ_bytes == 2 * dQ_paper);
  CHECK(dQ_paper == count_instance(backward("flash2"), p, b)[Tensor::dQ].read_bytes * 2);  // read and written
  // With the L2 on, the atomics and the conversion cost DRAM traffic the count does not have.
  const EngineResult on = run_engine(backward("flash2"), p, b, gpu, EngineOptions{});
  CHECK(on.kernels.size() == 3);
  CHECK(on.memory[static_cast<int>(Tensor::dQ)].sm_read_bytes > count_problem(backward("flash2"), p, b)[Tensor::dQ].read_bytes);
  // --launch-threads reaches the main kernel.
  EngineOptions launch;
  launch.launch.threads_per_cta = 256;
  CHECK(plan_kernels(backward("flash2"), p, b, gpu, launch)[1].threads_per_cta == 256);
}

TEST_CASE("flash2 backward as gpu/flash2_backward.cu launches it (--hbmlab-kernels)", "[engine][backward]") {
  const GpuSpec h100 = load_gpu("h100-sxm");
  const AttentionProblem p{1, 16, 2000, 128, Dtype::fp16, true};
  const Blocks b{64, 128};
  EngineOptions reference, own;
  own.launch.hbmlab_kernels = true;
  own.launch.threads_per_cta = 256;
  own.launch.registers_per_thread = 255;
  const std::vector<KernelPlan> ref = plan_kernels(backward("flash2"), p, b, h100, reference);
  const std::vector<KernelPlan> k = plan_kernels(backward("flash2"), p, b, h100, own);
  REQUIRE(k.size() == 3);
  // The same CTAs and tiles; the D and conversion kernels stream through registers, and the main
  // kernel takes the recorded launch.
  for (std::size_t n = 0; n < 3; ++n) {
    CHECK(k[n].programs.size() == ref[n].programs.size());
    CHECK(k[n].accesses.size() == ref[n].accesses.size());
  }
  CHECK(k[0].smem_bytes_per_cta == 0);
  CHECK(k[2].smem_bytes_per_cta == 0);
  CHECK(k[1].threads_per_cta == 256);
  CHECK(k[1].registers_per_thread == 255);
  EngineOptions off = own;
  off.l2_enabled = false;
  const Counts core = count_problem(backward("flash2"), p, b);
  const EngineResult e = run_engine(backward("flash2"), p, b, h100, off);
  CHECK(e.dram_read_bytes() == core.hbm_read_bytes());
  CHECK(e.dram_write_bytes() == core.hbm_write_bytes());
  std::ostringstream out, err;
  CHECK(run_cli({"simulate", "--algo", "flash2", "--pass", "backward", "--hbmlab-kernels", "--seq-len", "1024"}, out, err) == 0);
}

TEST_CASE("GPT-2 medium forward + backward: flash moves fewer bytes and takes less time", "[engine][backward]") {
  SimulateRequest r;
  r.gpu = load_gpu("a100-40gb");
  r.problem = {64, 16, 1024, 64, Dtype::fp16, false};
  r.numerics = NumericsMode::off;
  auto both = [&](std::string_view name) {
    r.algo = algo_named(name);
    const SimulationResult f = simulate(r);
    r.algo = backward(name);
    const SimulationResult b = simulate(r);
    CHECK(b.numerics.mode == "off");
    return std::pair{f.total.hbm_bytes() + b.total.hbm_bytes(), f.time.predicted_s + b.time.predicted_s};
  };
  const auto [standard_bytes, standard_s] = both("standard");
  const auto [flash2_bytes, flash2_s] = both("flash2");
  CHECK(standard_bytes > 3 * flash2_bytes);
  CHECK(standard_s > 1.5 * flash2_s);
}

// [SECTION] Bounds

TEST_CASE("Theorem 5: backward counts scale as N²d²/M (flash) and N² (standard)", "[bounds][backward]") {
  BoundsConfig config;
  config.algos.assign(algorithms(Pass::backward).begin(), algorithms(Pass::backward).end());
  const std::vector<BoundsRow> rows = run_bounds(config);
  for (Algo algo : config.algos)
    for (SweepAxis axis : {SweepAxis::N, SweepAxis::d, SweepAxis::M}) {
      INFO(to_string(algo) << " over " << to_string(axis));
      CHECK(std::count_if(rows.begin(), rows.end(), [&](const BoundsRow& r) { return r.algo == algo && r.axis == axis; }) == 1);
    }
  for (const BoundsRow& row : rows) {
    INFO(to_string(row.algo) << " over " << to_string(row.axis) << ": fitted " << row.fitted);
    CHECK(row.exact_ok);
    CHECK(row.exponent_ok);
    CHECK(std::fabs(row.fitted - row.expected) <= config.tolerance);
    const bool flash = row.algo->name() != "standard";
    // Theorem 5 for flash1 and flash2: N² d² / M; Algorithm 3: N d + N², N² at these N.
    if (row.axis == SweepAxis::N) CHECK(row.fitted == Approx(2.0).margin(0.05));
    if (row.axis == SweepAxis::d) CHECK(row.fitted == Approx(flash ? 2.0 : 0.0).margin(0.05));
    if (row.axis == SweepAxis::M) CHECK(row.fitted == Approx(flash ? -1.0 : 0.0).margin(0.05));
    if (row.axis != SweepAxis::N && row.axis != SweepAxis::d && row.axis != SweepAxis::M) continue;
    // Each point's count against the non-causal formulas of docs/design.md#backward, in elements.
    for (const BoundsPoint& pt : row.points) {
      const std::int64_t N = pt.N, Nd = pt.N * pt.d, Tc = (N + pt.blocks.Bc - 1) / pt.blocks.Bc;
      INFO("N=" << N << " d=" << pt.d << " M=" << pt.M << " Bc=" << pt.blocks.Bc);
      CHECK(pt.closed_form_accesses == pt.accesses);
      if (row.algo->name() == "standard") CHECK(pt.accesses == 7 * N * N + 8 * Nd);
      if (row.algo->name() == "flash1")  // K, V; Q, O, dO, dQ read Tc times; ℓ, m; dQ written 1 + Tc times; dK, dV twice
        CHECK(pt.accesses == 2 * Nd + 4 * Tc * Nd + 2 * Tc * N + (1 + Tc) * Nd + 4 * Nd);
      if (row.algo->name() == "flash2")  // O; dO 1 + Tc; D written and read Tc; Q, dQ Tc; L Tc; dQ written 1 + Tc; K, V; dK, dV
        CHECK(pt.accesses == Nd + (1 + Tc) * Nd + N + Tc * N + 2 * Tc * Nd + Tc * N + (1 + Tc) * Nd + 2 * Nd + 2 * Nd);
    }
  }
}

// [SECTION] CLI

TEST_CASE("simulate --pass both: each room, then forward + backward sums; JSON an array", "[cli][backward]") {
  const Run text = run({"simulate", "--gpu", "toy", "--seq-len", "16", "--head-dim", "4", "--algo", "all", "--pass", "both"});
  REQUIRE(text.code == 0);
  for (const char* room : {"standard backward — ", "flash1 backward — ", "flash2 backward — "}) CHECK_THAT(text.out, Catch::Contains(room));
  CHECK_THAT(text.out, Catch::Contains("Forward + backward"));
  CHECK_THAT(text.out, Catch::Contains("keeps P in HBM for this pass"));
  CHECK_THAT(text.out, Catch::Contains("keeps O, L in HBM for this pass"));
  CHECK_THAT(text.out, Catch::Contains("max |tiled − reference| over dQ, dK, dV"));

  const Run json = run({"simulate", "--gpu", "toy", "--seq-len", "16", "--head-dim", "4", "--algo", "flash2", "--pass", "both",
                        "--json"});
  REQUIRE(json.code == 0);
  const auto j = nlohmann::json::parse(json.out);
  REQUIRE(j.is_array());
  REQUIRE(j.size() == 2);
  CHECK(j[0]["algorithm"] == "flash2");
  CHECK_FALSE(j[0].contains("pass"));  // forward JSON reads as before
  CHECK(j[1]["algorithm"] == "flash2");
  CHECK(j[1]["pass"] == "backward");
  CHECK(j[1]["forward_state"]["tensors"] == "O, L");
  CHECK(j[1]["forward_state"]["extra_bytes_per_head"] == 16 * 4);
  CHECK(j[1]["numerics"]["compared"] == "dQ, dK, dV");
  CHECK(j[1]["numerics"]["max_abs_error_vs_reference"].get<double>() < 1e-4);
  CHECK(j[1]["hbm"]["by_tensor"]["D"]["write_bytes"] == 64);
}

TEST_CASE("bounds --pass backward: verdict PASS", "[cli][bounds][backward]") {
  const Run r = run({"bounds", "--pass", "backward"});
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("verdict: PASS"));
  CHECK_THAT(r.out, Catch::Contains("flash2 backward"));
}

TEST_CASE("bad backward input: one line naming the option, exit 2", "[cli][backward]") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"simulate", "--pass", "sideways"}, {"bounds", "--pass", "sideways"},
        {"simulate", "--algo", "flash1", "--pass", "backward", "--block-rows", "128", "--block-cols", "256"},
        {"simulate", "--algo", "flash1", "--pass", "backward", "--hbmlab-kernels"}}) {
    const Run r = run(args);
    INFO(args[1] << " " << args[2]);
    CHECK(r.code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  CHECK_THAT(run({"simulate", "--pass", "sideways"}).err, Catch::Contains("--pass: unknown pass 'sideways'"));
  CHECK_THAT(run({"simulate", "--algo", "flash1", "--pass", "backward", "--block-rows", "128", "--block-cols", "256"}).err,
             Catch::Contains("--block-cols: "));
}
