// On-chip counts: shared memory ↔ registers and warp instructions follow from the kernel's warp
// layout (sim/algo/warp_layout.hpp); the measured fields of a record come through the reader.
// Run: ./build/tests/hbmlab_tests_core "[on_chip]"
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "sim/algo/warp_layout.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/engine/timing.hpp"
#include "sim/measure/validate.hpp"
#include "sim/report/on_chip_json.hpp"
#include "sim/report/report.hpp"
#include "sim/scenario/scenario.hpp"

using namespace hbmlab;

namespace {

// flash2 forward's one kernel as the engine plans it.
KernelPlan flash2_plan(std::int64_t N, std::int64_t d, std::int64_t Br, std::int64_t Bc, bool hbmlab_kernels,
                       bool causal = false, std::int64_t heads = 1) {
  AttentionProblem p(1, heads, N, d);
  p.causal = causal;
  EngineOptions options;
  options.launch.hbmlab_kernels = hbmlab_kernels;
  const std::vector<KernelPlan> plans = plan_kernels(algo_named("flash2"), p, {Br, Bc}, load_gpu("h100-sxm"), options);
  REQUIRE(plans.size() == 1);
  return plans[0];
}

}  // namespace

TEST_CASE("on-chip: a warp GEMM reads A once per warp column and B once per warp row", "[on_chip]") {
  // 64×128 += (64×32)·(32×128) on 2×4 warps: A 4 times, B twice; 4·8·2 MMAs.
  const OnChipCounts c = warp_gemm({.a = Tensor::Q, .b = Tensor::K, .M = 64, .N = 128, .K = 32, .Wm = 2, .Wn = 4}, 2);
  CHECK(c[Tensor::Q].read == 4 * 64 * 32 * 2);
  CHECK(c[Tensor::K].read == 2 * 128 * 32 * 2);
  CHECK(c.ldmatrix == (4 * 64 * 32 * 2 + 2 * 128 * 32 * 2) / 512);
  CHECK(c.mma == 4 * 16 * 2);
  // An operand already in registers costs no shared-memory read.
  const OnChipCounts r =
      warp_gemm({.a = Tensor::P, .b = Tensor::V, .M = 64, .N = 64, .K = 64, .Wm = 4, .Wn = 1, .a_in_registers = true}, 2);
  CHECK(r[Tensor::P].read == 0);
  CHECK(r[Tensor::V].read == 4 * 64 * 64 * 2);
}

TEST_CASE("on-chip: flash2 forward d = 128 follows FA2's warp layout", "[on_chip]") {
  // 4 warps × 32 rows of Q_i; per (i, j) every warp ldmatrix-loads its 32×128 of Q_i (16 x4 loads)
  // and all of K_j and V_j (64×128 each: 32 + 32), so 4·80 = 320 per pair; ncu counted exactly
  // 56,550,400 = 320 · 47 · 94 · 40 on the H100 (assets/measurements/h100-onchip.json).
  const std::int64_t N = 6000, d = 128, Br = 128, Bc = 64, Tr = 47, Tc = 94;
  const KernelPlan plan = flash2_plan(N, d, Br, Bc, true);
  const OnChipCounts& c = plan.on_chip;
  REQUIRE(c.modelled);
  const std::int64_t pairs = Tr * Tc;
  CHECK(c.ldmatrix == 320 * pairs);
  CHECK(c.mma == Br * Bc * d / 1024 * pairs);  // two m16n8k16 GEMMs of Br·Bc·d
  CHECK(c[Tensor::Q].read == Br * d * 2 * pairs);
  CHECK(c[Tensor::K].read == 4 * Bc * d * 2 * pairs);
  CHECK(c[Tensor::V].read == 4 * Bc * d * 2 * pairs);
  CHECK(c.total().read == c.ldmatrix * 512);
  CHECK(c[Tensor::Q].fill == Tr * Br * d * 2);
  CHECK(c[Tensor::K].fill == pairs * Bc * d * 2);
  CHECK(c.ex2 == pairs * (Br * Bc / 32 + Br / 8));
  CHECK(c.total().write == 0);  // gpu/flash2.cu writes O from registers
  // With the ncu figure of assets/measurements/h100-onchip.json, times 40 heads.
  CHECK(c.ldmatrix * 40 == 56'550'400);
  CHECK(c.mma * 40 == 180'961'280);
}

TEST_CASE("on-chip: shared-memory reads grow as N² and the per-pair count stays put", "[on_chip]") {
  const KernelPlan a = flash2_plan(2048, 64, 128, 128, true), b = flash2_plan(4096, 64, 128, 128, true);
  CHECK(b.on_chip.ldmatrix == 4 * a.on_chip.ldmatrix);
  CHECK(b.on_chip.mma == 4 * a.on_chip.mma);
  CHECK(b.on_chip[Tensor::Q].fill == 2 * a.on_chip[Tensor::Q].fill);  // Q_i once per CTA: linear in N
  // d = 64 at 128×128: per warp 8 (Q) + 32 (K) + 32 (V) ldmatrix.x4 per pair; ncu: 25,447,680 at N = 6000, H = 40.
  const KernelPlan c = flash2_plan(6000, 64, 128, 128, true, false, 40);
  CHECK(c.on_chip.ldmatrix == 25'447'680);
  CHECK(c.on_chip.mma == 90'480'640);
  // Causal: skipped pairs cost nothing; a kept diagonal pair costs a full one.
  const KernelPlan causal = flash2_plan(2048, 64, 128, 128, true, true);
  CHECK(causal.on_chip.ldmatrix == a.on_chip.ldmatrix / (16 * 16) * (16 * 17 / 2));
}

TEST_CASE("on-chip: PyTorch's FA2 stages O through shared memory", "[on_chip]") {
  const KernelPlan ours = flash2_plan(1024, 128, 128, 64, true), torch = flash2_plan(1024, 128, 128, 64, false);
  const std::int64_t ctas = 8, o_bytes = 128 * 128 * 2;
  CHECK(torch.on_chip[Tensor::O].write == ctas * o_bytes);
  CHECK(torch.on_chip[Tensor::O].read == ctas * o_bytes);
  CHECK(torch.on_chip.ld_shared == ctas * o_bytes / 512);  // 16 bytes a thread: ncu counted 64 per CTA
  CHECK(torch.on_chip.ldmatrix == ours.on_chip.ldmatrix);
}

