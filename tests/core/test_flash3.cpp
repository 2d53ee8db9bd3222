// The flash3 room (FlashAttention-3's Algorithm 1): the same HBM accesses as flash2 for the same
// blocks (its steps are flash2's), its own narration, a working set that counts the K/V ring, and a
// launch plan with one producer and two consumer warpgroups.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <tuple>

#include "sim/algo/block_sparse/masks.hpp"
#include "sim/algo/emitter.hpp"
#include "sim/common/error.hpp"
#include "sim/engine/replay.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/measure/validate.hpp"
#include "sim/report/report.hpp"
#include "sim/spec/gpu_spec.hpp"

using namespace hbmlab;

TEST_CASE("flash3 moves exactly flash2's HBM bytes for the same blocks", "[io][flash3]") {
  const Algo f2 = algo_named("flash2"), f3 = algo_named("flash3");
  for (std::int64_t N : {16, 97, 1000, 6000})
    for (std::int64_t d : {64, 128})
      for (bool causal : {false, true})
        for (Blocks b : {Blocks{128, 128}, Blocks{64, 32}}) {
          AttentionProblem p{2, 4, N, d, Dtype::fp16, causal};
          p.kv_heads = 2;  // grouped-query attention, as flash2 counts it
          INFO("N=" << N << " d=" << d << " causal=" << causal << " Br=" << b.Br << " Bc=" << b.Bc);
          const Counts c2 = count_problem(f2, p, b), c3 = count_problem(f3, p, b);
          CHECK(c3.hbm == c2.hbm);
          CHECK(c3.matmul_flops == c2.matmul_flops);
          CHECK(c3.hbm_bytes() == c2.hbm_bytes());
          CHECK(f3->closed_form(p, b).hbm == count_instance(f3, p, b).hbm);  // per (batch, head)
        }
}

TEST_CASE("flash3 takes flash2's block masks: the same pairs kept, the same HBM bytes", "[io][flash3][block-sparse]") {
  // Blocks of hbmlab's flash3 kernel (192 × 128 and 128 × 128) and a small one; ragged N; sliding
  // windows, butterfly and random masks (random:0.05 empties whole row blocks), causal on top or not.
  const Algo f2 = algo_named("flash2"), f3 = algo_named("flash3");
  REQUIRE(f3->supports().block_mask);
  for (const char* mask : {"local:300", "butterfly", "random:0.2:5", "random:0.05:3"})
    for (std::int64_t N : {97, 1000, 6000})
      for (bool causal : {false, true})
        for (Blocks b : {Blocks{192, 128}, Blocks{128, 128}, Blocks{64, 32}}) {
          AttentionProblem p{2, 4, N, 128, Dtype::bf16, causal};
          p.block_mask = parse_block_mask(mask);
          INFO(mask << " N=" << N << " causal=" << causal << " Br=" << b.Br << " Bc=" << b.Bc);
          const Counts c2 = count_problem(f2, p, b), c3 = count_problem(f3, p, b);
          CHECK(c3.hbm == c2.hbm);
          CHECK(c3.matmul_flops == c2.matmul_flops);
          CHECK(f3->closed_form(p, b).hbm == count_instance(f3, p, b).hbm);
          // K_j, V_j once per kept pair (and Q_i once per row block, as flash2 reads it): the mask is followed.
          const BlockGrid g(p, b);
          std::int64_t kv_rows = 0;
          for (std::int64_t i = 0; i < g.Tr; ++i)
            for (std::int64_t j = 0; j < g.Tc; ++j) kv_rows += g.skipped(i, j) ? 0 : g.cols(j);
          CHECK(c3[Tensor::K].read_bytes == kv_rows * p.head_dim * p.elem_bytes() * p.instances());
          CHECK(c3[Tensor::Q].read_bytes == N * p.head_dim * p.elem_bytes() * p.instances());
        }
  // Through the CLI's path: `simulate --algo flash3 --block-mask` gives flash2's report of the mask.
  AttentionProblem p{1, 16, 8192, 64, Dtype::fp16, true};
  p.block_mask = parse_block_mask("local:1024");
  const GpuSpec h100 = load_gpu("h100-sxm");
  const Blocks b{128, 128};
  const EngineResult e2 = run_engine(f2, p, b, h100, {}), e3 = run_engine(f3, p, b, h100, {});
  CHECK(e3.dram_read_bytes() == Approx(e2.dram_read_bytes()).epsilon(0.02));
  // The window keeps 540 of the causal mask's 2,080 block pairs (26 %); the time follows the pairs, plus
  // what every row block pays once (Q_i in, O_i out, the last wave's tail).
  const AttentionProblem dense{1, 16, 8192, 64, Dtype::fp16, true};
  const double kept = double(count_problem(f3, p, b).matmul_flops) / double(count_problem(f3, dense, b).matmul_flops);
  CHECK(kept == Approx(540.0 / 2080.0).epsilon(0.01));
  const double dense_s = run_engine(f3, dense, b, h100, {}).predicted_s;
  CHECK(e3.predicted_s > kept * dense_s);
  CHECK(e3.predicted_s < (kept + 0.1) * dense_s);
}

