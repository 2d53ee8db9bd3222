// Exact HBM counts on tiny problems worked out by hand from the papers' algorithms
// (toy GPU: M = 128 fp16 elements; every byte figure below was computed on paper).
#include <catch2/catch.hpp>

#include "sim/algo/blocks.hpp"
#include "sim/engine/replay.hpp"
#include "sim/spec/gpu_spec.hpp"

using namespace hbmlab;

namespace {

AttentionProblem toy_problem(std::int64_t N, std::int64_t d, bool causal = false) {
  return AttentionProblem{1, 1, N, d, Dtype::fp16, causal};
}

SramBudget toy_sram() {
  const GpuSpec toy = load_gpu("toy");
  return {toy.sram_bytes_per_sm, toy.sram_bytes_per_block};
}

void check_tensor(const Counts& c, Tensor t, std::int64_t read_bytes, std::int64_t write_bytes) {
  INFO("tensor " << tensor_key(t));
  CHECK(c[t].read_bytes == read_bytes);
  CHECK(c[t].write_bytes == write_bytes);
}

}  // namespace

TEST_CASE("paper default blocks on the toy GPU", "[io][blocks]") {
  // M = 256 B / 2 B = 128; Bc = ⌈128 / (4·4)⌉ = 8; Br = min(8, 4) = 4.
  const BlockChoice flash1 = choose_blocks(algo_named("flash1"), toy_problem(16, 4), toy_sram());
  CHECK(flash1.M_elements == 128);
  CHECK(flash1.blocks == Blocks{4, 8});
  CHECK(flash1.origin == "paper default");
  // Working set: 2 B·(2·4·4 + 2·8·4) + 4 B·2·4 = 192 + 32 = 224 B ≤ 256 B.
  CHECK(flash1.working_set_bytes == 224);
  // flash2 keeps Q_i resident, so the roles swap: Br = 8, Bc = 4.
  CHECK(choose_blocks(algo_named("flash2"), toy_problem(16, 4), toy_sram()).blocks == Blocks{8, 4});
}

TEST_CASE("standard attention, N=16 d=4: 4Nd + 4N² elements", "[io]") {
  const Counts c = count_instance(algo_named("standard"), toy_problem(16, 4), {4, 8});
  check_tensor(c, Tensor::Q, 128, 0);  // 16·4 elements · 2 B
  check_tensor(c, Tensor::K, 128, 0);
  check_tensor(c, Tensor::V, 128, 0);
  check_tensor(c, Tensor::O, 0, 128);
  check_tensor(c, Tensor::S, 512, 512);  // 16² · 2 B each way
  check_tensor(c, Tensor::P, 512, 512);
  CHECK(c.accesses() == 4 * 16 * 4 + 4 * 16 * 16);  // 256 + 1024
  CHECK(c.matmul_flops == 4 * 16 * 16 * 4);          // QKᵀ and PV, 2N²d each
}

TEST_CASE("flash1, N=16 d=4, Br=4 Bc=8: Tr=4, Tc=2", "[io]") {
  const Counts c = count_instance(algo_named("flash1"), toy_problem(16, 4), {4, 8});
  check_tensor(c, Tensor::K, 128, 0);       // Nd once
  check_tensor(c, Tensor::V, 128, 0);
  check_tensor(c, Tensor::Q, 256, 0);       // Tc·Nd = 128 elements
  check_tensor(c, Tensor::O, 256, 384);     // read Tc·Nd; written (1 + Tc)·Nd = 192 elements
  check_tensor(c, Tensor::l, 128, 192);     // read Tc·N = 32 fp32; written (1 + Tc)·N = 48 fp32
  check_tensor(c, Tensor::m, 128, 192);
  CHECK_FALSE(c.touches(Tensor::S));
  CHECK_FALSE(c.touches(Tensor::P));
  // Steps: 12 initial stores (line 2), then per j: 2 loads + 4 row blocks × (4 loads + 5 computes + 3 stores).
  CHECK(c.steps == 12 + 2 * (2 + 4 * 12));
}

TEST_CASE("flash2, N=16 d=4, Br=8 Bc=4: Tr=2, Tc=4", "[io]") {
  const Counts c = count_instance(algo_named("flash2"), toy_problem(16, 4), {8, 4});
  check_tensor(c, Tensor::Q, 128, 0);    // Nd
  check_tensor(c, Tensor::K, 256, 0);    // Tr·Nd = 128 elements
  check_tensor(c, Tensor::V, 256, 0);
  check_tensor(c, Tensor::O, 0, 128);    // Nd, once
  check_tensor(c, Tensor::lse, 0, 64);   // N fp32
  CHECK_FALSE(c.touches(Tensor::l));
  CHECK_FALSE(c.touches(Tensor::m));
}

