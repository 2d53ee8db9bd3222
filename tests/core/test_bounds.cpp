// The IO-complexity bounds: exponent fits against N, d and M, and the bound expressions; the
// block size × SRAM sweep, whose engine runs spread over the cores.
#include <algorithm>
#include <cmath>

#include <catch2/catch.hpp>

#include "sim/bounds/bounds.hpp"
#include "sim/bounds/sweep.hpp"
#include "sim/common/error.hpp"
#include "sim/common/parallel.hpp"
#include "sim/engine/timing.hpp"
#include "sim/scenario/embedded.hpp"

using namespace hbmlab;

TEST_CASE("fit_exponent recovers a power law", "[bounds]") {
  const std::vector<double> x = {2, 4, 8, 16};
  std::vector<double> y;
  for (double v : x) y.push_back(3.0 * std::pow(v, -1.5));
  CHECK(fit_exponent(x, y) == Approx(-1.5));
}

TEST_CASE("counted accesses scale as the paper says, within 0.05", "[bounds]") {
  const BoundsConfig config;
  const std::vector<BoundsRow> rows = run_bounds(config);
  std::size_t expected_rows = 0;  // N, d and M for every room, and s for those that take a block mask
  for (Algo algo : config.algos) expected_rows += algo->supports().block_mask ? 4 : 3;
  REQUIRE(rows.size() == expected_rows);
  REQUIRE(rows.size() >= 11);  // standard, flash1, flash2 at least
  for (const BoundsRow& row : rows) {
    INFO(to_string(row.algo) << " over " << to_string(row.axis) << ": fitted " << row.fitted << ", expected " << row.expected);
    CHECK(row.exact_ok);
    CHECK(std::fabs(row.fitted - row.expected) < 0.05);
    CHECK(row.exponent_ok);
  }
}

TEST_CASE("flash counts stay within a constant factor of N²d²/M", "[bounds]") {
  // Θ: over the default sweeps the ratio count / (N²d²/M) varies by well under 2×.
  for (const BoundsRow& row : run_bounds(BoundsConfig{}))
    if (row.algo != algo_named("standard")) {
      INFO(to_string(row.algo) << " over " << to_string(row.axis));
      CHECK(row.ratio_max / row.ratio_min < 1.5);
      CHECK(row.ratio_min > 1.0);  // every count is at least the Ω expression
    }
}

TEST_CASE("bound expressions and kinds", "[bounds]") {
  const AttentionProblem p{2, 3, 1024, 64, Dtype::fp16, false};
  const Bound standard = bound_for(algo_named("standard"), p, 65536, 100);
  CHECK(standard.expression == "N d + N^2");
  CHECK(standard.value == Approx(6.0 * (1024.0 * 64 + 1024.0 * 1024)));
  const Bound flash = bound_for(algo_named("flash1"), p, 65536, 100);
  CHECK(flash.expression == "N^2 d^2 / M");
  CHECK(flash.kind == "Θ and Ω");  // M in [d, Nd]
  CHECK(flash.value == Approx(6.0 * 1024.0 * 1024 * 64 * 64 / 65536));
  CHECK(bound_for(algo_named("flash2"), p, 32, 1).kind == "Θ");  // M < d: Proposition 3 does not apply
}

TEST_CASE("parallel_for runs every index once and hands back the first exception", "[sweep]") {
  for (unsigned threads : {0u, 1u, 3u}) {
    std::vector<int> hits(1000, 0);
    std::size_t calls = 0, last = 0;
    parallel_for(hits.size(), [&](std::size_t i) { ++hits[i]; }, [&](std::size_t done, std::size_t total) {
      calls += done == last + 1 && total == 1000;
      last = done;
    }, threads);
    CHECK(std::count(hits.begin(), hits.end(), 1) == 1000);
    CHECK(calls == 1000);  // progress: 1, 2, … 1000 of 1000, one call at a time
  }
  CHECK_THROWS_WITH(parallel_for(100, [&](std::size_t i) {
                      if (i == 7) throw InputError("index 7");
                    }, {}, 4),
                    "index 7");
  parallel_for(0, [](std::size_t) { FAIL("no index to run"); });
}

TEST_CASE("the sweep's engine times match the engine run point by point, and progress reaches the total", "[sweep]") {
  SweepConfig config;
  config.gpu = load_gpu("h100-sxm");
  config.problem = {1, 4, 2048, 64, Dtype::fp16, false};
  config.algos = {algo_named("flash1"), algo_named("flash2")};
  config.block_rows = {64, 128};
  config.block_cols = {64, 128, 1024};
  std::size_t last_done = 0, calls = 0;
  bool monotone = true;
  const std::vector<SweepPoint> points = run_sweep(config, [&](std::size_t done, std::size_t total) {
    monotone = monotone && done == last_done + 1 && total == 12;
    last_done = done;
    ++calls;
  });
  CHECK(monotone);
  CHECK(calls == 12);
  REQUIRE(points.size() == 12);
  for (const SweepPoint& pt : points) {
    INFO(to_string(pt.algo) << " " << pt.blocks.Br << "×" << pt.blocks.Bc);
    if (!pt.fits) {
      CHECK(std::isnan(pt.predicted_s));
      continue;
    }
    EngineOptions options;
    options.sram_bytes_per_sm = options.sram_bytes_per_block = pt.sram_bytes;
    CHECK(pt.predicted_s == run_engine(pt.algo, config.problem, pt.blocks, config.gpu, options).predicted_s);
  }
  CHECK(std::count_if(points.begin(), points.end(), [](const SweepPoint& p) { return !p.fits; }) > 0);
}

TEST_CASE("the density sweep: exponent 1 in s where N²d²s/M dominates, exact against the closed forms",
          "[bounds][block-sparse]") {
  BoundsConfig config;
  config.algos = {algo_named("flash1"), algo_named("flash2")};
  int s_rows = 0;
  for (const BoundsRow& row : run_bounds(config)) {
    if (row.axis != SweepAxis::s) continue;
    ++s_rows;
    INFO(to_string(row.algo) << " fitted " << row.fitted);
    CHECK(row.exact_ok);
    CHECK(row.fitted == Approx(1.0).margin(0.05));
    CHECK(row.bound_expression == "N d + N^2 d^2 s / M");
    CHECK(row.points.front().s < 0.2);  // the random mask's measured density, near 0.125
    CHECK(row.points.back().s == 1.0);
  }
  CHECK(s_rows == 2);
  // standard writes S and P whatever a mask says: it takes none, so it has no s row.
  config.algos = {algo_named("standard")};
  for (const BoundsRow& row : run_bounds(config)) CHECK(row.axis != SweepAxis::s);
}
