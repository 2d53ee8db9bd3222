// The simulate pipeline.
#include "sim/engine/simulate.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/algo/block_sparse/masks.hpp"
#include "sim/common/error.hpp"
#include "sim/common/limits.hpp"
#include "sim/engine/replay.hpp"
#include "sim/numerics/attention.hpp"

namespace hbmlab {
namespace {

// A full check costs about 4·N²·d operations; a sampled one 4·N·d per row.
constexpr std::int64_t kFullCheckMaxWork = std::int64_t{1} << 24;     // e.g. N = 512, d = 64
constexpr std::int64_t kSampledCheckMaxWork = std::int64_t{1} << 28;  // N·d·rows
constexpr int kSampledRows = 16;

// One head's numerics: the room computes its query rows through its own tiles (for a room that packs
// a group of heads, one head of the group: the others differ only in their numbers).
NumericsResult check(const AttentionProblem& p, const SimulateRequest& request, Blocks blocks) {
  NumericsResult result;
  NumericsMode mode = request.numerics;
  const std::int64_t full_work = p.Nq() * p.seq_len * p.head_dim;
  if (mode == NumericsMode::automatic) {
    if (full_work <= kFullCheckMaxWork) {
      mode = NumericsMode::full;
    } else if (p.seq_len * p.head_dim * kSampledRows <= kSampledCheckMaxWork) {
      mode = NumericsMode::sampled;
      result.reason = fmt::format("{} query rows of one head checked; a full check needs {} = {} multiply-adds",
                                  kSampledRows, p.Nq() == p.seq_len ? "N²d" : "NQ·N·d", full_work);
    } else {
      mode = NumericsMode::off;
      result.reason = "problem too large to check on the CPU";
    }
  }
  if (mode == NumericsMode::off) {
    result.mode = "off";
    if (result.reason.empty()) result.reason = "turned off (--numerics off)";
    return result;
  }
  const Inputs inputs = make_inputs(p.seq_len, p.head_dim, InputKind::unit, request.seed, p.Nq());
  std::vector<std::int64_t> rows;
  if (mode == NumericsMode::sampled) rows = sample_rows(p.Nq(), std::min(blocks.Br, p.Nq()), kSampledRows);
  const NumericsCheck c = check_numerics(request.algo, Precision::fp32, inputs, p, blocks, rows);
  result.checked = true;
  result.mode = mode == NumericsMode::full ? "full" : "sampled";
  result.rows_checked = c.rows_checked;
  result.max_abs_error = c.max_abs_error;
  result.finite = c.finite;
  result.compared = c.compared;
  if (mode == NumericsMode::sampled && c.compared != "O") result.reason += "; dK and dV summed over those rows' share";
  result.recomputed_rows = c.recomputed_rows;
  return result;
}

// An explicit --numerics full or sampled on a problem too large for the CPU is refused before any
// work; `auto` picks what fits (check() above).
void check_numerics_size(const AttentionProblem& p, NumericsMode mode) {
  const std::int64_t full_work = p.Nq() * p.seq_len * p.head_dim;  // < 2^61 within validate()'s limits
  if (mode == NumericsMode::full && full_work > kMaxFullCheckWork)
    fail_input("--numerics: a full check costs NQ·N·d = {} multiply-adds, more than hbmlab computes in one run ({}); "
               "use --numerics sampled or auto",
               full_work, kMaxFullCheckWork);
  if ((mode == NumericsMode::full || mode == NumericsMode::sampled) && p.seq_len * p.head_dim > kMaxNumericsElements)
    fail_input("--numerics: a check holds N·d = {} values of each of Q, K and V in fp64, more than hbmlab keeps in one "
               "run ({}); use --numerics off or auto",
               p.seq_len * p.head_dim, kMaxNumericsElements);
}

}  // namespace

TimeEstimate estimate_roofline(const GpuSpec& gpu, Algo algo, const AttentionProblem& p, const BlockGrid& g,
                               std::int64_t working_set_bytes, std::int64_t sram_bytes_per_sm, const Counts& total) {
  TimeEstimate t;
  t.hbm_s = double(total.hbm_bytes()) / (gpu.hbm_bandwidth_gbps * 1e9);
  t.compute_s = double(total.matmul_flops) / (gpu.tensor_tflops * 1e12) +
                double(total.non_matmul_flops) / (gpu.non_matmul_tflops * 1e12);
  t.predicted_s = std::max(t.hbm_s, t.compute_s);
  t.ctas = t.tiles = algo->roofline_ctas_per_instance(g) * algo->instances(p);
  t.ctas_per_sm = std::clamp<std::int64_t>(sram_bytes_per_sm / std::max<std::int64_t>(working_set_bytes, 1), 1,
                                           gpu.max_ctas_per_sm);
  t.waves = ceil_div(t.ctas, gpu.sm_count * t.ctas_per_sm);
  return t;
}

EngineResult paper_model(const Counts& total) {
  EngineResult e;
  e.l2_enabled = false;
  for (Tensor t : kAllTensors) {
    TensorMemory& m = e.memory[static_cast<int>(t)];
    m.sm_read_bytes = m.dram_read_bytes = total[t].read_bytes;
    m.sm_write_bytes = m.dram_write_bytes = total[t].write_bytes;
  }
  e.matmul_flops = total.matmul_flops;
  e.non_matmul_flops = total.non_matmul_flops;
  return e;
}

TimeEstimate time_estimate(const EngineResult& e) {
  TimeEstimate t;
  t.model = "engine";
  t.predicted_s = e.predicted_s;
  t.hbm_s = e.hbm_s;
  t.compute_s = e.compute_s;
  const auto largest = std::max_element(e.kernels.begin(), e.kernels.end(),
                                        [](const KernelTiming& a, const KernelTiming& b) { return a.tiles < b.tiles; });
  if (largest != e.kernels.end()) {
    t.ctas = largest->ctas;
    t.tiles = largest->tiles;
    t.ctas_per_sm = largest->ctas_per_sm;
    t.waves = largest->waves;
  }
  return t;
}

SimulateRequest request_for(const Scenario& s) {
  SimulateRequest request;
  request.gpu = load_gpu(s.gpu);
  request.problem = s.problem;
  request.block_rows = s.block_rows;
  request.block_cols = s.block_cols;
  request.sram_bytes = s.sram_bytes;
  if (s.sram_bytes) request.sram_source = s.sram_bytes_where;
  return request;
}

namespace {

// --splits auto. A split count matters by how its CTAs fill the SMs: S·B·HKV·Tr CTAs make whole
// or ragged waves, and more splits mean more partials for the combine to read back. So the
// candidates are the counts just below and above k SMs' worth of CTAs for k = 1 to 4 (each k one
// more CTA on every SM), and the engine times each; the fastest wins, the smaller S on a tie.
SimulationResult simulate_auto_splits(const SimulateRequest& request) {
  SimulateRequest trial = request;
  trial.auto_splits = false;
  trial.numerics = NumericsMode::off;
  trial.record_timeline = false;
  trial.problem.kv_splits = 0;  // the room's default first: its grid gives Tc, Tr and the instances
  const SimulationResult first = simulate(trial);
  const std::int64_t per_split = request.algo->instances(first.problem) * first.Tr;
  std::vector<std::int64_t> counts{first.problem.kv_splits};
  for (std::int64_t k = 1; k <= 4; ++k) {
    const std::int64_t ctas = k * request.gpu.sm_count;
    for (const std::int64_t s : {ctas / per_split, ceil_div(ctas, per_split)}) counts.push_back(std::clamp<std::int64_t>(s, 1, first.Tc));
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  std::vector<SimulationResult::SplitCandidate> candidates;
  SimulationResult::SplitCandidate best;
  for (const std::int64_t s : counts) {
    trial.problem.kv_splits = s;
    const double t = s == first.problem.kv_splits ? first.time.predicted_s : simulate(trial).time.predicted_s;
    candidates.push_back({s, t});
    if (best.splits == 0 || t < best.predicted_s) best = candidates.back();
  }
  SimulateRequest chosen = request;
  chosen.auto_splits = false;
  chosen.problem.kv_splits = best.splits;
  SimulationResult r = simulate(chosen);
  r.split_candidates = std::move(candidates);
  return r;
}

// The blocks of hbmlab's kernel at the problem's d that one CTA of `cta_bytes` holds; refused naming
// --hbmlab-kernels where no compiled shape fits.
Blocks fitting_kernel_blocks(Algo algo, const AttentionProblem& p, std::int64_t cta_bytes) {
  if (const std::optional<Blocks> fit = algo->hbmlab_kernel_blocks(p, cta_bytes)) return *fit;
  const Blocks kernel = *algo->hbmlab_kernel_blocks(p);
  fail_input("--hbmlab-kernels: no compiled tile shape of {}'s CUDA kernel at d = {} fits the {} B one CTA may use "
             "(its default, Br={} Bc={}, needs {} B)",
             to_string(algo), p.head_dim, cta_bytes, kernel.Br, kernel.Bc, algo->working_set_bytes(p, kernel));
}

}  // namespace

SimulationResult simulate(const SimulateRequest& request) {
  if (request.auto_splits && request.algo->supports().splits && !request.counts_only)
    return simulate_auto_splits(request);
  request.problem.validate();
  request.algo->check_problem(request.problem);
  // A kernel is timed only where it exists: gpu/ compiles each for fp16 and bf16, a few head dims,
  // and the problem shapes it takes (sim/algo/kernel_tiles.hpp), as `hbmlab measure` runs it.
  if (request.launch.hbmlab_kernels && request.algo->has_hbmlab_kernel())
    if (const std::optional<KernelMiss> miss = request.algo->hbmlab_kernel_miss(
            request.problem, request.sram_bytes.value_or(request.gpu.sram_bytes_per_block)))
      fail_input("--hbmlab-kernels: {}'s CUDA kernel in gpu/ {}", to_string(request.algo), miss->refusal);
  SimulationResult r;
  r.gpu = request.gpu;
  r.algo = request.algo;
  r.launch = request.launch;
  r.sram_bytes_per_sm = request.sram_bytes.value_or(request.gpu.sram_bytes_per_sm);
  r.sram_bytes_per_block = request.sram_bytes.value_or(request.gpu.sram_bytes_per_block);
  try {
    r.blocks = choose_blocks(request.algo, request.problem, {r.sram_bytes_per_sm, r.sram_bytes_per_block},
                             request.block_rows, request.block_cols);
  } catch (const InputError& e) {
    // The SRAM is named by what gave it: the preset's key, or a scenario's line, for --sram-bytes.
    const std::string_view message = e.what();
    if (!message.starts_with("--sram-bytes: ")) throw;
    if (!request.sram_bytes) fail_input("{}: numbers.sram_bytes_per_block: {}", request.gpu.origin, message.substr(14));
    if (request.sram_source == "--sram-bytes") throw;
    fail_input("{}: {}", request.sram_source, message.substr(14));
  }
  // hbmlab's kernel on the tile shape `hbmlab measure --blocks default` runs, unless the blocks were
  // given; where one CTA cannot hold that one (an A100's 163 KiB), the first compiled shape it holds.
  if (request.launch.hbmlab_kernels && !request.block_rows && !request.block_cols)
    if (const std::optional<Blocks> kernel = request.algo->hbmlab_kernel_blocks(request.problem)) {
      const Blocks rule = r.blocks.blocks, fit = fitting_kernel_blocks(request.algo, request.problem, r.sram_bytes_per_block);
      // As the kernel runs it, even past N (or a decoding CTA's packed rows): its tiles are compiled,
      // the rows beyond the problem's are masked; validate's records carry the same blocks.
      r.blocks.blocks = fit;
      r.blocks.working_set_bytes = request.algo->working_set_bytes(request.problem, fit);
      r.blocks.origin = "hbmlab's kernel";
      const std::string paper = fmt::format("not the paper's rule (Br={}, Bc={})", rule.Br, rule.Bc);
      r.blocks.note =
          fit == *kernel
              ? fmt::format("the tile shape of {}'s CUDA kernel (`hbmlab measure --blocks default`), {}",
                            to_string(request.algo), paper)
              : fmt::format("the first compiled tile shape of {}'s CUDA kernel that one CTA holds: its default, "
                            "Br={} Bc={} (`hbmlab measure --blocks default`), needs {} B, more than {} B; {}",
                            to_string(request.algo), kernel->Br, kernel->Bc,
                            request.algo->working_set_bytes(request.problem, *kernel), r.sram_bytes_per_block, paper);
    }
  r.problem = request.algo->prepare(request.problem, r.blocks.blocks, request.gpu);
  const AttentionProblem& p = r.problem;
  const BlockGrid grid = request.algo->grid(p, r.blocks.blocks);
  if (p.block_mask) p.block_mask->check(grid);
  // Every size is checked before any work starts (sim/common/limits.hpp).
  const bool blocks_chosen = r.blocks.origin != "explicit";  // the error names the option the user gave
  check_countable(request.algo, p, r.blocks.blocks, blocks_chosen);
  if (!request.counts_only) {
    check_numerics_size(p, request.numerics);
    check_engine_size(request.algo, p, r.blocks.blocks, blocks_chosen);
  }
  r.Tr = grid.Tr;
  r.Tc = grid.Tc;
  r.per_instance = count_instance(request.algo, p, r.blocks.blocks);
  r.total = r.per_instance.scaled(request.algo->instances(p));
  if (const auto& mask = p.block_mask) {
    AttentionProblem dense = p;
    dense.block_mask.reset();
    r.mask = SimulationResult::Mask{mask->spec(), kept_pairs(grid), grid.Tr * grid.Tc, density(grid),
                                    count_problem(request.algo, dense, r.blocks.blocks)};
  }
  r.bound = bound_for(request.algo, p, r.blocks.M_elements, r.total.accesses());
  if (request.counts_only) {
    r.numerics.mode = "off";
    r.numerics.reason = "counts only (--counts-only)";
    r.engine = paper_model(r.total);
    r.time = estimate_roofline(request.gpu, request.algo, p, grid, r.blocks.working_set_bytes, r.sram_bytes_per_sm,
                               r.total);
    return r;
  }
  r.numerics = check(p, request, r.blocks.blocks);
  EngineOptions options;
  options.l2_enabled = request.l2_enabled;
  options.record_timeline = request.record_timeline;

  options.sram_bytes_per_sm = r.sram_bytes_per_sm;
  options.sram_bytes_per_block = r.sram_bytes_per_block;
  if (request.sram_bytes) options.sram_source = request.sram_source;
  options.launch = request.launch;
  r.engine = run_engine(request.algo, p, r.blocks.blocks, request.gpu, options);
  r.time = time_estimate(r.engine);
  return r;
}

}  // namespace hbmlab
