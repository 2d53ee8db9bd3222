// Property tests: the replayed counts equal DESIGN.md's closed forms on hundreds of random
// shapes, ragged and causal included; step-stream invariants hold for every algorithm.
#include <random>

#include <catch2/catch.hpp>

#include "sim/bounds/bounds.hpp"
#include "sim/engine/replay.hpp"

using namespace hbmlab;

namespace {

struct Shape {
  AttentionProblem problem;
  Blocks blocks;
};

std::vector<Shape> random_shapes(int count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  const Dtype dtypes[] = {Dtype::fp16, Dtype::bf16, Dtype::fp32};
  std::vector<Shape> shapes;
  for (int k = 0; k < count; ++k) {
    Shape s;
    s.problem.batch = pick(1, 4);
    s.problem.heads = pick(1, 4);
    s.problem.seq_len = pick(1, 700);
    s.problem.head_dim = pick(1, 160);
    s.problem.dtype = dtypes[pick(0, 2)];
    s.problem.causal = pick(0, 1) == 1;
    s.blocks = {pick(1, std::min<std::int64_t>(s.problem.seq_len, 200)), pick(1, std::min<std::int64_t>(s.problem.seq_len, 200))};
    shapes.push_back(s);
  }
  return shapes;
}

}  // namespace

TEST_CASE("replayed counts equal the closed forms on random shapes", "[io][property]") {
  const auto shapes = random_shapes(400, 20261120);
  for (const Shape& s : shapes) {
    for (Algo algo : algorithms()) {
      const AttentionProblem& p = s.problem;
      INFO(to_string(algo) << " B=" << p.batch << " H=" << p.heads << " N=" << p.seq_len << " d=" << p.head_dim
                           << " dtype=" << to_string(p.dtype) << " causal=" << p.causal << " Br=" << s.blocks.Br
                           << " Bc=" << s.blocks.Bc);
      const Counts counted = count_problem(algo, p, s.blocks);
      const Counts expected = closed_form(algo, p, s.blocks).scaled(p.instances());
      for (Tensor t : kAllTensors) {
        INFO("tensor " << tensor_key(t));
        REQUIRE(counted[t].read_bytes == expected[t].read_bytes);
        REQUIRE(counted[t].write_bytes == expected[t].write_bytes);
        REQUIRE(counted[t].read_elems == expected[t].read_elems);
        REQUIRE(counted[t].write_elems == expected[t].write_elems);
      }
      REQUIRE(counted.matmul_flops == expected.matmul_flops);
    }
  }
}

TEST_CASE("non-causal closed forms match DESIGN.md's formulas literally", "[io][property]") {
  for (const Shape& s : random_shapes(200, 7)) {
    AttentionProblem p = s.problem;
    p.causal = false;
    const std::int64_t N = p.seq_len, d = p.head_dim, e = p.elem_bytes(), Nd = N * d;
    const BlockGrid g(N, s.blocks, false);
    const Counts f1 = count_instance(algo_named("flash1"), p, s.blocks);
    REQUIRE(f1[Tensor::Q].read_bytes == g.Tc * Nd * e);
    REQUIRE(f1[Tensor::O].read_bytes == g.Tc * Nd * e);
    REQUIRE(f1[Tensor::O].write_bytes == (1 + g.Tc) * Nd * e);
    REQUIRE(f1[Tensor::m].write_bytes == (1 + g.Tc) * N * kStatBytes);
    const Counts f2 = count_instance(algo_named("flash2"), p, s.blocks);
    REQUIRE(f2[Tensor::K].read_bytes == g.Tr * Nd * e);
    REQUIRE(f2[Tensor::lse].write_bytes == N * kStatBytes);
    const Counts st = count_instance(algo_named("standard"), p, s.blocks);
    REQUIRE(st.accesses() == 4 * Nd + 4 * N * N);
  }
}

TEST_CASE("step streams are well formed", "[io][property]") {
  for (const Shape& s : random_shapes(60, 99)) {
    for (Algo algo : algorithms()) {
      const std::vector<Step> steps = record_steps(algo, s.problem, s.blocks);
      const BlockGrid g(s.problem.seq_len, s.blocks, s.problem.causal);
      std::int64_t skips = 0;
      for (const Step& step : steps) {
        REQUIRE(step.line > 0);
        REQUIRE(step.rows > 0);
        REQUIRE(step.cols > 0);
        REQUIRE(step.row0 + step.rows <= s.problem.seq_len);
        if (step.kind == StepKind::load || step.kind == StepKind::store) {
          REQUIRE(step.bytes == step.rows * step.cols * (is_stat(step.tensor) ? kStatBytes : s.problem.elem_bytes()));
        }
        if (step.kind == StepKind::skip) {
          REQUIRE(g.skipped(step.i, step.j));
          ++skips;
        }
        if (step.kind == StepKind::compute) REQUIRE(step.flops > 0);
      }
      if (!s.problem.causal || algo == algo_named("standard")) REQUIRE(skips == 0);
    }
  }
}
