// One simulation: blocks chosen for the GPU's SRAM, HBM traffic counted, the bound beside it,
// the numerics checked and a time estimated. The CLI, the GUI and the tests all call this.
#pragma once

#include <optional>
#include <string>

#include "sim/algo/blocks.hpp"
#include "sim/bounds/bounds.hpp"
#include "sim/engine/counters.hpp"
#include "sim/engine/timing.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/spec/gpu_spec.hpp"

namespace hbmlab {

enum class NumericsMode { automatic, full, sampled, off };

struct SimulateRequest {
  GpuSpec gpu;
  AttentionProblem problem;
  Algo algo = default_algo();
  std::optional<std::int64_t> block_rows, block_cols;
  std::optional<std::int64_t> sram_bytes;  // overrides the GPU's SRAM per SM and per CTA
  std::string sram_source = "--sram-bytes";  // what gave sram_bytes, as errors name it (a scenario's "file:line: key")
  NumericsMode numerics = NumericsMode::automatic;
  std::uint64_t seed = 1;
  bool l2_enabled = true;        // off: the paper's model, DRAM traffic = the algorithmic count
  bool record_timeline = false;  // keep the per-SM timeline and HBM bandwidth over time
  LaunchOverride launch;         // a real kernel's launch configuration, when modelling one
  // Only the paper's counts: no numerics, no timing engine. Time is then a roofline estimate
  // (model "roofline"), the L2 is reported off and DRAM traffic equals the count.
  bool counts_only = false;
  // Split-KV rooms (--splits auto): time the split counts that fill the SMs once to four times over
  // and keep the one the engine predicts fastest (SimulationResult::split_candidates).
  bool auto_splits = false;
};

struct NumericsResult {
  bool checked = false;
  std::string mode;    // "full", "sampled" or "off"
  std::string reason;  // why it was sampled or off
  std::string precision = "fp32";
  std::int64_t rows_checked = 0;
  double max_abs_error = 0;
  bool finite = true;
  std::string compared = "O";  // "dQ, dK, dV" for a backward room (its gradients, not O)
  std::int64_t recomputed_rows = 0;  // rows the room recomputed on its safe path (FlashDecoding++'s fallback)
};

// The time figures of the JSON contract. simulate() fills them from the timing engine
// (model "engine"); estimate_roofline() is the simple bound kept for comparison.
// For standard, ctas, tiles, ctas_per_sm and waves are those of its largest kernel (S = QKᵀ); tiles
// exceed ctas where persistent CTAs walk them (KernelTiming).
struct TimeEstimate {
  std::string model = "roofline";
  double predicted_s = 0, hbm_s = 0, compute_s = 0;
  std::int64_t ctas = 0, tiles = 0, ctas_per_sm = 0, waves = 0;
};

struct SimulationResult {
  GpuSpec gpu;
  AttentionProblem problem;  // as the room runs it (Algorithm::prepare): its defaults filled in
  Algo algo = default_algo();
  BlockChoice blocks;
  std::int64_t Tr = 0, Tc = 0;
  std::int64_t sram_bytes_per_sm = 0, sram_bytes_per_block = 0;
  Counts per_instance;  // one instance: a (batch, head), or a (batch, K/V head) group (Algorithm::instances)
  Counts total;         // × the room's instances (B·H, or B·HKV)
  // With a block mask: the pairs it keeps (causal ones left out too) and the same problem's counts
  // without the mask, to say what it saves.
  struct Mask {
    std::string spec;
    std::int64_t kept_pairs = 0, pairs = 0;
    double density = 0;
    Counts dense_total;
  };
  std::optional<Mask> mask;
  Bound bound;
  NumericsResult numerics;
  TimeEstimate time;
  EngineResult engine;  // kernels, L2 and DRAM traffic, timeline
  LaunchOverride launch;  // the launch the engine timed, as requested (the report names it)
  // With auto_splits: each split count timed and the engine's prediction for it, smallest S first;
  // problem.kv_splits is the fastest of them.
  struct SplitCandidate {
    std::int64_t splits = 0;
    double predicted_s = 0;
  };
  std::vector<SplitCandidate> split_candidates;
};

SimulationResult simulate(const SimulateRequest& request);

// The request a scenario describes: its GPU (loaded), problem, blocks and SRAM; algorithm
// left at the default for the caller to set.
SimulateRequest request_for(const Scenario& scenario);

// The contract's time figures from an engine run.
TimeEstimate time_estimate(const EngineResult& engine);
// The paper's model as an engine result: L2 off, every counted byte reaches DRAM, no kernels.
EngineResult paper_model(const Counts& total);

TimeEstimate estimate_roofline(const GpuSpec& gpu, Algo algo, const AttentionProblem& problem, const BlockGrid& grid,
                               std::int64_t working_set_bytes, std::int64_t sram_bytes_per_sm, const Counts& total);

}  // namespace hbmlab