TEST_CASE("flash3's working set counts its K/V ring; its plan names the warpgroups", "[flash3]") {
  const Algo f3 = algo_named("flash3");
  // d = 128: Q_i and O_i (128 × 128) + 2 stages × (K_j + V_j) (128 × 128) in fp16, ℓ_i and m_i in fp32.
  const AttentionProblem p128{1, 16, 4096, 128, Dtype::fp16, false};
  CHECK(f3->working_set_bytes(p128, {128, 128}) == 2 * (2 * 128 * 128 + 2 * 2 * 128 * 128) + 4 * 2 * 128);
  // d = 64: 3 stages.
  const AttentionProblem p64{1, 32, 4096, 64, Dtype::fp16, false};
  CHECK(f3->working_set_bytes(p64, {128, 128}) == 2 * (2 * 128 * 64 + 2 * 3 * 128 * 64) + 4 * 2 * 128);
  CHECK(f3->working_set_bytes(p128, {128, 128}) > algo_named("flash2")->working_set_bytes(p128, {128, 128}));

  const std::vector<KernelPlan> plans = f3->plan_kernels(p128, {128, 128}, load_gpu("h100-sxm"), EngineOptions{});
  REQUIRE(plans.size() == 1);
  CHECK(plans[0].name == "flash3 forward");
  CHECK(plans[0].threads_per_cta == 384);  // one producer and two consumer warpgroups
  CHECK(plans[0].smem_bytes_per_cta == f3->working_set_bytes(p128, {128, 128}));
  CHECK(plans[0].overlap.find("producer warpgroup") != std::string::npos);
  CHECK(plans[0].overlap.find("2 K/V stages") != std::string::npos);
}

TEST_CASE("flash3 hands out causal row blocks longest first, as its kernel does", "[flash3][timing]") {
  const Algo f2 = algo_named("flash2"), f3 = algo_named("flash3");
  const GpuSpec gpu = load_gpu("h100-sxm");
  // N = 1024, 128 × 128 blocks: Tr = Tc = 8. Under the causal mask row block Q_i visits i + 1 blocks.
  const AttentionProblem causal{1, 4, 1024, 128, Dtype::fp16, true}, full{1, 4, 1024, 128, Dtype::fp16, false};
  const KernelPlan p2 = f2->plan_kernels(causal, {128, 128}, gpu, EngineOptions{}).front();
  const KernelPlan p3 = f3->plan_kernels(causal, {128, 128}, gpu, EngineOptions{}).front();
  REQUIRE(p3.programs.size() == 8);
  std::int32_t before = 0;
  for (std::size_t c = 0; c < p3.programs.size(); ++c) {
    INFO("CTA " << c);
    CHECK(p3.programs[c].phase_count == p2.programs[7 - c].phase_count);  // flash2's from the last one down
    if (c) CHECK(p3.programs[c].phase_count < before);
    before = p3.programs[c].phase_count;
  }
  // Without the mask every row is as long: the order stays flash2's.
  const KernelPlan f2full = f2->plan_kernels(full, {128, 128}, gpu, EngineOptions{}).front();
  const KernelPlan f3full = f3->plan_kernels(full, {128, 128}, gpu, EngineOptions{}).front();
  for (std::size_t c = 0; c < f3full.programs.size(); ++c)
    CHECK(f3full.programs[c].first_phase == f2full.programs[c].first_phase);
  // The HBM counts do not depend on the order.
  CHECK(count_problem(f3, causal, {128, 128}).hbm == count_problem(f2, causal, {128, 128}).hbm);
}