TEST_CASE("on-chip: simulate --json reports the counts and the pipes", "[on_chip]") {
  SimulateRequest request;
  request.gpu = load_gpu("h100-sxm");
  request.algo = algo_named("flash2");
  request.problem = AttentionProblem(1, 2, 1024, 128);
  request.block_rows = 128;
  request.block_cols = 64;
  request.numerics = NumericsMode::off;
  const Json j = simulation_json(simulate(request));
  REQUIRE(j.contains("on_chip"));
  const Json& kernel = j["time"]["kernels"][0]["on_chip"];
  CHECK(kernel["instructions"]["ldmatrix"] == j["on_chip"]["instructions"]["ldmatrix"]);
  CHECK(j["on_chip"]["instructions"]["ldmatrix"].get<std::int64_t>() == 2 * 320 * 8 * 16);
  CHECK(j["on_chip"]["by_tensor"]["K"]["smem_read_bytes"].get<std::int64_t>() == 2 * 8 * 16 * 4 * 64 * 128 * 2);
  const double tensor = j["on_chip"]["pipes"]["tensor_busy"].get<double>();
  CHECK(tensor > 0);
  CHECK(tensor < 1);
  CHECK(j["on_chip"]["pipes"]["limiter"].is_string());
  // The A100 preset's published pipe rates give busy shares too, on the same counts.
  request.gpu = load_gpu("a100-80gb");
  const Json a100 = simulation_json(simulate(request));
  CHECK(a100["on_chip"]["pipes"]["tensor_busy"].get<double>() > 0);
  CHECK(a100["on_chip"]["instructions"]["mma"] == j["on_chip"]["instructions"]["mma"]);
}

TEST_CASE("on-chip: the measurement reader keeps the on-chip counters", "[on_chip][validate]") {
  auto record = [](const std::string& fields) {
    return fmt::format(R"({{"device": {{"name": "NVIDIA H100 80GB HBM3"}}, "records": [{{"kernel": "flash2",
      "problem": {{"batch": 1, "heads": 1, "seq_len": 256, "head_dim": 64}}, "blocks": {{"Br": 128, "Bc": 128}},
      "time_ms_median": 0.01{}}}]}})",
                       fields);
  };
  const std::string fields = R"(, "smem_ld_bytes": 1048576, "smem_st_bytes": 0, "smem_mma_bytes": 0,
      "mma_instructions": 2048, "ldmatrix_instructions": 576, "ex2_instructions": 2112, "tensor_pipe_busy": 0.5)";
  ValidationReport report = parse_measurements(record(fields), "onchip.json", std::nullopt);
  REQUIRE(report.rows.size() == 1);
  const MeasuredOnChip& m = report.rows[0].measured_on_chip;
  CHECK(m.smem_ld_bytes == 1048576);
  CHECK(m.mma_instructions == 2048);
  CHECK(m.ldmatrix_instructions == 576);
  CHECK(m.ex2_instructions == 2112);
  CHECK(m.tensor_pipe_busy == 0.5);
  predict_measurements(report);
  const Json j = validation_json(report);
  const Json& row = j["rows"][0];
  CHECK(row["measured"]["on_chip"]["smem_ld_bytes"] == 1048576.0);
  CHECK(row["measured"]["on_chip"]["tensor_pipe_busy"] == 0.5);
  // N = 256 at 128×128: 2 × 2 pairs; 4 warps × (8 + 32 + 32) ldmatrix.x4 and 256 MMAs per pair.
  CHECK(row["predicted"]["on_chip"]["ldmatrix_instructions"] == 4 * 288);
  CHECK(row["predicted"]["on_chip"]["mma_instructions"] == 4 * 256 * 4);
  // A record without them has no on_chip object; bad values name the field.
  ValidationReport plain = parse_measurements(record(""), "plain.json", std::nullopt);
  CHECK_FALSE(plain.rows[0].measured_on_chip.any());
  REQUIRE_THROWS_WITH(parse_measurements(record(R"(, "ldmatrix_instructions": -1)"), "neg.json", std::nullopt),
                      Catch::Contains("neg.json") && Catch::Contains("ldmatrix_instructions"));
  REQUIRE_THROWS_WITH(parse_measurements(record(R"(, "tensor_pipe_busy": 1.5)"), "busy.json", std::nullopt),
                      Catch::Contains("tensor_pipe_busy") && Catch::Contains("at most 1"));
}

namespace {

// The lanes' byte addresses of a toy access.
template <class F>
LaneAddresses toy(F address_of) {
  LaneAddresses at{};
  for (int lane = 0; lane < 32; ++lane) at[lane] = address_of(lane);
  return at;
}

}  // namespace

TEST_CASE("on-chip: a warp access takes its busiest bank's distinct words in wavefronts", "[on_chip]") {
  // 32-bit, the whole warp at once: 32 banks of 4 bytes, one word per bank per wavefront.
  CHECK(smem_wavefronts(toy([](int l) { return 4 * l; }), 4) == 1);        // 32 banks, one word each
  CHECK(smem_wavefronts(toy([](int l) { return 8 * l; }), 4) == 2);        // even banks, two words each
  CHECK(smem_wavefronts(toy([](int l) { return 32 * l; }), 4) == 8);       // banks 0, 8, 16, 24: 8 words each
  CHECK(smem_wavefronts(toy([](int l) { return 128 * l; }), 4) == 32);     // all in bank 0
  CHECK(smem_wavefronts(toy([](int) { return 64; }), 4) == 1);             // one word for all: a broadcast
  CHECK(smem_wavefronts(toy([](int l) { return l < 16 ? 0 : 128; }), 4) == 2);  // two words of bank 0
  CHECK(smem_wavefronts(toy([](int l) { return l == 5 ? 12 : -1; }), 4) == 1);  // one lane
  CHECK(smem_wavefronts(toy([](int) { return -1; }), 4) == 0);                  // none
  CHECK(smem_wavefronts(toy([](int l) { return 2 * l; }), 2) == 1);  // 16-bit: two lanes share a word
  // 64-bit: each half-warp on its own, so 2 at least.
  CHECK(smem_wavefronts(toy([](int l) { return 8 * l; }), 8) == 2);  // 32 consecutive pairs
  CHECK(smem_wavefronts(toy([](int) { return 0; }), 8) == 2);        // one pair for all
  CHECK(smem_wavefronts(toy([](int l) { return (l % 4) * 8; }), 8) == 2);  // four pairs (L_i, D_i in the backward)
  // Rows of 8 floats, lane/4 the row: rows 512 bytes apart share their 8 banks (4 rows a half-warp:
  // 4 each, the decode merge's O), rows 68 floats apart overlap by half (2 each, WMMA's staging).
  CHECK(smem_wavefronts(toy([](int l) { return ((l / 4) * 128 + (l % 4) * 2) * 4; }), 8) == 8);
  CHECK(smem_wavefronts(toy([](int l) { return ((l / 4) * 68 + (l % 4) * 2) * 4; }), 8) == 4);
  // 128-bit: per half-warp, and a half-warp that conflicts as its two quarter-warps.
  CHECK(smem_wavefronts(toy([](int l) { return 16 * l; }), 16) == 4);  // 32 consecutive chunks
  CHECK(smem_wavefronts(toy([](int) { return 32; }), 16) == 2);        // one chunk for all (flash1's Q_i row)
  CHECK(smem_wavefronts(toy([](int l) { return 32 * l; }), 16) == 8);  // chunks 32 bytes apart (standard's softmax)
  // 8 lanes a row of 8 chunks 32 bytes apart, rows 272 bytes apart: every quarter 2 (standard's read-back).
  CHECK(smem_wavefronts(toy([](int l) { return (l / 8) * 272 + (l % 8) * 32; }), 16) == 8);
  // 8 lanes a row of 8 consecutive chunks, rows 144 bytes apart (standard's Q_i, K_j copies): 1 a quarter.
  CHECK(smem_wavefronts(toy([](int l) { return (l / 8) * 144 + (l % 8) * 16; }), 16) == 4);
  // ldmatrix.x4 of an (8, d = 128) fp16 tile, rows 256 bytes apart: a matrix's 8 rows of one 16-byte
  // chunk all fall on the same 4 banks (8 wavefronts), unless the chunk is swizzled with the row (1).
  CHECK(ldmatrix_wavefronts(toy([](int l) { return (l % 8) * 256 + (l / 8) * 16; })) == 32);
  CHECK(ldmatrix_wavefronts(toy([](int l) { return (l % 8) * 256 + (((l / 8) ^ (l % 8)) * 16); })) == 4);
}