TEST_CASE("ragged last blocks move only their real rows", "[io]") {
  // N = 10: Q blocks of 4, 4, 2 rows; K/V blocks of 8 and 2 rows.
  const Counts c = count_instance(algo_named("flash1"), toy_problem(10, 4), {4, 8});
  check_tensor(c, Tensor::K, 80, 0);   // 10·4·2 B
  check_tensor(c, Tensor::Q, 160, 0);  // Tc·Nd = 2·40 elements
  check_tensor(c, Tensor::O, 160, 240);
  check_tensor(c, Tensor::l, 80, 120);  // 20 and 30 fp32

  const std::vector<Step> steps = record_steps(algo_named("flash1"), toy_problem(10, 4), {4, 8});
  std::int64_t last_q_block_rows = 0, last_k_block_rows = 0;
  for (const Step& s : steps) {
    if (s.kind == StepKind::load && s.tensor == Tensor::Q && s.i == 2) last_q_block_rows = s.rows;
    if (s.kind == StepKind::load && s.tensor == Tensor::K && s.j == 1) last_k_block_rows = s.rows;
  }
  CHECK(last_q_block_rows == 2);
  CHECK(last_k_block_rows == 2);
}

TEST_CASE("causal flash1 skips block pairs above the diagonal", "[io][causal]") {
  // Br = 4, Bc = 8, N = 16. Row blocks 0 and 1 (queries 0–7) skip K/V block 1 (keys 8–15):
  // 6 of 8 pairs are visited.
  const Counts c = count_instance(algo_named("flash1"), toy_problem(16, 4, true), {4, 8});
  CHECK(c.skipped_blocks == 2);
  check_tensor(c, Tensor::K, 128, 0);       // every K_j is still loaded
  check_tensor(c, Tensor::Q, 192, 0);       // 6 pairs × 4 rows × 4 × 2 B
  check_tensor(c, Tensor::O, 192, 320);     // initial 128 B + 6 × 32 B
  check_tensor(c, Tensor::l, 96, 160);      // 6 × 4 fp32 read; 16 + 24 fp32 written
  CHECK(c.matmul_flops == 6 * 2 * (2 * 4 * 8 * 4));
}

TEST_CASE("causal flash2 loads only K/V blocks up to the diagonal", "[io][causal]") {
  // Br = 8, Bc = 4: row block 0 (queries 0–7) visits K/V blocks 0, 1; row block 1 visits all 4.
  const Counts c = count_instance(algo_named("flash2"), toy_problem(16, 4, true), {8, 4});
  CHECK(c.skipped_blocks == 2);
  check_tensor(c, Tensor::K, (8 + 16) * 4 * 2, 0);
  check_tensor(c, Tensor::Q, 128, 0);
  check_tensor(c, Tensor::O, 0, 128);
}

TEST_CASE("causal masking leaves standard attention at N²", "[io][causal]") {
  CHECK(count_instance(algo_named("standard"), toy_problem(16, 4, true), {4, 8}) ==
        count_instance(algo_named("standard"), toy_problem(16, 4, false), {4, 8}));
}

TEST_CASE("dtype sets tile bytes; statistics stay fp32", "[io]") {
  AttentionProblem p = toy_problem(16, 4);
  p.dtype = Dtype::fp32;
  const Counts c = count_instance(algo_named("flash1"), p, {4, 8});
  CHECK(c[Tensor::Q].read_bytes == 512);  // twice fp16's
  CHECK(c[Tensor::l].read_bytes == 128);  // unchanged
}

TEST_CASE("every (batch, head) is alike: totals scale by B·H", "[io]") {
  AttentionProblem p = toy_problem(16, 4);
  const Counts one = count_problem(algo_named("flash1"), p, {4, 8});
  p.batch = 3;
  p.heads = 5;
  const Counts fifteen = count_problem(algo_named("flash1"), p, {4, 8});
  CHECK(fifteen.hbm_bytes() == 15 * one.hbm_bytes());
  CHECK(fifteen.matmul_flops == 15 * one.matmul_flops);
}

TEST_CASE("narration names the paper's line and block", "[io][narration]") {
  const std::vector<Step> steps = record_steps(algo_named("flash1"), toy_problem(16, 4), {4, 8});
  CHECK(algo_named("flash1")->narrate(steps.front()) == "line 2: initialise O_1 ← 0 in HBM (32 B)");
  const auto k_load = std::find_if(steps.begin(), steps.end(),
                                   [](const Step& s) { return s.kind == StepKind::load && s.tensor == Tensor::K; });
  REQUIRE(k_load != steps.end());
  CHECK(algo_named("flash1")->narrate(*k_load) == "line 6: load K_1 (8×4, 64 B) from HBM into SRAM");
}