TEST_CASE("hbmlab's flash3 is planned persistent unless a block mask or a record's grid says one CTA per tile",
          "[flash3][timing]") {
  const Algo f3 = algo_named("flash3");
  const GpuSpec gpu = load_gpu("h100-sxm");
  AttentionProblem p{1, 16, 4096, 128, Dtype::fp16, true};  // Tr = 32: 512 tiles
  EngineOptions hbmlab;
  hbmlab.launch.hbmlab_kernels = true;
  auto persistent = [&](const EngineOptions& o) { return f3->plan_kernels(p, {128, 128}, gpu, o).front().persistent; };
  CHECK(persistent(EngineOptions{}));  // FlashAttention-3's own kernel
  CHECK(persistent(hbmlab));           // v4, the default with or without a causal mask
  p.causal = false;
  CHECK(persistent(hbmlab));
  p.block_mask = parse_block_mask("local:1024");
  CHECK_FALSE(persistent(hbmlab));  // v3 with a block mask
  p.block_mask = nullptr;
  p.causal = true;
  EngineOptions v3 = hbmlab, v4 = hbmlab;
  v3.launch.ctas = 512;  // a record of v3: one CTA per tile
  v4.launch.ctas = 132;  // a record of v4: one CTA per SM
  CHECK_FALSE(persistent(v3));
  CHECK(persistent(v4));
}

TEST_CASE("a persistent flash3 is reported as the CTAs it launches and the tiles they walk", "[flash3][timing][cli]") {
  // Lesson 8's shape: 32 heads of 64 row blocks, 2,048 tiles; flash2 launches a CTA for each.
  SimulateRequest r;
  r.gpu = load_gpu("h100-sxm");
  r.problem = AttentionProblem{1, 32, 8192, 128, Dtype::fp16, false};
  r.block_rows = 128;
  r.block_cols = 128;
  r.numerics = NumericsMode::off;
  auto grid = [&](const char* algo) {
    r.algo = algo_named(algo);
    const SimulationResult s = simulate(r);
    REQUIRE(s.engine.kernels.size() == 1);
    const KernelTiming& k = s.engine.kernels.front();
    CHECK(s.time.ctas == k.ctas);
    CHECK(s.time.tiles == k.tiles);
    return std::tuple{k.ctas, k.tiles, k.waves};
  };
  CHECK(grid("flash2") == std::tuple{2048, 2048, 16});
  CHECK(grid("flash3") == std::tuple{132, 2048, 16});  // FlashAttention-3's queue: one CTA per SM slot
  r.launch.hbmlab_kernels = true;
  CHECK(grid("flash3") == std::tuple{132, 2048, 16});  // hbmlab's v4: min(tiles, SMs) in a static order
  r.problem.causal = true;
  CHECK(grid("flash3") == std::tuple{132, 2048, 16});  // v4 under a causal mask: 1,024 pairs, still 132
  r.problem.block_mask = parse_block_mask("local:1024");
  CHECK(grid("flash3") == std::tuple{2048, 2048, 16});  // v3: one CTA per tile
  r.problem.block_mask = nullptr;
  r.launch.ctas = 200;  // a record's grid
  CHECK(grid("flash3") == std::tuple{200, 2048, 16});
  r.launch = {};
  r.problem.causal = false;
  r.algo = algo_named("flash3");
  const SimulationResult s = simulate(r);
  std::ostringstream text;
  print_simulation(text, s);
  CHECK_THAT(text.str(), Catch::Contains(": 132 persistent CTAs walking 2,048 tiles, 1 per SM (SRAM-limited), 16 waves;"));
  const Json j = simulation_json(s);
  CHECK(j["time"]["ctas"] == 132);
  CHECK(j["time"]["tiles"] == 2048);
  CHECK(j["time"]["kernels"][0]["ctas"] == 132);
  CHECK(j["time"]["kernels"][0]["tiles"] == 2048);
  r.algo = algo_named("flash2");
  std::ostringstream f2;
  print_simulation(f2, simulate(r));
  CHECK_THAT(f2.str(), Catch::Contains(": 2,048 CTAs, 1 per SM (SRAM-limited), 16 waves;"));
  r.problem.heads = 2;  // 128 CTAs on 132 SMs: one wave, said in the singular
  std::ostringstream one;
  print_simulation(one, simulate(r));
  CHECK_THAT(one.str(), Catch::Contains(": 128 CTAs, 1 per SM (SRAM-limited), 1 wave;"));
}

