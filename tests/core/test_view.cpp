// The GUI's view model (sim/view/) against the core's counts at every step of full replays.
// Run: ctest --test-dir build -R view   (or build/tests/hbmlab_tests_core "[view]")
#include <cmath>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "sim/common/error.hpp"
#include "sim/engine/replay.hpp"
#include "sim/engine/timing.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/view/compare.hpp"
#include "sim/view/replay_view.hpp"
#include "sim/view/roofline_view.hpp"
#include "sim/view/timeline_view.hpp"

using namespace hbmlab;
using namespace hbmlab::view;

namespace {

ReplayRequest request(const char* gpu, Algo algo, std::int64_t N, std::int64_t d, bool causal,
                      std::optional<std::int64_t> Br = {}, std::optional<std::int64_t> Bc = {}) {
  ReplayRequest r;
  r.sim.gpu = load_gpu(gpu);
  r.sim.problem = {2, 3, N, d, Dtype::fp16, causal};
  r.sim.algo = algo;
  r.sim.block_rows = Br;
  r.sim.block_cols = Bc;
  r.watch_row = N / 2 + 1;
  return r;
}

// Every property the panels rely on, checked at every position of the replay.
void check_every_step(const ReplayView& v) {
  const SimulationResult& res = v.result();
  const std::int64_t n = v.step_count();
  REQUIRE(n == res.per_instance.steps);
  IoCounter brute;  // the core's own counter, fed one step at a time
  std::int64_t done_before = 0;
  for (std::int64_t pos = 0; pos <= n; ++pos) {
    REQUIRE(v.counts_before(pos) == brute.counts());
    const Sram sram = v.sram_after(pos);
    REQUIRE(sram.bytes() <= v.working_set_bytes());
    for (const Tile& t : sram.tiles) REQUIRE(t.bytes > 0);
    if (pos > 0) {
      const Step& s = v.steps()[pos - 1];
      if (s.kind == StepKind::load || s.kind == StepKind::store) {  // the moved tile is on chip after it
        const Tile* t = sram.find(s.tensor);
        REQUIRE(t != nullptr);
        REQUIRE(t->bytes == s.bytes);
      }
    }
    const MatrixView m = v.matrix(pos, 1 << 20);
    std::int64_t done = 0;
    for (const MatrixCell& c : m.cells) done += c.done > 0.5f ? 1 : 0;
    REQUIRE(done >= done_before);  // blocks only ever finish
    done_before = done;
    if (pos < n) brute.on_step(v.steps()[pos]);
  }
  REQUIRE(v.counts_before(n) == count_instance(res.algo, res.problem, res.blocks.blocks));
  REQUIRE(v.counts_before(n) == res.per_instance);
  REQUIRE(v.counts_before(n).scaled(res.problem.instances()) == res.total);
  const MatrixView end = v.matrix(n, 1 << 20);
  for (const MatrixCell& c : end.cells) REQUIRE(c.done == 1.0f);
}

}  // namespace

TEST_CASE("view: counters, SRAM and block states at every step of full replays", "[view]") {
  std::vector<Algo> rooms(algorithms(Pass::forward).begin(), algorithms(Pass::forward).end());
  rooms.insert(rooms.end(), algorithms(Pass::backward).begin(), algorithms(Pass::backward).end());
  for (Algo algo : rooms)
    for (bool causal : {false, true}) {
      DYNAMIC_SECTION(to_string(algo) << (causal ? " causal" : "")) {
        check_every_step(ReplayView(request("toy", algo, 16, 4, causal)));
        check_every_step(ReplayView(request("a100-40gb", algo, 300, 32, causal, 32, 64)));  // ragged blocks
      }
    }
}

TEST_CASE("view: an N = 4096 replay spans more than one checkpoint and stepping back is exact", "[view]") {
  const ReplayView v(request("a100-40gb", algo_named("flash1"), 4096, 64, false));
  REQUIRE(v.step_count() > 4 * kCheckpointSteps);
  const std::int64_t n = v.step_count();
  for (std::int64_t pos : {n, n - 1, n / 2 + 7, kCheckpointSteps, kCheckpointSteps - 1, std::int64_t{1}, std::int64_t{0}}) {
    IoCounter brute;
    for (std::int64_t k = 0; k < pos; ++k) brute.on_step(v.steps()[k]);
    REQUIRE(v.counts_before(pos) == brute.counts());
  }
}

