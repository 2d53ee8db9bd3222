// Reports: text a student can read, and JSON per the contract of docs/design.md#json-output. The
// CSV of `simulate --csv` and `sweep` is written by the command line (sim/cli/cli.cpp).
#pragma once

#include <ostream>
#include <span>

#include <nlohmann/json.hpp>

#include "sim/bounds/bounds.hpp"
#include "sim/engine/simulate.hpp"

namespace hbmlab {

using Json = nlohmann::ordered_json;

// A problem as every JSON output writes it: batch, heads, seq_len, head_dim, dtype, causal.
Json problem_json(const AttentionProblem& problem);

void print_simulation(std::ostream& out, const SimulationResult& result);
void print_comparison(std::ostream& out, std::span<const SimulationResult> results);
// `--pass both`: for each algorithm with both passes among the results, forward + backward HBM
// bytes, FLOPs and predicted time (nothing when no algorithm has both).
void print_pass_sums(std::ostream& out, std::span<const SimulationResult> results);
Json simulation_json(const SimulationResult& result);

void print_bounds(std::ostream& out, std::span<const BoundsRow> rows, const BoundsConfig& config);
Json bounds_json(std::span<const BoundsRow> rows, const BoundsConfig& config);
std::string bounds_csv(std::span<const BoundsRow> rows, const BoundsConfig& config);

void print_presets(std::ostream& out, std::span<const GpuSpec> presets);
Json presets_json(std::span<const GpuSpec> presets);

}  // namespace hbmlab