TEST_CASE("hbmlab's v4 is planned in its kernel's static tile order; other flash3 launches keep the queue",
          "[flash3][timing]") {
  const Algo f3 = algo_named("flash3");
  const GpuSpec gpu = load_gpu("h100-sxm");
  AttentionProblem p{1, 16, 4096, 128, Dtype::fp16, true};  // Tr = 32: 512 tiles, 256 pairs
  EngineOptions hbmlab;
  hbmlab.launch.hbmlab_kernels = true;
  auto plan = [&](const EngineOptions& o) { return f3->plan_kernels(p, {128, 128}, gpu, o).front(); };
  CHECK(plan(EngineOptions{}).static_tiles.ctas == 0);  // FlashAttention-3's own kernel: the queue
  EngineOptions v3 = hbmlab;
  v3.launch.ctas = 512;
  CHECK(plan(v3).static_tiles.ctas == 0);
  // Causal: 132 CTAs take pairs, and a head's positions are rows 31, 0, 30, 1, …: each pair visits
  // 33 K/V blocks (row i visits i + 1).
  const KernelPlan causal = plan(hbmlab);
  CHECK(causal.static_tiles.ctas == 132);
  CHECK(causal.static_tiles.run == 2);
  CHECK_FALSE(causal.static_tiles.reverse_odd_instances);
  REQUIRE(causal.programs.size() == 32);
  CHECK(causal.programs[0].phase_count == 32);
  CHECK(causal.programs[1].phase_count == 1);
  CHECK(causal.programs[2].phase_count == 31);
  for (std::size_t q = 0; q < 32; q += 2) CHECK(causal.programs[q].phase_count + causal.programs[q + 1].phase_count == 33);
  EngineOptions v4 = hbmlab;
  v4.launch.ctas = 100;  // a record's grid wins over the SM count
  CHECK(plan(v4).static_tiles.ctas == 100);
  p.seq_len = 4096 - 128;  // Tr = 31: every second head runs its order backwards
  CHECK(plan(hbmlab).static_tiles.reverse_odd_instances);
  // No mask: one tile at a time, c, c + grid, …
  p.seq_len = 4096;
  p.causal = false;
  const KernelPlan full = plan(hbmlab);
  CHECK(full.static_tiles.ctas == 132);
  CHECK(full.static_tiles.run == 1);
  // A ragged last row block costs the kernel a whole one (its rows past N are zeros it computes):
  // N = 2048 at Br = 192 leaves 128 rows in Q_10.
  const AttentionProblem ragged{1, 16, 2048, 64, Dtype::fp16, false};
  auto flops = [](const KernelPlan& k, const CtaProgram& c) {
    std::int64_t f = 0;
    for (std::int32_t n = c.first_phase; n < c.first_phase + c.phase_count; ++n) f += k.phases[n].matmul_flops;
    return f;
  };
  const KernelPlan r4 = f3->plan_kernels(ragged, {192, 128}, gpu, hbmlab).front();
  REQUIRE(r4.programs.size() == 11);
  CHECK(flops(r4, r4.programs[0]) == flops(r4, r4.programs[1]));  // position 0 is Q_10, the ragged one
  const KernelPlan r3 = f3->plan_kernels(ragged, {192, 128}, gpu, EngineOptions{}).front();
  CHECK(3 * flops(r3, r3.programs[10]) == 2 * flops(r3, r3.programs[0]));  // the queue's plan: 128 of 192 rows
}