TEST_CASE("view: flash1 visits K/V blocks outer, flash2 Q blocks outer", "[view]") {
  const ReplayView f1(request("toy", algo_named("flash1"), 16, 4, false, 4, 8));
  const ReplayView f2(request("toy", algo_named("flash2"), 16, 4, false, 4, 8));
  const MatrixView m1 = f1.matrix(f1.step_count(), 64), m2 = f2.matrix(f2.step_count(), 64);
  REQUIRE(m1.Tr == 4);
  REQUIRE(m1.Tc == 2);
  // flash1: (i=0..3, j=0) first; flash2: (i=0, j=0..1) first.
  REQUIRE(m1.cells[1 * m1.cols + 0].visit == 2);
  REQUIRE(m1.cells[0 * m1.cols + 1].visit == 5);
  REQUIRE(m2.cells[0 * m2.cols + 1].visit == 2);
  REQUIRE(m2.cells[1 * m2.cols + 0].visit == 3);
}

TEST_CASE("view: aggregated matrix cells cover every block pair once", "[view]") {
  const ReplayView v(request("a100-40gb", algo_named("flash2"), 2048, 64, true, 16, 16));
  const MatrixView m = v.matrix(v.step_count() / 3, 48);
  REQUIRE(m.rows == 48);
  std::int64_t covered = 0;
  for (const MatrixCell& c : m.cells) covered += (c.i1 - c.i0) * (c.j1 - c.j0);
  REQUIRE(covered == m.Tr * m.Tc);
}

TEST_CASE("view: the watched row's online softmax ends at the exact softmax", "[view]") {
  for (Algo algo : {algo_named("flash1"), algo_named("flash2")}) {
    const ReplayView v(request("toy", algo, 16, 4, false, 4, 8));
    const SoftmaxView& s = v.softmax();
    REQUIRE(s.available);
    REQUIRE(s.events.size() == 2);  // Tc = 2 K/V blocks
    REQUIRE(s.events_before(0) == 0);
    REQUIRE(s.events_before(v.step_count()) == 2);
    REQUIRE(s.events.back().m_new == Approx(s.m_exact).epsilon(1e-5));
    REQUIRE(s.events.back().l_new == Approx(s.l_exact).epsilon(1e-5));
    REQUIRE(s.max_abs_diff < 1e-5);
    for (std::size_t e = 1; e < s.event_step.size(); ++e) REQUIRE(s.event_step[e] > s.event_step[e - 1]);
  }
}

TEST_CASE("view: too large a replay is refused with a message naming the options", "[view]") {
  ReplayRequest r = request("a100-40gb", algo_named("flash1"), 65536, 64, false, 16, 16);
  REQUIRE_THROWS_AS(check_replayable(r), InputError);
  REQUIRE_THROWS_WITH(ReplayView(r), Catch::Contains("--block-rows"));
}

TEST_CASE("view: comparison bars and the explorer come from the core", "[view]") {
  SimulateRequest base = request("a100-40gb", algo_named("flash1"), 1024, 64, false).sim;
  const std::vector<AlgoBar> bars = compare_algorithms(base);
  REQUIRE(bars.size() == all_rooms_for(base.problem).size());  // the self-attention rooms
  for (const AlgoBar& b : bars) {
    REQUIRE(b.ok);
    REQUIRE(b.result.total == count_problem(b.algo, b.result.problem, b.result.blocks.blocks));  // as the room ran it
  }
  REQUIRE(bars[0].result.total.accesses() > bars[1].result.total.accesses());

  ExplorerRequest e{base.gpu, base.problem, algo_named("flash1"), base.gpu.sram_bytes_per_sm, {64, 128}};
  const ExplorerView x = explore(e);
  REQUIRE(x.current_r >= 0);
  REQUIRE(x.current_c >= 0);
  REQUIRE(x.cells.size() == x.block_rows.size() * x.block_cols.size());
  for (const SweepPoint& pt : x.cells) REQUIRE(pt.total == count_problem(algo_named("flash1"), base.problem, pt.blocks));
  // More SRAM never needs more HBM accesses at the best fitting blocks.
  for (std::size_t s = 1; s < x.curve.size(); ++s)
    if (x.curve[s - 1].any_fits) REQUIRE(x.curve[s].best_accesses <= x.curve[s - 1].best_accesses);
}

