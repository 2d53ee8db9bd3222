// Property tests: the replayed counts equal the closed forms of docs/design.md#io-conventions on hundreds of random
// shapes, ragged and causal included, for the rooms of both passes; step-stream invariants hold for
// every algorithm.
#include <algorithm>
#include <array>
#include <random>

#include <catch2/catch.hpp>

#include "sim/algo/block_sparse/masks.hpp"
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

// Every room of both passes.
std::vector<Algo> every_room() {
  std::vector<Algo> all(algorithms(Pass::forward).begin(), algorithms(Pass::forward).end());
  all.insert(all.end(), algorithms(Pass::backward).begin(), algorithms(Pass::backward).end());
  return all;
}

// The formulas of docs/design.md#backward for one (batch, head), written out here from the page and not
// taken from the rooms: elements read and written per tensor, and matmul FLOPs. The page's Tc·N
// (every row block visits every column block) becomes the rows of the visited pairs, summed, and
// "read K_j, V_j" the columns that keep at least one pair; kept(i, j) says which pairs are visited.
struct Formula {
  std::array<std::int64_t, kTensorCount> read{}, write{};  // elements
  std::int64_t matmul_flops = 0;
  void add(Tensor t, std::int64_t r, std::int64_t w) {
    read[static_cast<int>(t)] += r;
    write[static_cast<int>(t)] += w;
  }
};

template <class Kept>
Formula design_backward(std::string_view name, std::int64_t N, std::int64_t d, Blocks b, Kept kept) {
  const std::int64_t Nd = N * d, Tr = (N + b.Br - 1) / b.Br, Tc = (N + b.Bc - 1) / b.Bc;
  auto rows = [&](std::int64_t i) { return std::min(b.Br, N - i * b.Br); };
  auto cols = [&](std::int64_t j) { return std::min(b.Bc, N - j * b.Bc); };
  std::int64_t visited_rows = 0, visited_scores = 0, kv_rows = 0;
  for (std::int64_t j = 0; j < Tc; ++j) {
    bool column = false;
    for (std::int64_t i = 0; i < Tr; ++i)
      if (kept(i, j)) {
        column = true;
        visited_rows += rows(i);
        visited_scores += rows(i) * cols(j);
      }
    if (column) kv_rows += cols(j);
  }
  Formula f;
  if (name == "standard") {  // Alg. 3: P, dP, dS cross HBM; the mask and causal change nothing
    f.add(Tensor::P, 2 * N * N, 0);
    f.add(Tensor::dP, N * N, N * N);
    f.add(Tensor::dS, 2 * N * N, N * N);
    f.add(Tensor::dO, 2 * Nd, 0);
    for (Tensor t : {Tensor::Q, Tensor::K, Tensor::V}) f.add(t, Nd, 0);
    for (Tensor t : {Tensor::dQ, Tensor::dK, Tensor::dV}) f.add(t, 0, Nd);
    f.matmul_flops = 4 * 2 * N * N * d;  // dV, dP, dQ, dK
  } else if (name == "flash1") {  // Alg. 4
    f.add(Tensor::K, kv_rows * d, 0);
    f.add(Tensor::V, kv_rows * d, 0);
    for (Tensor t : {Tensor::Q, Tensor::O, Tensor::dO}) f.add(t, visited_rows * d, 0);
    f.add(Tensor::dQ, visited_rows * d, Nd + visited_rows * d);
    f.add(Tensor::l, visited_rows, 0);
    f.add(Tensor::m, visited_rows, 0);
    f.add(Tensor::dK, 0, 2 * Nd);
    f.add(Tensor::dV, 0, 2 * Nd);
    f.matmul_flops = 5 * 2 * visited_scores * d;  // S, dV, dP, dQ, dK per pair
  } else {  // flash2: FA-2 Alg. 2
    f.add(Tensor::O, Nd, 0);
    f.add(Tensor::dO, Nd + visited_rows * d, 0);
    f.add(Tensor::D, visited_rows, N);
    f.add(Tensor::dQ, visited_rows * d, Nd + visited_rows * d);
    f.add(Tensor::Q, visited_rows * d, 0);
    f.add(Tensor::lse, visited_rows, 0);
    f.add(Tensor::K, kv_rows * d, 0);
    f.add(Tensor::V, kv_rows * d, 0);
    f.add(Tensor::dK, 0, Nd);
    f.add(Tensor::dV, 0, Nd);
    f.matmul_flops = 5 * 2 * visited_scores * d;
  }
  return f;
}

