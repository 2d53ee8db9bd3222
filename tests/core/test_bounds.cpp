// The IO-complexity bounds: exponent fits against N, d and M, and the bound expressions.
#include <cmath>

#include <catch2/catch.hpp>

#include "sim/bounds/bounds.hpp"

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
  REQUIRE(rows.size() == 9);  // 3 algorithms × N, d, M
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
    if (row.algo != Algo::standard) {
      INFO(to_string(row.algo) << " over " << to_string(row.axis));
      CHECK(row.ratio_max / row.ratio_min < 1.5);
      CHECK(row.ratio_min > 1.0);  // every count is at least the Ω expression
    }
}

TEST_CASE("bound expressions and kinds", "[bounds]") {
  const AttentionProblem p{2, 3, 1024, 64, Dtype::fp16, false};
  const Bound standard = bound_for(Algo::standard, p, 65536, 100);
  CHECK(standard.expression == "N d + N^2");
  CHECK(standard.value == Approx(6.0 * (1024.0 * 64 + 1024.0 * 1024)));
  const Bound flash = bound_for(Algo::flash1, p, 65536, 100);
  CHECK(flash.expression == "N^2 d^2 / M");
  CHECK(flash.kind == "Θ and Ω");  // M in [d, Nd]
  CHECK(flash.value == Approx(6.0 * 1024.0 * 1024 * 64 * 64 / 65536));
  CHECK(bound_for(Algo::flash2, p, 32, 1).kind == "Θ");  // M < d: Proposition 3 does not apply
}