TEST_CASE("view: backward rooms draw their own tensors and CTAs", "[view][backward]") {
  const ReplayView st(request("toy", algo_named("standard", Pass::backward), 16, 4, false, 4, 8));
  const std::vector<HbmTensor> drawn = st.hbm_tensors();
  for (Tensor t : {Tensor::P, Tensor::dP, Tensor::dS}) {
    const auto it = std::find_if(drawn.begin(), drawn.end(), [&](const HbmTensor& h) { return h.tensor == t; });
    REQUIRE(it != drawn.end());
    CHECK(it->rows == 16);
    CHECK(it->cols == 16);  // N × N, in Tr × Tc tiles
    CHECK(it->col_tiles == 2);
  }
  // dP and dS fill in as lines 2 and 3 store them; at the end every cell has both.
  const MatrixView end = st.matrix(st.step_count(), 64);
  for (const MatrixCell& c : end.cells) {
    CHECK(c.s_in_hbm == 1.0f);
    CHECK(c.p_in_hbm == 1.0f);
  }
  CHECK_FALSE(st.softmax().available);  // Algorithm 3 takes no softmax: P comes from HBM
  const ReplayView f2(request("a100-40gb", algo_named("flash2", Pass::backward), 16, 4, false, 4, 8));
  CHECK(f2.cta_count() == 2);  // one CTA per K_j (Tc = 2)
  CHECK(f2.cta_of(f2.step_count() - 1) == 1);
  CHECK(f2.softmax().available);
  CHECK(f2.softmax().exact_step >= 0);
  const std::vector<AlgoBar> bars = compare_algorithms(request("toy", algo_named("flash2", Pass::backward), 16, 4, false).sim);
  REQUIRE(bars.size() == 4);  // standard, flash1, flash2, flash3
  for (const AlgoBar& b : bars) CHECK(b.algo->pass() == Pass::backward);
}

TEST_CASE("view: the explorer finds the recorded runs of its problem, one per cell", "[view][measured]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "hbmlab-explorer-measured";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Records of hbmlab's flash2 kernel: two of the explorer's problem at 64 × 64 (K/V descending, then
  // ascending), one at 128 × 64, one of another N, one at blocks off the axes.
  auto record = [](std::int64_t N, std::int64_t Br, std::int64_t Bc, bool descending, double ms, double dram) {
    return fmt::format(R"({{"kernel": "flash2", "problem": {{"batch": 2, "heads": 4, "seq_len": {}, "head_dim": 64}},
      "blocks": {{"Br": {}, "Bc": {}}}, "launch": {{"threads_per_cta": 128, "kv_descending": {}}},
      "time_ms_median": {}, "dram_read_bytes": {}}})",
                       N, Br, Bc, descending, ms, dram);
  };
  std::ofstream(dir / "runs.json") << fmt::format(
      R"({{"device": {{"name": "NVIDIA H100 80GB HBM3"}}, "records": [{}, {}, {}, {}, {}]}})",
      record(2048, 64, 64, true, 0.5, 3e6), record(2048, 64, 64, false, 0.25, 2e6), record(2048, 128, 64, false, 0.2, 1e6),
      record(1024, 64, 64, false, 0.1, 1e6), record(2048, 96, 64, false, 0.1, 1e6));
  std::ofstream(dir / "not-json.json") << "{";

  ExplorerRequest req;
  req.gpu = load_gpu("h100-sxm");
  req.problem = AttentionProblem(2, 4, 2048, 64);
  req.algo = algo_named("flash2");
  req.sram_bytes = req.gpu.sram_bytes_per_block;
  req.current = {128, 128};
  const ExplorerView view = explore(req);
  const std::vector<MeasuredCell> cells = explorer_measured(req, view, dir.string());
  REQUIRE(cells.size() == 2);
  for (const MeasuredCell& m : cells) {
    REQUIRE(view.block_rows[m.r] == m.row.blocks.Br);
    REQUIRE(view.block_cols[m.c] == m.row.blocks.Bc);
    EngineOptions options;
    options.launch = m.row.launch;
    const EngineResult e = run_engine(req.algo, m.row.problem, m.row.blocks, req.gpu, options);
    REQUIRE(m.row.predicted_time_s == e.predicted_s);
    REQUIRE(m.row.predicted_dram_read == double(e.dram_read_bytes()));
  }
  const auto at = [&](std::int64_t Br) {
    return *std::find_if(cells.begin(), cells.end(), [&](const MeasuredCell& m) { return m.row.blocks.Br == Br; });
  };
  // The ascending record wins its cell; the figures are the file's.
  REQUIRE_FALSE(at(64).row.launch.kv_descending);
  REQUIRE(at(64).row.measured_time_s == Approx(0.25e-3));
  REQUIRE(at(64).row.measured_dram_read == 2e6);
  REQUIRE(at(128).row.measured_time_s == Approx(0.2e-3));
  // Another GPU's explorer finds none of them.
  req.gpu = load_gpu("a100-40gb");
  REQUIRE(explorer_measured(req, view, dir.string()).empty());
  fs::remove_all(dir);
}