TEST_CASE("hbmlab's flash3 kernels are charged whole tiles for ragged Q and K/V blocks, v3 and v4 alike",
          "[flash3][timing]") {
  // The kernel computes every pair as a whole Br × Bc tile (rows past N are zeros, keys past N masked):
  // 4·Br·Bc·d FLOPs of products and kScoreOps·Br·Bc of softmax scores a pair, whatever N is.
  const Algo f3 = algo_named("flash3");
  const GpuSpec gpu = load_gpu("h100-sxm");
  const Blocks b{128, 128};
  for (const std::int64_t N : {2048, 2000, 1985, 2047})
    for (const bool causal : {false, true})
      for (const char* mask : {"", "local:700"})
        for (const bool v3_by_grid : {false, true}) {
          AttentionProblem p{1, 4, N, 128, Dtype::fp16, causal};
          if (*mask) p.block_mask = parse_block_mask(mask);
          const BlockGrid g(p, b);
          EngineOptions o;
          o.launch.hbmlab_kernels = true;
          if (v3_by_grid) o.launch.ctas = g.Tr * p.instances();  // a record of v3: one CTA per tile
          INFO("N=" << N << " causal=" << causal << " mask=" << mask << " v3 by its grid=" << v3_by_grid);
          const KernelPlan k = f3->plan_kernels(p, b, gpu, o).front();
          std::int64_t pairs = 0;
          for (std::int64_t i = 0; i < g.Tr; ++i)
            for (std::int64_t j = 0; j < g.Tc; ++j) pairs += g.skipped(i, j) ? 0 : 1;
          std::int64_t matmul = 0, scores_and_more = 0;
          for (const CtaProgram& c : k.programs)
            for (std::int32_t n = c.first_phase; n < c.first_phase + c.phase_count; ++n) {
              matmul += k.phases[n].matmul_flops;
              scores_and_more += k.phases[n].non_matmul_flops;
            }
          CHECK(matmul == pairs * 4 * b.Br * b.Bc * p.head_dim);
          // Softmax of whole tiles, plus what is per row (statistics, rescales, epilogue) for all Br rows.
          CHECK(scores_and_more >= pairs * kScoreOps * b.Br * b.Bc);
          CHECK(scores_and_more < pairs * (kScoreOps * b.Br * b.Bc + b.Br * (p.head_dim + 8)) + g.Tr * b.Br * (p.head_dim + 2));
          // The reference launch (FlashAttention-3's, cuDNN's) keeps the real rows' and keys' share.
          const KernelPlan reference = f3->plan_kernels(p, b, gpu, EngineOptions{}).front();
          std::int64_t reference_matmul = 0;
          for (const CtaPhase& phase : reference.phases) reference_matmul += phase.matmul_flops;
          std::int64_t real = 0;
          for (std::int64_t i = 0; i < g.Tr; ++i)
            for (std::int64_t j = 0; j < g.Tc; ++j) real += g.skipped(i, j) ? 0 : 4 * g.rows(i) * g.cols(j) * p.head_dim;
          CHECK(reference_matmul == real);
        }
}

TEST_CASE("flash3's on-chip counts are its wgmma kernel's, not flash2's ldmatrix", "[flash3][on_chip]") {
  const AttentionProblem p{1, 16, 4096, 128, Dtype::fp16, false};
  const GpuSpec gpu = load_gpu("h100-sxm");
  const KernelPlan f3 = algo_named("flash3")->plan_kernels(p, {128, 128}, gpu, EngineOptions{}).at(0);
  const KernelPlan f2 = algo_named("flash2")->plan_kernels(p, {128, 128}, gpu, EngineOptions{}).at(0);
  const std::int64_t pairs = 16 * 32 * 32;  // Tr × Tc per head, 16 heads, not causal
  REQUIRE(f3.on_chip.modelled);
  CHECK(f3.on_chip.ldmatrix == 0);
  CHECK(f3.on_chip.mma == 0);
  CHECK(f3.on_chip.wgmma == pairs * 2 * (128 / 16 + 128 / 16));  // two consumer warpgroups
  CHECK(f3.on_chip.wgmma_flops == f2.on_chip.mma_flops());     // the same FLOPs on another pipe
  // wgmma reads all of K_j and V_j once per consumer warpgroup; nothing goes through registers.
  CHECK(f3.on_chip[Tensor::K].mma_read == pairs * 2 * 128 * 128 * 2);
  CHECK(f3.on_chip.total().read == 0);
  CHECK(f2.on_chip.total().read > 0);
  // The copy engine fills shared memory with what flash2's cp.async does.
  CHECK(f3.on_chip.total().fill == f2.on_chip.total().fill);
}