// Every tensor of the counts, to the byte, against the formula times B·H (statistics in fp32).
void require_formula(const Counts& counted, const Formula& f, const AttentionProblem& p) {
  const std::int64_t n = p.instances();
  for (Tensor t : kAllTensors) {
    INFO("tensor " << tensor_key(t));
    const std::int64_t e = is_stat(t) ? 4 : p.elem_bytes();
    REQUIRE(counted[t].read_elems == n * f.read[static_cast<int>(t)]);
    REQUIRE(counted[t].write_elems == n * f.write[static_cast<int>(t)]);
    REQUIRE(counted[t].read_bytes == n * f.read[static_cast<int>(t)] * e);
    REQUIRE(counted[t].write_bytes == n * f.write[static_cast<int>(t)] * e);
  }
  REQUIRE(counted.matmul_flops == n * f.matmul_flops);
}

}  // namespace

TEST_CASE("replayed counts equal the closed forms on random shapes", "[io][property]") {
  const auto shapes = random_shapes(400, 20261120);
  for (const Shape& s : shapes) {
    for (Algo algo : every_room()) {
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

TEST_CASE("non-causal closed forms match the design's formulas literally", "[io][property]") {
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

TEST_CASE("backward counts equal the design's formulas to the byte on random shapes", "[io][property][backward]") {
  int causal_shapes = 0, skipping_shapes = 0;
  for (const Shape& s : random_shapes(400, 20261122)) {
    const AttentionProblem& p = s.problem;
    const std::int64_t N = p.seq_len, Br = s.blocks.Br, Bc = s.blocks.Bc;
    // Causal: a pair is skipped when its first key, j·Bc, lies after its last query.
    auto kept = [&](std::int64_t i, std::int64_t j) { return !p.causal || j * Bc <= std::min(N, (i + 1) * Br) - 1; };
    bool skips = false;
    for (std::int64_t i = 0; i * Br < N; ++i)
      for (std::int64_t j = 0; j * Bc < N; ++j) skips = skips || !kept(i, j);
    causal_shapes += p.causal;
    skipping_shapes += skips;
    for (Algo algo : algorithms(Pass::backward)) {
      INFO(to_string(algo) << " B=" << p.batch << " H=" << p.heads << " N=" << N << " d=" << p.head_dim
                           << " dtype=" << to_string(p.dtype) << " causal=" << p.causal << " Br=" << Br << " Bc=" << Bc);
      require_formula(count_problem(algo, p, s.blocks), design_backward(algo->name(), N, p.head_dim, s.blocks, kept), p);
    }
  }
  CHECK(causal_shapes > 150);    // both halves of the draw are exercised
  CHECK(skipping_shapes > 100);  // and causal skips really happen
}

TEST_CASE("backward closed forms hold under block masks too", "[io][property][backward]") {
  std::mt19937 rng(5);
  auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  for (int k = 0; k < 120; ++k) {
    AttentionProblem p{pick(1, 3), pick(1, 3), pick(1, 600), pick(1, 128), Dtype::fp16, k % 2 == 1};
    const std::string specs[] = {"local:" + std::to_string(pick(1, 300)), "butterfly",
                                 "random:0." + std::to_string(pick(1, 9)) + ":" + std::to_string(k)};
    p.block_mask = parse_block_mask(specs[k % 3]);
    const Blocks b{pick(1, 100), pick(1, 100)};
    for (Algo algo : algorithms(Pass::backward)) {
      if (!algo->supports().block_mask) continue;
      INFO(to_string(algo) << " " << p.block_mask->spec() << " N=" << p.seq_len << " causal=" << p.causal);
      const Counts counted = count_problem(algo, p, b), expected = closed_form(algo, p, b).scaled(p.instances());
      for (Tensor t : kAllTensors) {
        INFO("tensor " << tensor_key(t));
        REQUIRE(counted[t] == expected[t]);
      }
      REQUIRE(counted.matmul_flops == expected.matmul_flops);
      const BlockGrid g(p, b);
      require_formula(counted, design_backward(algo->name(), p.seq_len, p.head_dim, b,
                                               [&](std::int64_t i, std::int64_t j) { return !g.skipped(i, j); }), p);
    }
  }
}

TEST_CASE("step streams are well formed", "[io][property]") {
  for (const Shape& s : random_shapes(60, 99)) {
    for (Algo algo : every_room()) {
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
      if (!s.problem.causal || algo->name() == "standard") REQUIRE(skips == 0);
    }
  }
}