TEST_CASE("view: the H100 workload's explorer shows the recorded (Br, Bc) of assets/measurements", "[view][measured]") {
  const Scenario s = load_scenario("workloads/h100-flash2-4k");
  ExplorerRequest req;
  req.gpu = load_gpu(s.gpu);
  req.problem = s.problem;
  req.algo = s.algorithms.front();
  req.sram_bytes = req.gpu.sram_bytes_per_block;
  req.current = {*s.block_rows, *s.block_cols};
  const ExplorerView view = explore(req);
  const std::vector<MeasuredCell> cells =
      explorer_measured(req, view, std::string(HBMLAB_SOURCE_DIR) + "/assets/measurements");
  REQUIRE(cells.size() >= 3);  // flash2's compiled shapes at d = 64: 128 × 128, 128 × 64, 64 × 64
  for (const MeasuredCell& m : cells) {
    REQUIRE(std::isfinite(m.row.measured_time_s));
    REQUIRE(std::isfinite(m.row.measured_dram_read));
    REQUIRE(std::abs(m.row.dram_read_error()) < 0.10);  // the README's DRAM-read target holds here
  }
}

TEST_CASE("view: load_measured_where predicts only the records it keeps", "[view][measured]") {
  // Lesson 7's problem: flash2, B = 1, H = 40, N = 6000, d = 128, recorded with on-chip counters.
  const Algo flash2 = algo_named("flash2");
  const auto keep = [&](const ValidationRow& row) {
    return row.measured_on_chip.any() && row.algo == flash2 && row.problem.seq_len == 6000 &&
           row.problem.head_dim == 128 && !row.problem.causal && row.problem.instances() == 40;
  };
  const ValidationReport some = load_measured_where(std::string(HBMLAB_SOURCE_DIR) + "/assets/measurements", keep);
  REQUIRE(some.rows.size() >= 2);  // h100-onchip.json and h100-onchip-cupti.json hold it
  for (const ValidationRow& row : some.rows) {
    REQUIRE(keep(row));
    REQUIRE(std::isfinite(row.predicted_time_s));
    REQUIRE(row.predicted_time_s > 0);
    REQUIRE(row.predicted_on_chip.ldmatrix > 0);
  }
  // Nothing kept, nothing predicted.
  REQUIRE(load_measured_where(std::string(HBMLAB_SOURCE_DIR) + "/assets/measurements",
                              [](const ValidationRow&) { return false; })
              .rows.empty());
}

TEST_CASE("view: the roofline puts each kernel under the HBM and shared-memory ceilings", "[view][on_chip]") {
  SimulateRequest request;
  request.gpu = load_gpu("h100-sxm");
  request.algo = algo_named("flash2");
  request.problem = AttentionProblem(1, 8, 2048, 128);
  request.block_rows = 128;
  request.block_cols = 64;
  request.numerics = NumericsMode::off;
  const SimulationResult res = simulate(request);
  const view::RooflineView v = view::roofline_view(res);
  // The ceilings are the preset's: 3.35 TB/s, 128 B/clock × 132 SMs and 2,730 FLOP/clock × 132 SMs
  // at the 1.75 GHz the SM holds under load, 989 TFLOP/s.
  CHECK(v.hbm_bytes_per_s == Approx(3.35e12));
  CHECK(v.smem_bytes_per_s == Approx(128.0 * 132 * 1750e6));
  CHECK(v.mma_sync_flop_per_s == Approx(request.gpu.mma_sync_flops_per_cycle_per_sm * 132 * 1750e6));
  CHECK(v.tensor_flop_per_s == Approx(989e12));
  CHECK(v.smem_ridge() == Approx(v.tensor_flop_per_s / v.smem_bytes_per_s));
  REQUIRE(v.points.size() == 1);
  const view::RooflinePoint& p = v.points[0];
  const KernelTiming& k = res.engine.kernels[0];
  // Its FLOPs are its MMAs' (4·N²·d per head, nothing skipped); its bytes the kernel's.
  CHECK(p.flops == Approx(4.0 * 2048 * 2048 * 128 * 8));
  const SmemBytes t = k.on_chip.total();  // PyTorch's launch: O staged through shared memory too
  CHECK(t.write > 0);
  CHECK(p.flop_per_smem_byte() == Approx(p.flops / double(t.fill + t.read + t.mma_read + t.write)));
  CHECK(p.flop_per_dram_byte() > p.flop_per_smem_byte());  // shared memory moves more bytes than HBM
  // No kernel runs above a ceiling it is under.
  CHECK(p.flop_per_s() <= v.tensor_flop_per_s);
  CHECK(p.flop_per_s() <= v.mma_sync_flop_per_s);
  CHECK(p.flop_per_s() <= v.smem_bytes_per_s * p.flop_per_smem_byte());
  CHECK(p.flop_per_s() <= v.hbm_bytes_per_s * p.flop_per_dram_byte());
  // A kernel without a described layout is left out, with why.
  request.algo = algo_named("standard");
  const view::RooflineView lib = view::roofline_view(simulate(request));
  CHECK(lib.points.empty());
  CHECK(lib.left_out.size() == 3);
}