TEST_CASE("flash3 backward moves exactly flash2 backward's HBM bytes for the same blocks", "[io][flash3][backward]") {
  const Algo f2 = algo_named("flash2", Pass::backward), f3 = algo_named("flash3", Pass::backward);
  for (std::int64_t N : {16, 97, 1000, 6000})
    for (std::int64_t d : {64, 128})
      for (bool causal : {false, true})
        for (Blocks b : {Blocks{64, 128}, Blocks{128, 64}}) {
          const AttentionProblem p{2, 4, N, d, Dtype::fp16, causal};
          INFO("N=" << N << " d=" << d << " causal=" << causal << " Br=" << b.Br << " Bc=" << b.Bc);
          const Counts c2 = count_problem(f2, p, b), c3 = count_problem(f3, p, b);
          CHECK(c3.hbm == c2.hbm);
          CHECK(c3.matmul_flops == c2.matmul_flops);
          CHECK(c3.hbm_bytes() == c2.hbm_bytes());
          CHECK(f3->closed_form(p, b).hbm == count_instance(f3, p, b).hbm);
        }
}

TEST_CASE("flash3 backward's SM is its own: working set, warpgroups, registers, wgmma counts", "[flash3][backward][on_chip]") {
  const Algo f2 = algo_named("flash2", Pass::backward), f3 = algo_named("flash3", Pass::backward);
  // d = 128, 64 × 128: K_j, V_j (128 × 128) + 2 stages × (Q_i + dO_i) (64 × 128) + 2 dS_ijᵀ (128 × 64) in
  // fp16, 2 × (L_i, D_i) in fp32: 164,864 bytes (gpu/flash3_backward.cu's, less its barriers and alignment).
  const AttentionProblem p{1, 40, 6000, 128, Dtype::fp16, false};
  const Blocks b{64, 128};
  CHECK(f3->working_set_bytes(p, b) == 2 * (2 * 128 * 128 + 2 * 2 * 64 * 128 + 2 * 128 * 64) + 4 * 2 * 2 * 64);
  CHECK(f3->working_set_bytes(p, b) == 164'864);
  const GpuSpec gpu = load_gpu("h100-sxm");
  const std::vector<KernelPlan> plans = f3->plan_kernels(p, b, gpu, EngineOptions{});
  const std::vector<KernelPlan> flash2 = f2->plan_kernels(p, b, gpu, EngineOptions{});
  REQUIRE(plans.size() == 3);
  const KernelPlan& main = plans[1];
  CHECK(main.name == "flash3 backward");
  CHECK(main.threads_per_cta == 384);  // one producer and two consumer warpgroups
  CHECK(main.registers_per_thread == 168);
  CHECK(main.smem_bytes_per_cta == 164'864);
  CHECK(main.library_gemm);
  CHECK_FALSE(flash2[1].library_gemm);
  CHECK(main.overlap.find("producer warpgroup") != std::string::npos);
  // On chip: wgmma from shared memory, no ldmatrix, no mma.sync; the same FLOPs as flash2's MMAs.
  const std::int64_t pairs = 94 * 47 * 40;  // Tr × Tc × heads
  REQUIRE(main.on_chip.modelled);
  CHECK(main.on_chip.ldmatrix == 0);
  CHECK(main.on_chip.mma == 0);
  CHECK(main.on_chip.wgmma == pairs * 2 * (2 * 128 / 16 + 2 * 64 / 16 + 128 / 16));
  CHECK(main.on_chip.wgmma_flops == flash2[1].on_chip.mma_flops());
  // The tensor cores read K_j and V_j once a pair over both warpgroups (each its 64 keys), K_j again
  // for dQ, Q_i and dO_i twice per warpgroup, dS_ijᵀ once per warpgroup.
  CHECK(main.on_chip[Tensor::K].mma_read == pairs * 2 * 128 * 128 * 2);
  CHECK(main.on_chip[Tensor::V].mma_read == pairs * 128 * 128 * 2);
  CHECK(main.on_chip[Tensor::Q].mma_read == pairs * 2 * 2 * 64 * 128 * 2);
  CHECK(main.on_chip[Tensor::dS].mma_read == pairs * 2 * 128 * 64 * 2);
  CHECK(main.on_chip[Tensor::dS].write == pairs * 128 * 64 * 2);
  CHECK(main.on_chip.st_shared == pairs * (128 + 4));  // dS_ijᵀ (32-bit stores); L_i and D_i (two per 32 rows)
  // The copy engine fills what flash2's kernel copies: K_j, V_j once a CTA, Q_i and dO_i every pair.
  CHECK(main.on_chip[Tensor::Q].fill == flash2[1].on_chip[Tensor::Q].fill);
  CHECK(main.on_chip[Tensor::K].fill == flash2[1].on_chip[Tensor::K].fill);
  // The D kernel and dQ's conversion are flash2 backward's.
  CHECK(plans[0].name == flash2[0].name);
  CHECK(plans[2].name == flash2[2].name);
  // wgmma at the library GEMM rate (cuDNN's kernel), hbmlab's own kernel at the mma.sync kernels' rate.
  EngineOptions hbmlab;
  hbmlab.launch.hbmlab_kernels = true;
  CHECK_FALSE(f3->plan_kernels(p, b, gpu, hbmlab)[1].library_gemm);
}

TEST_CASE("validate reads cuDNN's backward and hbmlab's flash3 backward as the flash3 backward room",
          "[flash3][backward][validate]") {
  const std::string dir = std::string(HBMLAB_SOURCE_DIR) + "/assets/measurements/";
  if (!std::filesystem::exists(dir + "h100-flash3-backward-cudnn.json")) return;
  // cuDNN: its three kernels under ncu (h100-flash3-backward-cudnn.json), the main one's tile 64 keys ×
  // 64 queries a consumer warpgroup, two consumer warpgroups (384 threads): Br × Bc = 64 × 128.
  const ValidationReport cudnn = read_measurements({dir + "h100-flash3-backward-cudnn.json"}, std::nullopt);
  REQUIRE(cudnn.rows.size() == 24);
  for (const ValidationRow& row : cudnn.rows) {
    CHECK(row.algo == algo_named("flash3", Pass::backward));
    CHECK(row.source == "sdpa cudnn backward");
    CHECK(row.blocks == Blocks{64, 128});
    CHECK(row.launch.threads_per_cta == 384);
  }
  // DRAM reads: the room's (flash2 backward's) count, within 10 % of both kernels' on every record.
  const ValidationReport r =
      validate_measurements({dir + "h100-flash3-backward-cudnn.json", dir + "h100-flash3-backward.json"}, std::nullopt);
  REQUIRE(r.rows.size() == 24 + 36);
  for (const ValidationRow& row : r.rows) {
    INFO(row.source << " N=" << row.problem.seq_len << " d=" << row.problem.head_dim << " causal=" << row.problem.causal);
    CHECK(row.algo == algo_named("flash3", Pass::backward));
    CHECK(std::abs(row.dram_read_error()) <= 0.10);
  }
}

TEST_CASE("a record with part of the L2 set aside is predicted on the L2 that is left", "[flash3][validate][l2]") {
  // The driver sets aside whole ways of the H100's L2 (16 of 3.125 MiB; 8 MiB asked gives 9.375 MiB):
  // the engine keeps 13 ways and 13/16 of the L2 in each partition.
  const GpuSpec h100 = load_gpu("h100-sxm");
  const GpuSpec less = gpu_with_l2_set_aside(h100, 9830400, "test");
  CHECK(less.l2_ways == h100.l2_ways - 3);
  CHECK(less.l2_effective_bytes == h100.l2_effective_bytes / 16 * 13);
  CHECK(less.l2_partitions == h100.l2_partitions);
  CHECK_THROWS_AS(gpu_with_l2_set_aside(h100, 8 << 20, "test"), InputError);  // not whole ways
  CHECK_THROWS_AS(gpu_with_l2_set_aside(h100, h100.l2_bytes, "test"), InputError);  // nothing left
  CHECK_THROWS_AS(gpu_with_l2_set_aside(h100, -3276800, "test"), InputError);

  const std::string dir = std::string(HBMLAB_SOURCE_DIR) + "/assets/measurements/";
  if (!std::filesystem::exists(dir + "h100-cudnn-l2-setaside.json")) return;
  // cuDNN's forward at d = 128, N = 32K, H = 4, not causal, with 0 to 31.25 MiB of the L2 set aside
  // (gpu/bench/cudnn_l2_setaside.sh): its DRAM reads grow from 162 to 218 MB as the L2 shrinks, and the
  // engine's follow them within 10 % on every set-aside, growing as they do.
  ValidationReport r = read_measurements({dir + "h100-cudnn-l2-setaside.json"}, std::nullopt);
  std::erase_if(r.rows, [](const ValidationRow& row) {
    return row.source != "sdpa cudnn" || row.problem.seq_len != 32768 || row.problem.heads != 4 || row.problem.causal;
  });
  std::ranges::sort(r.rows, {}, [](const ValidationRow& row) { return row.l2_set_aside_bytes; });
  REQUIRE(r.rows.size() == 6);
  CHECK(r.rows.back().l2_set_aside_bytes == 32768000);
  predict_measurements(r);
  for (std::size_t k = 0; k < r.rows.size(); ++k) {
    const ValidationRow& row = r.rows[k];
    INFO("set aside " << row.l2_set_aside_bytes << " bytes");
    CHECK(std::abs(row.dram_read_error()) <= 0.10);
    if (k > 0 && row.l2_set_aside_bytes > r.rows[k - 1].l2_set_aside_bytes)
      CHECK(row.predicted_dram_read > r.rows[k - 1].predicted_dram_read);
  }
  // The records with part of the L2 set aside summarise apart from those on the whole L2.
  const std::vector<RoomSummary> rooms = summarise_by_room(r);
  REQUIRE(rooms.size() == 2);
  CHECK(rooms[0].l2_set_aside == false);
  CHECK(rooms[0].time.count == 2);  // the whole L2, measured first and last
  CHECK(rooms[1].l2_set_aside == true);
  CHECK(rooms[1].time.count == 4);  // 9.375, 18.75, 25 and 31.25 MiB set aside
  CHECK(rooms[1].label() == "h100-sxm flash3, PyTorch SDPA, L2 partly set aside");
}

TEST_CASE("flash3 narrates its steps in FlashAttention-3's words", "[flash3][narration]") {
  const Algo f3 = algo_named("flash3");
  const std::vector<Step> steps = record_steps(f3, AttentionProblem{1, 1, 256, 64, Dtype::fp16, false}, {128, 128});
  bool wgmma = false, tma_store = false;
  for (const Step& s : steps) {
    const std::string text = f3->narrate(s);
    wgmma = wgmma || text.find("S_1,2 = Q_1 K_2ᵀ (wgmma") != std::string::npos;
    tma_store = tma_store || text.find("TMA store") != std::string::npos;
  }
  CHECK(wgmma);
  CHECK(tma_store);
}

TEST_CASE("simulate --json: flash3's blocks add the ring's stages and the consumer warpgroups", "[flash3][cli]") {
  SimulateRequest r;
  r.gpu = load_gpu("h100-sxm");
  r.problem = AttentionProblem{1, 16, 2048, 128, Dtype::fp16, true};
  r.algo = algo_named("flash3");
  r.block_rows = 128;
  r.block_cols = 128;
  r.counts_only = true;
  const Json j = simulation_json(simulate(r));
  CHECK(j["blocks"]["stages"] == 2);
  CHECK(j["blocks"]["consumer_warpgroups"] == 2);
  r.algo = algo_named("flash2");
  CHECK_FALSE(simulation_json(simulate(r))["blocks"].contains("stages"));
}
