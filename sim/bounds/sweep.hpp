// The block size × SRAM grid: HBM traffic and predicted time for every (M, Br, Bc), including
// choices that do not fit (marked, for the explorer to shade). `hbmlab sweep` and the GUI use it.
#pragma once

#include <string>
#include <vector>

#include "sim/common/progress.hpp"
#include "sim/engine/simulate.hpp"

namespace hbmlab {

struct SweepConfig {
  GpuSpec gpu;
  AttentionProblem problem;
  std::vector<Algo> algos = {default_algo()};
  std::vector<std::int64_t> block_rows = {16, 32, 64, 128, 256};
  std::vector<std::int64_t> block_cols = {16, 32, 64, 128, 256, 512};
  std::vector<std::int64_t> sram_bytes;  // each the SRAM of an SM and of a CTA; empty: the GPU's own (per SM, per CTA)
  std::string sram_source = "--sram-bytes";  // what gave sram_bytes, as errors name it (a scenario's "file:line: key")
  bool l2_enabled = true;                 // off: the paper's model, every counted access reaches HBM
  bool kv_descending = false;             // the rooms with a K/V order visit K_j, V_j from the last block down
  LaunchOverride launch;                  // threads, registers, shared memory of the main kernel (rooms that take them)
};

struct SweepPoint {
  Algo algo = default_algo();
  AttentionProblem problem;        // as the room runs it at these blocks (Algorithm::prepare)
  std::int64_t sram_bytes = 0;     // per SM (M counts it)
  std::int64_t cta_sram_bytes = 0;  // what one CTA may use: sram_bytes, or the GPU's per-CTA figure when none was given
  std::int64_t M_elements = 0;
  Blocks blocks;
  std::int64_t Tr = 0, Tc = 0;
  std::int64_t working_set_bytes = 0;
  bool fits = false;
  Counts total;
  double bound_ratio = 0;
  double predicted_s = 0;  // the timing engine's; NaN where the tiles do not fit the SRAM
};

// The grid of points; the timing engine runs on all cores, with `progress` after each point.
std::vector<SweepPoint> run_sweep(const SweepConfig& config, const Progress& progress = {});

}  // namespace hbmlab