TEST_CASE("on-chip: the backward kernels' layouts give ncu's counts", "[on_chip]") {
  // B = 1, H = 40, N = 6000, d = 128 at 64×128 on the H100 (assets/measurements/h100-onchip.json,
  // h100-onchip-backward-ncu.csv): 94 · 47 · 40 = 176,720 block pairs.
  AttentionProblem p(1, 40, 6000, 128);
  const std::int64_t pairs = 94 * 47 * 40;
  auto main_kernel = [&](bool hbmlab_kernels) {
    EngineOptions options;
    options.launch.hbmlab_kernels = hbmlab_kernels;
    const std::vector<KernelPlan> plans = plan_kernels(algo_named("flash2", Pass::backward), p, {64, 128},
                                                       load_gpu("h100-sxm"), options);
    REQUIRE(plans.size() == 3);
    return plans;
  };
  // PyTorch's FA2: S, dP on 2×4 warps (256 + 256 ldmatrix.x4 a pair), dV, dK on 4×2 (192 + 192),
  // dQ on 2×4 (256): 1,152 a pair; P and dS stored (256 32-bit stores); dK, dV staged per CTA.
  const std::vector<KernelPlan> torch = main_kernel(false);
  CHECK(torch[1].on_chip.ldmatrix == 1152 * pairs);  // ncu: 203,581,440
  CHECK(torch[1].on_chip.ldmatrix == 203'581'440);
  CHECK(torch[1].on_chip.mma == 452'403'200);
  CHECK(torch[1].on_chip.ld_shared == 240'640);
  CHECK(torch[2].on_chip.st_shared == 481'280);  // the dQ conversion
  CHECK(torch[2].on_chip.ld_shared == 120'320);
  CHECK(torch[0].on_chip.modelled);  // the D kernel: registers only (below)
  // gpu/flash2_backward.cu: 8 warps × 16 keys; Q_i and dO_i read by every warp twice (320 + 320 with
  // K_j, V_j re-read at d = 128), 256 + 256 for dV, dK, 256 for dQ: 1,408 a pair.
  const std::vector<KernelPlan> ours = main_kernel(true);
  CHECK(ours[1].on_chip.ldmatrix == 1408 * pairs);  // ncu: 248,821,760
  CHECK(ours[1].on_chip.st_shared == 128 * pairs);  // dS_ijᵀ; ncu: 22,620,160
  // dS_ijᵀ's 32-bit stores hit 32 banks (the swizzle): 1 wavefront each, 128 × 128 bytes a pair
  // (CUPTI: 2,895,380,480 bytes). L_i and D_i: 8 warps × 8 n8 tiles of LDS.64 each, 2 wavefronts a
  // load: 16,384 bytes a pair each.
  CHECK(ours[1].on_chip[Tensor::dS].write == 128 * 128 * pairs);
  CHECK(ours[1].on_chip[Tensor::dS].write == 2'895'380'480);
  CHECK(ours[1].on_chip[Tensor::lse].read == 8 * 8 * 2 * 128 * pairs);
  CHECK(ours[1].on_chip[Tensor::D].read == 8 * 8 * 2 * 128 * pairs);
  CHECK(ours[1].on_chip.ld_shared == 128 * pairs);  // ncu: 22,620,160
  // Every load: 1,408 ldmatrix.x4 (512 bytes) and 128 LDS.64 (256 bytes) a pair, 133,187,502,080
  // bytes; CUPTI counted 134,209,094,144 (−0.8 %: conflicts ncu's SourceCounters do not see in one
  // launch, beside the cp.async fills).
  CHECK(ours[1].on_chip.total().read == (1408 * 512 + 128 * 256) * pairs);
  CHECK(ours[1].on_chip.total().read == 133'187'502'080);
  CHECK(ours[1].on_chip.ex2 == 45'240'320);
  CHECK(ours[1].on_chip.mma == torch[1].on_chip.mma);
}

TEST_CASE("on-chip: the wgmma forward layout gives cuDNN's counts", "[on_chip]") {
  // cuDNN's sm90 flash forward (ncu, assets/measurements/h100-onchip-ncu.csv): 128 query rows on two
  // consumer warpgroups, 128 keys a step, d = 128, N = 6000, H = 40: 47 · 47 · 40 block pairs.
  const std::int64_t pairs = 47 * 47 * 40;
  const OnChipCounts c = wgmma_forward_pair({.Bc = 128, .d = 128, .warpgroups = 2}).times(pairs);
  CHECK(4 * c.wgmma == 11'310'080);  // smsp__sass_inst_executed_op_shared_gmma counts warps
  CHECK(c.total().mma_read == pairs * 2 * (64 + 128 + 128) * 128 * 2);  // 14.48 GB; ncu 14.91 GB of wavefronts
  CHECK(c.total().read == 0);
  CHECK(c.ldmatrix == 0);
  CHECK(c.wgmma_flops == pairs * 4 * 128 * 128 * 128);
  // hbmlab's flash3 kernel of that layout adds its ring's mbarrier operations: per pair 4 for each of
  // the 8 consumer warps and 4 for the producer, per Q_i tile 2 and 2 (47 · 40 tiles). ncu's other
  // wavefronts (neither loads nor stores) less the wgmma operands' 113,100,800: 3,211,647.
  AttentionProblem p(1, 40, 6000, 128);
  EngineOptions options;
  options.launch.hbmlab_kernels = true;
  const std::vector<KernelPlan> plans = plan_kernels(algo_named("flash3"), p, {128, 128}, load_gpu("h100-sxm"), options);
  REQUIRE(plans.size() == 1);
  CHECK(plans[0].on_chip.mbarrier == pairs * (4 * 8 + 4) + 47 * 40 * (2 * 8 + 2));
  CHECK(plans[0].on_chip.mbarrier == 3'214'800);
}

// Lesson 7 quotes these figures of its problem; they must stay what the model says.
TEST_CASE("on-chip: lesson 7's figures (flash2 d = 128 on the H100)", "[on_chip][scenario]") {
  const Scenario lesson = load_scenario("lessons/07-past-hbm-shared-memory-and-tensor-cores");
  SimulateRequest r = request_for(lesson);
  r.algo = lesson.algorithms.front();
  r.numerics = NumericsMode::off;
  const SimulationResult res = simulate(r);
  REQUIRE(res.engine.kernels.size() == 1);
  const KernelTiming& k = res.engine.kernels[0];
  const SmemBytes t = k.on_chip.total();
  CHECK(t.read == Approx(29.0e9).epsilon(0.005));  // "29 GB from shared memory into registers"
  const double dram = double(k.dram_read_bytes + k.dram_write_bytes);
  CHECK(dram == Approx(246.3e6).epsilon(0.02));     // "246.3 MB read from and written to DRAM"
  CHECK(double(t.read) / dram == Approx(118).margin(3));  // "about 120 times"
  // Each pipe's share, as on_chip_json reports it: shared memory and tensor cores about 55 %, ex2 19 %,
  // their cycles at the 1.75 GHz the engine runs the kernel's pipes at (docs/design.md#the-sms-pipes).
  const PipeBusy pipes = pipe_busy(k, res.gpu);
  REQUIRE(pipes.tensor);
  REQUIRE(pipes.smem);
  REQUIRE(pipes.ex2);
  CHECK(k.sm_clock_mhz == 1750);
  CHECK(*pipes.tensor == Approx(0.55).margin(0.01));
  CHECK(*pipes.smem == Approx(0.55).margin(0.01));
  CHECK(*pipes.ex2 == Approx(0.19).margin(0.01));
  CHECK(pipes.limiter == "smem");
  const auto j = on_chip_json(k.on_chip, pipes, k.sm_clock_mhz);
  CHECK(j["pipes"]["smem_busy"].get<double>() == *pipes.smem);
  CHECK(j["pipes"]["limiter"] == pipes.limiter);
  CHECK(j["pipes"]["clock_mhz"] == 1750);
}

// A pass's shares sum its kernels' busy seconds, each at the clock the engine ran it at: standard's
// softmax_kernel holds the GPU's clock (1,980 MHz), its two GEMM kernels pipe_clock_mhz (1,750).
TEST_CASE("on-chip: a pass's pipe shares add its kernels' at their own clocks", "[on_chip]") {
  SimulateRequest r;
  r.gpu = load_gpu("h100-sxm");
  r.algo = algo_named("standard");
  r.problem = AttentionProblem(1, 16, 1024, 64);
  r.launch.hbmlab_kernels = true;
  r.numerics = NumericsMode::off;
  const SimulationResult res = simulate(r);
  const auto& kernels = res.engine.kernels;
  REQUIRE(kernels.size() == 3);
  CHECK(kernels[0].sm_clock_mhz == 1750);  // qk_kernel
  CHECK(kernels[1].sm_clock_mhz == 1980);  // softmax_kernel
  CHECK(kernels[2].sm_clock_mhz == 1750);  // pv_kernel
  double total_s = 0, tensor_s = 0, ex2_s = 0;
  for (const KernelTiming& k : kernels) {
    const PipeBusy p = pipe_busy(k, res.gpu);
    REQUIRE(p.tensor);
    REQUIRE(p.ex2);
    total_s += k.time_s, tensor_s += *p.tensor * k.time_s, ex2_s += *p.ex2 * k.time_s;
  }
  const PipeBusy pass = pipe_busy(kernels, total_s, res.gpu);
  REQUIRE(pass.tensor);
  CHECK(*pass.tensor == Approx(tensor_s / total_s));
  CHECK(*pass.ex2 == Approx(ex2_s / total_s));
  CHECK(*pass.ex2 > 0);  // the softmax's exps, at its own clock
  // The JSON says each kernel's clock, and none for the pass, whose kernels ran at two.
  const Json j = simulation_json(res);
  CHECK(j["time"]["kernels"][1]["on_chip"]["pipes"]["clock_mhz"] == 1980);
  CHECK(j["on_chip"]["pipes"]["clock_mhz"].is_null());
  CHECK(j["on_chip"]["pipes"]["tensor_busy"].get<double>() == Approx(*pass.tensor));
}

// Lesson 8 says flash3 moves flash2's bytes and that the engine predicts it at about 1.88 ms here.
TEST_CASE("on-chip: lesson 8's flash2 and flash3 move the same HBM bytes", "[on_chip][scenario]") {
  const Scenario lesson = load_scenario("lessons/08-hopper-the-same-bytes-in-half-the-time");
  REQUIRE(lesson.algorithms.size() == 2);
  SimulateRequest r = request_for(lesson);
  r.numerics = NumericsMode::off;
  r.algo = lesson.algorithms[0];
  const SimulationResult f2 = simulate(r);
  r.algo = lesson.algorithms[1];
  const SimulationResult f3 = simulate(r);
  CHECK(f2.algo->name() == "flash2");
  CHECK(f3.algo->name() == "flash3");
  CHECK(f2.total.hbm_bytes() == f3.total.hbm_bytes());
  CHECK(double(f2.total.hbm_bytes()) == Approx(8.73e9).epsilon(0.01));  // 8.66 GB read + 68 MB written
  CHECK(f3.time.predicted_s == Approx(1.88e-3).epsilon(0.02));
  CHECK(f2.time.predicted_s == Approx(2.99e-3).epsilon(0.02));
  const std::optional<Pipeline> pipe = f3.algo->pipeline(f3.problem, f3.blocks.blocks);
  REQUIRE(pipe);
  CHECK(pipe->stages == 2);
  CHECK(pipe->consumer_warpgroups == 2);
}

// hbmlab's flash3 kernel and cuDNN's Hopper forward under ncu (gpu/bench/flash3_onchip.sh): the
// wgmma layout's counts stand beside the counters, in --json (wgmma as ncu counts it, 4 warp
// instructions each) and in validate's text ("On chip" table and its shared-memory summary).
TEST_CASE("on-chip: validate sets the wgmma records' counters beside the layout's", "[on_chip][validate]") {
  for (const char* name : {"h100-flash3-onchip.json", "h100-cudnn-onchip.json"}) {
    const std::string file = std::string(HBMLAB_SOURCE_DIR) + "/assets/measurements/" + name;
    if (!std::filesystem::exists(file)) continue;
    INFO(name);
    ValidationReport report = validate_measurements({file}, std::nullopt);
    REQUIRE(report.rows.size() == 4);
    const Json j = validation_json(report);
    for (const Json& row : j["rows"]) {
      CHECK(row["algorithm"] == "flash3");
      const double measured = row["measured"]["on_chip"]["mma_instructions"].get<double>();
      const double predicted = row["predicted"]["on_chip"]["mma_instructions"].get<double>();
      // cuDNN runs 64-row warpgroups on 128 rows; hbmlab's d = 64 kernel 192 rows on three: both exact.
      CHECK(predicted == Approx(measured).epsilon(0.025));
      const double smem = row["measured"]["on_chip"]["smem_mma_bytes"].get<double>();
      // wgmma's operand reads and the ring's mbarrier operations: within 1 % (the polls of a wait are
      // not all counted; cuDNN's ring is taken to be as hbmlab's).
      CHECK(row["predicted"]["on_chip"]["smem_mma_bytes"].get<double>() == Approx(smem).epsilon(0.01));
    }
    std::ostringstream out;
    print_validation(out, report);
    CHECK(out.str().find("On chip, for the records that carry the SM's counters (ncu or CUPTI)") != std::string::npos);
    CHECK(out.str().find("shared-memory bytes: mean |error|") != std::string::npos);
  }
}

namespace {

// A room's kernels as the engine plans gpu/'s kernels for them.
std::vector<KernelPlan> hbmlab_plans(const char* algo, AttentionProblem p, std::int64_t Br, std::int64_t Bc,
                                     bool hbmlab_kernels = true) {
  EngineOptions options;
  options.launch.hbmlab_kernels = hbmlab_kernels;
  return plan_kernels(algo_named(algo), p, {Br, Bc}, load_gpu("h100-sxm"), options);
}

}  // namespace

TEST_CASE("on-chip: standard's three kernels follow gpu/standard.cu", "[on_chip]") {
  // N = 1024, d = 64, 64 × 64 tiles, 2 heads: 16 × 16 tiles of S per head.
  const std::int64_t N = 1024, d = 64, B = 64, heads = 2, tiles = (N / B) * (N / B) * heads;
  const std::vector<KernelPlan> plans = hbmlab_plans("standard", AttentionProblem(1, heads, N, d), B, B);
  REQUIRE(plans.size() == 3);
  const OnChipCounts &qk = plans[0].on_chip, &sm = plans[1].on_chip, &pv = plans[2].on_chip;
  REQUIRE((qk.modelled && sm.modelled && pv.modelled));
  // qk: 2 × 2 warps of 32 × 32; per k16 step each warp loads 2 fragments of Q_i and 2 of K_j
  // (ldmatrix.x4 each): 4 warps · 4 · (64 / 16) = 64 per tile; 4·8·4 m16n8k16 per tile.
  CHECK(qk.ldmatrix == 64 * tiles);
  CHECK(qk.mma == (B / 16) * (B / 8) * (d / 16) * tiles);
  CHECK(qk[Tensor::Q].read == 2 * B * d * 2 * tiles);
  // Q_i, K_j stored from registers, 16 bytes a lane (16 stores each, 4 wavefronts: rows 144 bytes apart,
  // a quarter-warp a wavefront).
  CHECK(qk[Tensor::Q].write == 16 * 4 * 128 * tiles);
  // The fp32 accumulator staged: 64 8-byte stores of 4 wavefronts (ncu: 4.000) ...
  CHECK(qk[Tensor::S].write == 64 * 4 * 128 * tiles);
  // ... and read back eight elements at a time as two 16-byte loads, 32 of them of 8 wavefronts (8.000).
  CHECK(qk[Tensor::S].read == 32 * 8 * 128 * tiles);
  CHECK(qk.st_shared == (B * d / 8 / 32 * 2 + B * B * 4 / 256) * tiles);
  CHECK(qk.ld_shared == B * B / 128 * tiles);
  // Its latency path, a hand count of qk_kernel: one GEMM a tile (d/16 = 4 k-steps) whose product S_ij
  // is stored at once (a drain), and 3 __syncthreads (after Q_i, K_j's stores, the MMAs, the staging).
  CHECK(qk.gemm_starts == tiles);
  CHECK(qk.gemm_drains == tiles);
  CHECK(qk.mma_ksteps == 4 * tiles);
  CHECK(qk.barriers == 3 * tiles);
  // softmax: one CTA of 128 threads per row; the row stored element by element, read twice.
  const std::int64_t rows = N * heads;
  CHECK(sm.ex2 == N / 32 * rows);
  // The row stored element by element, lanes 32 bytes apart (8 wavefronts), and lane 0 of each of 4
  // warps twice (1): ncu's 4.111 a store over the kernel's 72 stores a row.
  CHECK(sm[Tensor::S].write == (8 * (N / 8 / 32) * 8 + 2 * 4) * 128 * rows);
  CHECK(sm[Tensor::P].read == 2 * (N / 8 / 32) * 8 * 128 * rows);  // 16-byte loads 32 bytes apart: 8
  CHECK(sm.st_shared == (8 * (N / 8 / 32) + 2 * 4 + N / 32) * rows);
  CHECK(sm.ld_shared == (2 * 4 + N / 32 + 2 * (N / 8 / 32)) * rows);
  CHECK(sm.total().write + sm.total().read == (296 + 104) * 128 * rows);
  // Two block reductions (max, then sum) of two __syncthreads each; no GEMM.
  CHECK(sm.barriers == 4 * rows);
  CHECK(sm.gemm_starts + sm.gemm_drains + sm.mma_ksteps == 0);
  // Its chain: each reduction five butterfly steps in a warp, then five over the warps' partials;
  // then the sum's reciprocal.
  CHECK(sm.shuffle_steps == 20 * rows);
  CHECK(sm.shfl == 20 * 4 * rows);  // every warp shuffles through both reductions
  CHECK(sm.serial_divides == rows);
  // Their CTAs are alike and start together: they run in step. qk_kernel's copy loops keep four
  // 16-byte loads a thread in flight (8 KiB a CTA); pv_kernel double-buffers and runs as streams.
  CHECK((plans[0].ctas_in_step && plans[1].ctas_in_step && !plans[2].ctas_in_step));
  CHECK(plans[0].bytes_in_flight_per_cta == 128 * 4 * 16);
  CHECK((plans[1].holds_gpu_clock && !plans[0].holds_gpu_clock && !plans[2].holds_gpu_clock));
  // qk_kernel and softmax_kernel load into registers and store from them; pv_kernel fills by cp.async.
  CHECK((plans[0].global_via_registers && plans[1].global_via_registers && !plans[2].global_via_registers));
  // pv: Br = 64 on 4 × 1 warps of 16 rows: each warp reads its P_ij rows and all of V_j.
  const std::int64_t Tc = N / B, ctas = N / B * heads;
  CHECK(pv[Tensor::P].read == B * B * 2 * Tc * ctas);
  CHECK(pv[Tensor::V].read == 4 * B * d * 2 * Tc * ctas);
  CHECK(pv[Tensor::P].fill == B * B * 2 * Tc * ctas);
  CHECK(pv.ldmatrix == (B * B * 2 + 4 * B * d * 2) / 512 * Tc * ctas);
  CHECK(pv.mma == (B / 16) * (d / 8) * (B / 16) * Tc * ctas);
  CHECK(pv[Tensor::O].write == B * d * 4 / 256 * 4 * 128 * ctas);  // 16 8-byte stores of 4 wavefronts
  // Per P_ij, V_j a GEMM of Bc/16 = 4 k-steps between two barriers (after cp.async's wait, after the
  // MMAs); per CTA O_i's accumulator drains once into its staging, between two more.
  CHECK(pv.gemm_starts == Tc * ctas);
  CHECK(pv.mma_ksteps == 4 * Tc * ctas);
  CHECK(pv.gemm_drains == ctas);
  CHECK(pv.barriers == (2 * Tc + 2) * ctas);
  // A ragged last row and column of tiles: S's staging reads back only the real N × N scores.
  const std::vector<KernelPlan> ragged = hbmlab_plans("standard", AttentionProblem(1, heads, 1000, d), B, B);
  // 1000 = 15 · 64 + 40. A tile's read-back is 16 warp steps of 4 rows, two 16-byte loads each (32);
  // the last row of tiles reads back 40 rows, 10 steps (20); the last column 40 of 64 columns, 5 of
  // every 8 lanes, still all 16 steps (32).
  const std::int64_t full = 15 * 15, edge = 15;
  const std::int64_t steps = (full + edge) * 32 + (edge + 1) * 20;  // 16-byte loads issued, per head
  CHECK(ragged[0].on_chip.ld_shared == steps * heads);
  CHECK(ragged[0].on_chip[Tensor::S].write == 64 * 4 * 128 * tiles);  // whole tiles stored
  // A library's launch (the default) is not gpu/standard.cu: no layout described.
  CHECK_FALSE(hbmlab_plans("standard", AttentionProblem(1, heads, N, d), B, B, false)[0].on_chip.modelled);
}

TEST_CASE("on-chip: flash1's CTA reads every FMA operand from shared memory", "[on_chip]") {
  // N = 128, d = 64, 64 × 64 blocks: 2 × 2 pairs, one CTA (one head), 8 warps.
  const std::int64_t N = 128, d = 64, B = 64, pairs = 4, Tc = 2;
  const std::vector<KernelPlan> plans = hbmlab_plans("flash1", AttentionProblem(1, 1, N, d), B, B);
  const OnChipCounts& c = plans[0].on_chip;
  REQUIRE(c.modelled);
  CHECK(c.mma == 0);
  CHECK(c.ldmatrix == 0);
  // line 9: 64·64 scores a pair, 128 warp steps, each d/4 16-byte loads of Q_i (one chunk for the
  // whole warp: 2 wavefronts) and d loads of K_j (32 keys in 32 banks: 1).
  const std::int64_t score_steps = B * B / 32;
  CHECK(c[Tensor::Q].read == pairs * score_steps * (d / 4) * 2 * 128);
  CHECK(c[Tensor::K].read == pairs * score_steps * d * 128);
  // line 12: 64·64 elements of O_i a pair, 128 warp steps, each 16 loads of P̃ (16 bytes, broadcast:
  // 2 wavefronts) and 64 of V_j (1).
  CHECK(c[Tensor::V].read == pairs * (B * d / 32) * B * 128);
  CHECK(c[Tensor::P].read == pairs * (B * d / 32) * (B / 4) * 2 * 128);
  const std::int64_t o_steps = B * d / 32;
  const std::int64_t per_pair_loads = score_steps * (d / 4 + d) + B * (2 * B / 32 + 2) + o_steps * (B / 4 + B + 3) + 2 * 2;
  CHECK(c.ld_shared == pairs * per_pair_loads);
  const std::int64_t per_pair_stores = 2 * B * d / 32 + 2 * 2 + score_steps + B * (B / 32 + 4);
  CHECK(c.st_shared == pairs * per_pair_stores + Tc * 2 * B * d / 32);
  CHECK(c.ex2 == pairs * B * (B / 32 + 2));
  // __syncthreads: 1 after the initialisation, 1 per K/V block, 4 per pair (19); no MMA latency path.
  CHECK(c.barriers == 1 + Tc + 4 * pairs);
  CHECK(c.gemm_starts + c.gemm_drains + c.mma_ksteps == 0);
  // Causal: the pair (1, 2) is skipped, and the diagonal pairs' masked lanes load nothing.
  AttentionProblem causal(1, 1, N, d);
  causal.causal = true;
  const OnChipCounts cc = hbmlab_plans("flash1", causal, B, B)[0].on_chip;
  // A diagonal pair's row r sees r + 1 keys: the warp step of keys 0–31 loads for every row, that of
  // keys 32–63 for rows 32–63 only (96 of 128 steps); a load of a few lanes still takes a wavefront.
  CHECK(cc[Tensor::K].read == (score_steps + 2 * (B + B / 2)) * d * 128);
  CHECK(cc.barriers == 1 + Tc + 4 * 3);  // the skipped pair has none
}

TEST_CASE("on-chip: flash1's latency path, counted by hand (N = 64, d = 16, 32 × 32 blocks)", "[on_chip]") {
  // 2 × 2 pairs, one CTA of 256 threads (8 warps). A pair: 32·32 scores, 4 a thread, each 16 FMAs
  // into one accumulator waiting on 4 chunks of Q_i's row: 64 FMAs, 16 loads. 32·16 elements of O_i,
  // 2 a thread, each 32 FMAs waiting on 8 chunks of P̃_ij's row: 64 FMAs, 16 loads. 32 rows, 4 a warp,
  // each 10 shuffle steps; a lane's one score loaded twice and m_i once (3 loads); the max, the last
  // add, max(m_i, m̃), ·ℓ_i, ℓ_new (5 FP32 operations); 3 expf and 2 divisions.
  const std::int64_t pairs = 4;
  const OnChipCounts c = hbmlab_plans("flash1", AttentionProblem(1, 1, 64, 16), 32, 32)[0].on_chip;
  CHECK(c.fma_chain == pairs * (64 + 64));
  CHECK(c.fma_chain_loads == pairs * (16 + 16));
  CHECK(c.shuffle_steps == pairs * 4 * 10);
  CHECK(c.serial_loads == pairs * 4 * 3);
  CHECK(c.serial_fp32 == pairs * 4 * 5);
  CHECK(c.serial_exps == pairs * 4 * 3);
  CHECK(c.serial_divides == pairs * 4 * 2);
  CHECK(c.gemm_starts + c.gemm_drains + c.mma_ksteps == 0);
  // Causal: pair (0, 1) is skipped; on the diagonal, thread 0 (key 0 of rows 0, 8, 16, 24) still
  // computes all 4 of its scores, so the slowest warp's path is a full pair's.
  AttentionProblem causal(1, 1, 64, 16);
  causal.causal = true;
  const OnChipCounts cc = hbmlab_plans("flash1", causal, 32, 32)[0].on_chip;
  CHECK(cc.fma_chain == 3 * (64 + 64));
  CHECK(cc.shuffle_steps == 3 * 4 * 10);
  // d = 64, 64 × 64 blocks: 16 scores a thread of 64 FMAs (16 loads each), 16 elements of 64 (16);
  // 8 rows a warp, a lane's two scores: 5 loads, 6 FP32 operations, 4 expf a row.
  const OnChipCounts big = hbmlab_plans("flash1", AttentionProblem(1, 1, 64, 64), 64, 64)[0].on_chip;
  CHECK(big.fma_chain == 16 * 64 + 16 * 64);
  CHECK(big.fma_chain_loads == 16 * 16 + 16 * 16);
  CHECK(big.serial_loads == 8 * 5);
  CHECK(big.serial_fp32 == 8 * 6);
  CHECK(big.serial_exps == 8 * 4);
}

TEST_CASE("on-chip: the reference flash1's split-K warps, counted by hand (N = 48, d = 16, 32 × 48 blocks)", "[on_chip]") {
  // One K/V block of 48 keys (3 tiles of 16: warps 0–2 take one each, warp 3 none), two row blocks of
  // 32 and 16 rows; 4 warps (the launch's 128 threads).
  const std::vector<KernelPlan> plans = hbmlab_plans("flash1", AttentionProblem(1, 1, 48, 16), 32, 48, false);
  REQUIRE(plans.size() == 1);
  const OnChipCounts& c = plans[0].on_chip;
  REQUIRE(c.modelled);
  // Pair 1 (32 rows): each of 3 warps loads Q_i (1,024 bytes: 2 ldmatrix), its 16 keys of K_j and of
  // V_j (512 bytes: 1 each); S 2·2·1 and P̃V 2·2·1 MMAs. Pair 2 (16 rows): Q_i 512 bytes (1), 1·2·1 and
  // 1·2·1 MMAs.
  CHECK(c[Tensor::Q].read == 3 * 1024 + 3 * 512);
  CHECK(c[Tensor::K].read == 2 * 3 * 512);
  CHECK(c[Tensor::V].read == 2 * 3 * 512);
  CHECK(c[Tensor::P].read == 0);
  CHECK(c.ldmatrix == 3 * 4 + 3 * 3);
  CHECK(c.mma == 3 * 8 + 3 * 4);
  CHECK(c.mma_flops() == 4 * (32 + 16) * 48 * 16);  // no padding here: the FLOPs exactly
  CHECK(c[Tensor::Q].fill == (32 + 16) * 16 * 2);
  CHECK(c[Tensor::K].fill == 48 * 16 * 2);  // once: the block's first pair
  // ex2: the scores (32·16/32 = 16 and 8 a warp), 2 per warp step of rows (the two factors).
  CHECK(c.ex2 == 3 * 16 + 2 + 3 * 8 + 2);
  // The exchanges, all 4 warps: 2 row halves per 16-row group stored, every warp reading all 4
  // partials; for m and ℓ each. Pair 1: 4·4 stores, 4·4·4 loads; pair 2: 4·2, 4·4·2.
  CHECK(c[Tensor::m].write == (16 + 8) * 128);
  CHECK(c[Tensor::m].read == (64 + 32) * 128 + 2 * 4 * 128);  // and the row threads' 4 maxima
  // Partial P̃V: per warp 2 n8 tiles × row halves, 1 wavefront a half-warp (rows 24 floats apart put a
  // half-warp's 4 rows on banks 0–7, 24–31, 16–23, 8–15). Pair 1: 4·4·2 stores, pair 2: 4·2·2.
  CHECK(c[Tensor::O].write == (32 + 16) * 2 * 128);
  // A thread per element sums the 4 partials: 512 and 256 elements, 16 and 8 warp steps, each two rows
  // of 16 floats 24 apart (banks 0–15 and 24–31, 0–7): 2 wavefronts.
  CHECK(c[Tensor::O].read == 4 * (16 + 8) * 2 * 128);
  // Loads: stats 128 + 64, row threads 8 + 8, partials 64 + 32, factors 32 + 16.
  CHECK(c.ld_shared == (128 + 8 + 64 + 32) + (64 + 8 + 32 + 16));
  // Stores: stats 32 + 16, partials 32 + 16, factors 2 + 2.
  CHECK(c.st_shared == (32 + 32 + 2) + (16 + 16 + 2));
  CHECK(c.barriers == 2 * 4);
  CHECK(c.gemm_starts == 2 * 2);
  CHECK(c.gemm_drains == 2 * 2);
  CHECK(c.mma_ksteps == 2 * (1 + 1));
  CHECK(c.fma_chain == 0);
  // The paper's A100 blocks for d = 64 (Br = 64, Bc = 328): K_j's tiles 21, 21, 21 and 3 (40 keys, padded
  // to 48); the slowest warp's P̃V runs ⌈21/4⌉ = 6 k-steps. mma 4·(keys/8)·4 a GEMM.
  const OnChipCounts gpt = hbmlab_plans("flash1", AttentionProblem(1, 1, 1024, 64), 64, 328, false)[0].on_chip;
  const std::int64_t padded_keys = 3 * 336 + 48, Tr = 16;
  CHECK(gpt.mma == Tr * 2 * 4 * (padded_keys / 8) * 4);
  CHECK(gpt.mma_ksteps == Tr * (3 * (4 + 6) + (4 + 1)));
  CHECK(gpt.barriers == Tr * 4 * 4);
  // fp32 has no m16n8k16: FLOPs alone, as before.
  const AttentionProblem fp32(1, 1, 1024, 64, Dtype::fp32);
  CHECK_FALSE(hbmlab_plans("flash1", fp32, 64, 328, false)[0].on_chip.modelled);
}

TEST_CASE("on-chip: the backward's D and dQ-conversion kernels use registers only", "[on_chip]") {
  // ncu: 0 shared-memory wavefronts and 0 ldmatrix in dot_do_o_kernel, convert_dq_kernel and
  // PyTorch's flash_bwd_dot_do_o_kernel (assets/measurements/h100-onchip-backward-ncu.csv).
  const AttentionProblem p(1, 40, 6000, 128);
  for (bool ours : {true, false}) {
    EngineOptions options;
    options.launch.hbmlab_kernels = ours;
    const std::vector<KernelPlan> plans = plan_kernels(algo_named("flash2", Pass::backward), p, {64, 128}, load_gpu("h100-sxm"), options);
    REQUIRE(plans.size() == 3);
    CHECK(plans[0].on_chip.modelled);
    CHECK(plans[0].on_chip.total().read + plans[0].on_chip.total().write == 0);
    CHECK(plans[0].on_chip.ldmatrix + plans[0].on_chip.mma + plans[0].on_chip.ex2 == 0);
    CHECK(plans[0].on_chip.barriers == 0);  // a warp's shuffles, never a __syncthreads
    CHECK(plans[2].on_chip.modelled);
    // PyTorch's conversion stages dQ_i: ncu counted 120,320 loads and 481,280 stores (94 × 40 CTAs).
    CHECK(plans[2].on_chip.ld_shared == (ours ? 0 : 120'320));
    CHECK(plans[2].on_chip.st_shared == (ours ? 0 : 481'280));
  }
}

TEST_CASE("on-chip: gpu/flash_decoding.cu's split and combine kernels", "[on_chip]") {
  // B = 1, H = 32, HKV = 8 (g = 4), NQ = 1, N = 8192, d = 128, 16 splits, 64-key blocks: 8
  // instances of 4 packed rows (one m16 group), 128 blocks each; 16 · 8 CTAs.
  AttentionProblem p(1, 32, 8192, 128);
  p.query_len = 1;
  p.kv_heads = 8;
  p.kv_splits = 16;
  const std::int64_t pairs = 128 * 8, ctas = 16 * 8, real_rows = 16 * 4 * 8, d = 128;
  const std::vector<KernelPlan> fd = hbmlab_plans("flash-decoding", p, 16, 64);
  REQUIRE(fd.size() == 2);
  const OnChipCounts& split = fd[0].on_chip;
  REQUIRE(split.modelled);
  // Per block: every warp ldmatrix-loads all of Q_i (16 × 128: 8 per warp) and its 16 keys of K_j
  // (8), and its 16 keys of V_j (8): 96; S and P̃V 64 m16n8k16 each.
  CHECK(split.ldmatrix == 96 * pairs);
  CHECK(split.mma == 128 * pairs);
  CHECK(split[Tensor::Q].read == 4 * 16 * d * 2 * pairs);
  CHECK(split[Tensor::K].read == 64 * d * 2 * pairs);
  // The merge: 152 stores per CTA — 128 of O (8 bytes a lane, rows 512 bytes apart: 8 wavefronts)
  // and 24 of m, ℓ, the row max (1) —; 3 loads per warp per 32 elements of the real rows (1 each).
  CHECK(split.st_shared == 152 * ctas);
  CHECK(split.ld_shared == 3 * 4 * real_rows * d / 32);
  CHECK(split.total().write == (128 * 8 + 24) * 128 * ctas);
  CHECK(split.total().write == 17'170'432);  // CUPTI: 17,170,432 (h100-onchip-cupti.json)
  CHECK(split.total().read == (96 * 4 * pairs + 3 * 4 * real_rows * d / 32) * 128);
  CHECK(split.total().read == 53'477'376);  // CUPTI: 53,477,376
  // exp2: 16·64/32 scores + 4 warps × 2 rescales per block; 4 weights per merge step.
  CHECK(split.ex2 == 40 * pairs + 4 * real_rows * d / 32);
  // The combine: no shared memory; each of the 32 rows takes 1 + 16 exp2.
  CHECK(fd[1].on_chip.modelled);
  CHECK(fd[1].on_chip.total().read == 0);
  CHECK(fd[1].on_chip.ex2 == 32 * (1 + 16));
  CHECK(fd[1].on_chip.barriers + fd[1].on_chip.gemm_starts == 0);  // a warp per row, no barrier, no MMA
  // flashdecoding++ in range: no rescale, no weights; the combine adds ℓ_s without an exponent.
  // Its fallback launches on every step; with no row out of range its CTAs only read their flags.
  const std::vector<KernelPlan> pp = hbmlab_plans("flashdecoding++", p, 16, 64);
  REQUIRE(pp.size() == 3);
  CHECK(pp[1].tiles() == pp[0].tiles());
  CHECK(pp[1].accesses.empty());
  CHECK(pp[0].on_chip.ex2 == 32 * pairs);
  CHECK(pp[0].on_chip.ldmatrix == split.ldmatrix);
  CHECK(pp[0].on_chip.ld_shared == 2 * 4 * real_rows * d / 32 + 4 * real_rows);
  CHECK(pp[0].on_chip.total().read == 52'690'944);  // the row max read by one lane: still a wavefront; CUPTI 52,690,944
  CHECK(pp[2].on_chip.ex2 == 0);
}

TEST_CASE("on-chip: every recorded kernel's shared-memory bytes within 5 % of its counters", "[on_chip][validate]") {
  // hbmlab's kernels (ncu and CUPTI) and PyTorch's FlashAttention-2 forward and backward
  // (gpu/bench/sdpa_onchip.sh): loads + stores + wgmma reads, wavefronts × 128, against the layouts.
  // The loads alone within 1 % where the layout is modelled access by access (standard's pv kernel,
  // whose accesses ncu's SourceCounters did not see, and the stores, which pick up conflicts with the
  // cp.async fills in PyTorch's backward, are held to the 5 %).
  std::size_t sdpa_rows = 0;
  for (const char* name : {"h100-onchip-cupti.json", "h100-onchip.json", "h100-sdpa-onchip.json"}) {
    const std::string file = std::string(HBMLAB_SOURCE_DIR) + "/assets/measurements/" + name;
    INFO(name);
    ValidationReport report = validate_measurements({file}, std::nullopt);
    const Json j = validation_json(report);
    for (const Json& row : j["rows"]) {
      if (!row["measured"].contains("on_chip")) continue;
      INFO(row["source"].get<std::string>() << " N = " << row["problem"]["seq_len"] << " d = " << row["problem"]["head_dim"]
                                            << " causal " << row["problem"]["causal"]);
      const Json &m = row["measured"]["on_chip"], &p = row["predicted"]["on_chip"];
      const double measured = m["smem_ld_bytes"].get<double>() + m["smem_st_bytes"].get<double>();
      const double predicted = p["smem_ld_bytes"].get<double>() + p["smem_st_bytes"].get<double>();
      CHECK(predicted == Approx(measured).epsilon(0.05));
      if (row["source"] != "standard") CHECK(p["smem_ld_bytes"].get<double>() == Approx(m["smem_ld_bytes"].get<double>()).epsilon(0.01));
      if (row["source"].get<std::string>().rfind("sdpa flash", 0) == 0) ++sdpa_rows;
    }
  }
  CHECK(sdpa_rows == 16);  // 8 shapes, forward and backward
}