TEST_CASE("the IO panel's bars compare with the first in words that hold either way", "[view]") {
  CHECK(versus_first(9.13e9, 2.09e9, "standard") == "4.4× fewer than standard");
  // Lesson 7: flash1 at d = 128 moves more than standard attention, not "0.7× fewer".
  CHECK(versus_first(5.88e9, 8.85e9, "standard") == "1.5× more than standard");
  CHECK(versus_first(2.0e9, 2.01e9, "flash2") == "as many as flash2");
}

// The window's Measured tab ranks the lesson's own records first and shows them before the rest.
TEST_CASE("view: MeasuredLoad predicts the records it ranks first before the others", "[view][measured]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "hbmlab-measured-ranked";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto record = [](const char* kernel, std::int64_t N) {
    return fmt::format(R"({{"kernel": "{}", "problem": {{"batch": 1, "heads": 2, "seq_len": {}, "head_dim": 64}},
      "blocks": {{"Br": 64, "Bc": 64}}, "time_ms_median": 0.05, "dram_read_bytes": 786432}})",
                       kernel, N);
  };
  std::ofstream(dir / "records.json") << fmt::format(R"({{"device": {{"name": "NVIDIA H100 80GB HBM3"}}, "records": [{}, {}, {}]}})",
                                                     record("flash2", 1024), record("flash1", 256), record("flash2", 512));
  const ValidationReport whole = load_measured(dir.string());
  REQUIRE(whole.rows.size() == 3);

  MeasuredLoad load(dir.string());
  load.rank([](const ValidationRow& row) { return row.algo == algo_named("flash1") ? 0 : 1; });
  CHECK_FALSE(load.done_through(0));
  REQUIRE(load.step(100));  // reads the files
  CHECK(load.total() == 3);
  CHECK(load.so_far().rows.empty());
  REQUIRE(load.step(100));  // the one record ranked 0, alone, though the step could take all three
  CHECK(load.predicted() == 1);
  CHECK(load.done_through(0));
  CHECK_FALSE(load.done_through(1));
  const ValidationReport first = load.so_far();
  REQUIRE(first.rows.size() == 1);
  CHECK(first.rows[0].algo == algo_named("flash1"));
  CHECK(first.rows[0].predicted_time_s == whole.rows[1].predicted_time_s);
  CHECK(first.time.count == 1);
  // A new ranking takes effect at the next step: the N = 512 record before N = 1,024.
  load.rank([](const ValidationRow& row) { return row.problem.seq_len == 512 ? 0 : 1; });
  REQUIRE(load.step(1));
  CHECK(load.so_far().rows.size() == 2);
  CHECK(load.so_far().rows[1].problem.seq_len == 512);
  CHECK_FALSE(load.step(100));
  const ValidationReport stepped = load.finish();
  REQUIRE(stepped.rows.size() == 3);
  for (std::size_t k = 0; k < 3; ++k) {  // in file order, as load_measured gives them
    CHECK(stepped.rows[k].problem.seq_len == whole.rows[k].problem.seq_len);
    CHECK(stepped.rows[k].predicted_time_s == whole.rows[k].predicted_time_s);
    CHECK(stepped.rows[k].predicted_dram_read == whole.rows[k].predicted_dram_read);
  }
  CHECK(stepped.time.mean_abs == whole.time.mean_abs);
  fs::remove_all(dir);
}
