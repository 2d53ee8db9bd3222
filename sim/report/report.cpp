// Text and JSON reports.
//
// [SECTION] simulate
// [SECTION] bounds
// [SECTION] presets
#include "sim/report/report.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include "sim/common/units.hpp"
#include "sim/report/on_chip_json.hpp"

namespace hbmlab {

// [SECTION] simulate

namespace {

std::string problem_line(const AttentionProblem& p) {
  std::string line = fmt::format("B={} H={} N={} d={} {}, {}", p.batch, p.heads, p.seq_len, p.head_dim, to_string(p.dtype),
                                 p.causal ? "causal" : "not causal");
  if (p.query_len > 0) line += fmt::format(", NQ={}", p.query_len);
  if (p.kv_heads > 0) line += fmt::format(", HKV={}", p.kv_heads);
  if (p.block_mask) line += fmt::format(", block mask {}", p.block_mask->spec());
  return line;
}

double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

// A decoding problem: one that sets the shapes of decoding or a room that resolved its splits or φ.
// Only these reports show the non-matmul operations and the decoding lines, so that self-attention
// reports read as before.
bool decoding(const AttentionProblem& p) { return p.query_len > 0 || p.kv_heads > 0 || p.kv_splits > 0 || p.unified_max; }

// A table row: fields in columns of fixed width, right- or left-aligned. A field wider than its
// column borrows the padding of the next ones, so a long algorithm name shifts only what it must.
class TableRow {
public:
  explicit TableRow(std::string indent) : out_(std::move(indent)) {}
  TableRow& add(std::string_view separator, std::string_view text, int width, bool left = false) {
    out_ += separator;
    // Columns as fmt counts them: one per UTF-8 code point (×, µ and the like are one column).
    const int columns = static_cast<int>(std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
    int pad = std::max(0, width - columns);
    const int paid = std::min(pad, debt_);
    pad -= paid;
    debt_ = debt_ - paid + std::max(0, columns - width);
    const std::string spaces(static_cast<std::size_t>(pad), ' ');
    out_ += left ? std::string(text) + spaces : spaces + std::string(text);
    return *this;
  }
  std::string str() const { return out_ + "\n"; }

private:
  std::string out_;
  int debt_ = 0;
};

Json number_or_null(double x) { return std::isfinite(x) ? Json(x) : Json(nullptr); }

// Which resource set the pace, as shares of the kernel's rounds.
std::string limiter_text(const KernelTiming& k) {
  const double busy = k.bound_dram_s + k.bound_l2_s + k.bound_compute_s + k.bound_latency_s + k.bound_sram_s;
  if (busy <= 0) return "launch overhead only";
  std::string text;
  auto add = [&](double s, const char* what) {
    if (s / busy < 0.005) return;
    text += fmt::format("{}{} {:.0f}%", text.empty() ? "bound by " : ", ", what, 100.0 * s / busy);
  };
  add(k.bound_compute_s, "compute");
  add(k.bound_dram_s, "HBM");
  add(k.bound_latency_s, "latency");
  add(k.bound_l2_s, "L2");
  add(k.bound_sram_s, "SRAM");
  return text;
}

// Which kernels the engine timed (one line of the report): the room's reference launch, or hbmlab's
// own CUDA kernels as `hbmlab validate` times their records (validate then adds what CUDA events cost
// to a record they timed: GpuSpec::event_timing_overhead_ns, kernel_gap_ns).
std::string launch_text(const SimulationResult& r) {
  const LaunchOverride& l = r.launch;
  if (l.hbmlab_kernels) return "hbmlab's CUDA kernels in gpu/, as `hbmlab validate` times their records (it adds the CUDA events' cost)";
  if (l.threads_per_cta || l.registers_per_thread || l.smem_bytes_per_cta || (l.kv_descending && r.algo->has_kv_order()))
    return "the reference launch as the --launch-* and --kv-descending options set it (hbmlab's CUDA kernels: --hbmlab-kernels)";
  return "the reference launch (hbmlab's CUDA kernels in gpu/, as `hbmlab validate` times them: --hbmlab-kernels)";
}

Json engine_time_json(const SimulationResult& r) {
  Json kernels = Json::array();
  for (const KernelTiming& k : r.engine.kernels)
    kernels.push_back({{"name", k.name}, {"time_s", k.time_s}, {"start_s", k.start_s}, {"ctas", k.ctas},
                       {"tiles", k.tiles}, {"ctas_per_sm", k.ctas_per_sm}, {"occupancy_limit", k.occupancy_limit}, {"waves", k.waves},
                       {"smem_bytes_per_cta", k.smem_bytes_per_cta}, {"threads_per_cta", k.threads_per_cta},
                       {"registers_per_thread", k.registers_per_thread}, {"double_buffered", k.double_buffered},
                       {"overlap", k.overlap}, {"rounds", k.rounds},
                       {"bound_s", {{"compute", k.bound_compute_s}, {"dram", k.bound_dram_s}, {"latency", k.bound_latency_s},
                                    {"l2", k.bound_l2_s}, {"sram", k.bound_sram_s}}},
                       {"dram_read_bytes", k.dram_read_bytes}, {"dram_write_bytes", k.dram_write_bytes},
                       {"on_chip", on_chip_json(k.on_chip, pipe_busy(k, r.gpu), k.sm_clock_mhz)}});
  Json time = {{"model", r.time.model}, {"predicted_s", r.time.predicted_s}, {"hbm_s", r.time.hbm_s},
               {"compute_s", r.time.compute_s}, {"l2_s", r.engine.l2_s}, {"ctas", r.time.ctas},
               {"tiles", r.time.tiles}, {"ctas_per_sm", r.time.ctas_per_sm}, {"waves", r.time.waves},
               {"launch", r.launch.hbmlab_kernels ? "hbmlab-kernels" : "reference"}, {"kernels", kernels}};
  // The grid (CTAs launched, tiles, CTAs per SM, waves) is the launch plan's, which only the timing
  // engine builds: under --counts-only (the roofline) it is left out rather than guessed — a
  // persistent grid launches fewer CTAs than it has tiles, and standard's GEMMs tile their own way.
  if (r.time.model == "roofline")
    for (const char* key : {"ctas", "tiles", "ctas_per_sm", "waves"}) time.erase(key);
  return time;
}

Json l2_json(const EngineResult& e, const GpuSpec& gpu) {
  Json by_tensor = Json::object();
  for (Tensor t : kAllTensors) {
    const TensorMemory& m = e.memory[static_cast<int>(t)];
    if (m.sm_read_bytes || m.sm_write_bytes)
      by_tensor[std::string(tensor_key(t))] = {{"sm_read_bytes", m.sm_read_bytes}, {"sm_write_bytes", m.sm_write_bytes},
                                               {"read_hit_bytes", m.read_hit_bytes}};
  }
  return {{"enabled", e.l2_enabled}, {"sm_read_bytes", e.sm_read_bytes()}, {"sm_write_bytes", e.sm_write_bytes()},
          {"read_hit_bytes", e.read_hit_bytes()}, {"capacity_bytes", gpu.l2_bytes}, {"by_tensor", by_tensor}};
}

Json dram_json(const EngineResult& e) {
  Json by_tensor = Json::object();
  for (Tensor t : kAllTensors) {
    const TensorMemory& m = e.memory[static_cast<int>(t)];
    if (m.dram_read_bytes || m.dram_write_bytes)
      by_tensor[std::string(tensor_key(t))] = {{"read_bytes", m.dram_read_bytes}, {"write_bytes", m.dram_write_bytes}};
  }
  return {{"read_bytes", e.dram_read_bytes()}, {"write_bytes", e.dram_write_bytes()},
          {"dirty_in_l2_at_end_bytes", e.dram_dirty_at_end_bytes}, {"by_tensor", by_tensor}};
}

}  // namespace

void print_simulation(std::ostream& out, const SimulationResult& r) {
  const AttentionProblem& p = r.problem;
  const Counts& c = r.total;
  fmt::print(out, "{} — {}\n", to_string(r.algo), paper_name(r.algo));
  fmt::print(out, "  GPU       {} ({}): SRAM {} per SM, {} per CTA → M = {} {} elements\n", r.gpu.display_name,
             r.gpu.name, format_bytes(double(r.sram_bytes_per_sm)), format_bytes(double(r.sram_bytes_per_block)),
             format_count(double(r.blocks.M_elements)), to_string(p.dtype));
  fmt::print(out, "  problem   {}: {} {}, all alike\n", problem_line(p), format_count(double(r.algo->instances(p))),
             r.algo->instance_name(p));
  fmt::print(out, "  blocks    Br={} Bc={} ({}) → Tr={} Tc={}; SRAM working set {} of {}\n", r.blocks.blocks.Br,
             r.blocks.blocks.Bc, r.blocks.origin, r.Tr, r.Tc, format_bytes(double(r.blocks.working_set_bytes)),
             format_bytes(double(r.sram_bytes_per_block)));
  if (!r.blocks.note.empty()) fmt::print(out, "  note      {}\n", r.blocks.note);
  if (const std::optional<Pipeline> pipe = r.algo->pipeline(p, r.blocks.blocks))
    fmt::print(out, "  pipeline  a ring of {} K/V stages; 1 producer and {} consumer warpgroups per CTA\n", pipe->stages,
               pipe->consumer_warpgroups);
  if (const auto kept = r.algo->forward_state(p)) {
    fmt::print(out, "  forward   keeps {} in HBM for this pass: {} per head, {} in all ({} beyond the output O:\n"
                    "            the paper's memory claim, O(N²) for P against O(N) for the row statistics)\n",
               kept->tensors, format_bytes(double(kept->bytes_per_head)),
               format_bytes(double(kept->bytes_per_head * p.instances())), format_bytes(double(kept->extra_bytes_per_head)));
  }
  if (p.kv_splits > 0) {
    const BlockGrid g = r.algo->grid(p, r.blocks.blocks);
    if (g.splits == 1)
      fmt::print(out, "  splits    S = 1: one CTA per row block takes the whole cache and writes O and L itself (no combine)\n");
    else
      fmt::print(out, "  splits    S = {} per instance: {}{} K/V block{} (about {} rows) each, {} CTAs in all; a combine "
                      "kernel reads the {} partials back\n",
                 g.splits, g.Tc / g.splits, g.Tc % g.splits ? fmt::format(" or {}", g.Tc / g.splits + 1) : "",
                 g.Tc / g.splits == 1 && g.Tc % g.splits == 0 ? "" : "s",
                 format_count(double(g.N) / double(g.splits)), format_count(double(g.splits * g.Tr * r.algo->instances(p))),
                 g.splits);
  }
  if (!r.split_candidates.empty()) {
    std::string tried;
    for (const auto& c : r.split_candidates)
      tried += fmt::format("{}{} ({})", tried.empty() ? "" : ", ", c.splits, format_seconds(c.predicted_s));
    fmt::print(out, "            --splits auto: S = {}, the fastest the engine predicts of S = {}\n", p.kv_splits, tried);
  }
  if (p.unified_max) fmt::print(out, "  φ         unified max {:.4g}: every split's e^(x − φ) against the same max\n", *p.unified_max);
  if (r.mask) {
    const double dense = double(r.mask->dense_total.hbm_bytes());
    fmt::print(out, "  mask      {}: {} of {} block pairs kept per head (density {:.1f}%); HBM traffic {} against {} "
                    "dense ({:.2f}× less)\n",
               r.mask->spec, format_count(double(r.mask->kept_pairs)), format_count(double(r.mask->pairs)),
               100 * r.mask->density, format_bytes(double(c.hbm_bytes())), format_bytes(dense),
               c.hbm_bytes() > 0 ? dense / double(c.hbm_bytes()) : 0.0);
  }
  if (c.skipped_blocks > 0 && !r.mask)
    fmt::print(out, "  causal    {} of {} block pairs skipped per head\n", format_count(double(r.per_instance.skipped_blocks)),
               format_count(double(r.Tr * r.Tc)));

  fmt::print(out, "\n  HBM traffic, every load from and store to global memory (the paper's count, all heads)\n");
  fmt::print(out, "  {:<7} {:>12} {:>12} {:>8}\n", "tensor", "reads", "writes", "share");
  const double all = double(c.hbm_bytes());
  for (Tensor t : kAllTensors) {
    if (!c.touches(t)) continue;
    const TensorTraffic& tt = c[t];
    fmt::print(out, "  {:<7} {:>12} {:>12} {:>7.1f}%\n", tensor_symbol(t), format_bytes(double(tt.read_bytes)),
               format_bytes(double(tt.write_bytes)), percent(double(tt.read_bytes + tt.write_bytes), all));
  }
  fmt::print(out, "  {:<7} {:>12} {:>12} {:>7.1f}%   = {} accesses (elements)\n", "total",
             format_bytes(double(c.hbm_read_bytes())), format_bytes(double(c.hbm_write_bytes())), 100.0,
             format_count(double(c.accesses())));

  fmt::print(out, "\n  bound     {}({}) = {} accesses; counted / bound = {:.3g}\n", r.bound.kind, r.bound.expression,
             format_count(r.bound.value), r.bound.ratio);
  fmt::print(out, "  FLOPs     matmul {}, non-matmul {}\n", format_si(double(c.matmul_flops), "FLOP"),
             format_si(double(c.non_matmul_flops), "FLOP"));
  if (decoding(p)) {
    const NonMatmulOps ops = r.algo->non_matmul_ops(p, r.blocks.blocks);
    const double n = double(r.algo->instances(p));
    fmt::print(out, "  softmax   {} exponentials, {} elements rescaled, {} running-max updates, {} kernel{}: {}\n",
               format_count(n * double(ops.exponentials)), format_count(n * double(ops.rescaled_elements)),
               format_count(n * double(ops.max_updates)), ops.kernels, ops.kernels == 1 ? "" : "s", ops.note);
  }
  fmt::print(out, "  SRAM      {} loaded in, {} read out (stores and matmul operands)\n", format_bytes(double(c.sram_write_bytes)),
             format_bytes(double(c.sram_read_bytes)));
  const bool numerics_ok = r.numerics.finite && r.numerics.max_abs_error < 1e-4;
  const std::string recomputed = r.numerics.recomputed_rows > 0
      ? fmt::format("; {} of them recomputed on the safe path", format_count(double(r.numerics.recomputed_rows)))
      : std::string();
  if (r.numerics.checked && r.numerics.compared == "O")
    fmt::print(out, "  numerics  max |O_tiled − O_reference| = {:.2g} over {} {} query rows ({} tiled vs fp64) {}{}\n",
               r.numerics.max_abs_error, format_count(double(r.numerics.rows_checked)), r.numerics.mode,
               r.numerics.precision, numerics_ok ? "✓" : "✗", recomputed);
  else if (r.numerics.checked)
    fmt::print(out, "  numerics  max |tiled − reference| over {} = {:.2g}, from {} {} query rows ({} tiled vs fp64) {}\n",
               r.numerics.compared, r.numerics.max_abs_error, format_count(double(r.numerics.rows_checked)),
               r.numerics.mode, r.numerics.precision, numerics_ok ? "✓" : "✗");
  else
    fmt::print(out, "  numerics  not checked: {}\n", r.numerics.reason);
  const EngineResult& e = r.engine;
  if (r.time.model == "roofline") {
    fmt::print(out, "\n  time      {} roofline estimate, the larger of HBM time {} and compute time {} (--counts-only:\n"
                    "            the timing engine was not run)\n",
               format_seconds(r.time.predicted_s), format_seconds(r.time.hbm_s), format_seconds(r.time.compute_s));
    return;
  }
  // The parenthesis: the problem's bytes and FLOPs at the whole GPU's sustained rates, every SM busy; a
  // time far above both is a launch that leaves SMs idle or waits on latency.
  fmt::print(out, "\n  time      {} predicted by the timing engine (at the whole GPU's rates: HBM {}, compute {})\n",
             format_seconds(r.time.predicted_s),
             format_seconds(r.time.hbm_s), format_seconds(r.time.compute_s));
  fmt::print(out, "  launch    {}\n", launch_text(r));
  for (const KernelTiming& k : e.kernels)
    fmt::print(out, "  kernel    {:<24} {:>10}: {}, {} per SM ({}-limited), {} wave{}; {}\n", k.name,
               format_seconds(k.time_s), format_ctas(k.ctas, k.tiles), k.ctas_per_sm, k.occupancy_limit,
               format_count(double(k.waves)), k.waves == 1 ? "" : "s", limiter_text(k));
  if (e.l2_enabled) {
    fmt::print(out, "  L2        SM↔L2 {} read ({:.1f}% hit), {} written\n", format_bytes(double(e.sm_read_bytes())),
               percent(double(e.read_hit_bytes()), double(e.sm_read_bytes())), format_bytes(double(e.sm_write_bytes())));
    fmt::print(out, "  DRAM      {} read, {} written after L2 ({} still dirty in L2 at the end)\n",
               format_bytes(double(e.dram_read_bytes())), format_bytes(double(e.dram_write_bytes())),
               format_bytes(double(e.dram_dirty_at_end_bytes)));
  } else {
    fmt::print(out, "  L2        off (--no-l2): DRAM traffic is the paper's count above\n");
  }
  OnChipCounts on_chip;
  for (const KernelTiming& k : e.kernels) on_chip += k.on_chip;
  if (on_chip.modelled) {
    const SmemBytes t = on_chip.total();
    fmt::print(out, "  on chip   shared memory → registers {}, by the tensor cores {}; filled {}, stored {};\n"
                    "            {} ldmatrix, {} mma.sync, {} wgmma, {} ex2 (warp instructions; docs/on-chip.md)\n",
               format_bytes(double(t.read)), format_bytes(double(t.mma_read)), format_bytes(double(t.fill)),
               format_bytes(double(t.write)), format_count(double(on_chip.ldmatrix)), format_count(double(on_chip.mma)),
               format_count(double(on_chip.wgmma)), format_count(double(on_chip.ex2)));
  }
}

void print_comparison(std::ostream& out, std::span<const SimulationResult> results) {
  if (results.empty()) return;
  const SimulationResult& first = results.front();
  std::size_t name_width = 9;  // "algorithm"; wider for "standard backward"
  for (const SimulationResult& r : results) name_width = std::max(name_width, to_string(r.algo).size());
  fmt::print(out, "{} on {}\n", problem_line(first.problem), first.gpu.display_name);
  fmt::print(out, "  {:<{}} {:>9} {:>11} {:>11} {:>11} {:>9} {:>12} {:>12} {:>8} {:>10} {:>10}\n", "algorithm", name_width,
             "Br×Bc", "HBM read", "HBM write", "HBM total", "vs first", "matmul", "non-matmul", "/bound", "time*", "DRAM*");
  const double baseline = double(first.total.hbm_bytes());
  for (const SimulationResult& r : results) {
    const Counts& c = r.total;
    out << TableRow("  ")
               .add("", to_string(r.algo), static_cast<int>(name_width), true)
               .add(" ", fmt::format("{}×{}", r.blocks.blocks.Br, r.blocks.blocks.Bc), 9)
               .add(" ", format_bytes(double(c.hbm_read_bytes())), 11)
               .add(" ", format_bytes(double(c.hbm_write_bytes())), 11)
               .add(" ", format_bytes(double(c.hbm_bytes())), 11)
               .add(" ", fmt::format("{:.2f}×", baseline / double(c.hbm_bytes())), 9)
               .add(" ", format_si(double(c.matmul_flops), "FLOP"), 12)
               .add(" ", format_si(double(c.non_matmul_flops), "FLOP"), 12)
               .add(" ", fmt::format("{:.3g}", r.bound.ratio), 8)
               .add(" ", format_seconds(r.time.predicted_s), 10)
               .add(" ", format_bytes(double(r.engine.dram_read_bytes() + r.engine.dram_write_bytes())), 10)
               .str();
  }
  fmt::print(out, "  (vs first: how many times less HBM traffic than the first row; /bound: counted accesses over the\n"
                  "   bound's expression; *time and DRAM bytes after the L2: {})\n",
             first.time.model == "roofline" ? "--counts-only, so a roofline time and the paper's count"
             : first.engine.l2_enabled      ? "predicted by the timing engine, L2 on"
                                            : "predicted by the timing engine, L2 off (--no-l2)");
}

void print_pass_sums(std::ostream& out, std::span<const SimulationResult> results) {
  bool heading = false;
  std::string model;
  for (const SimulationResult& f : results) {
    if (f.algo->pass() != Pass::forward) continue;
    for (const SimulationResult& b : results) {
      if (b.algo->pass() != Pass::backward || b.algo->name() != f.algo->name()) continue;
      if (!heading) {
        fmt::print(out, "\nForward + backward (the attention of one training step), all heads\n");
        fmt::print(out, "  {:<9} {:>11} {:>11} {:>11} {:>13} {:>11} {:>11} {:>11}\n", "algorithm", "HBM fwd", "HBM bwd",
                   "HBM total", "FLOPs total", "time fwd", "time bwd", "time total");
        heading = true;
      }
      const std::int64_t flops = f.total.matmul_flops + f.total.non_matmul_flops + b.total.matmul_flops +
                                 b.total.non_matmul_flops;
      fmt::print(out, "  {:<9} {:>11} {:>11} {:>11} {:>13} {:>11} {:>11} {:>11}\n", f.algo->name(),
                 format_bytes(double(f.total.hbm_bytes())), format_bytes(double(b.total.hbm_bytes())),
                 format_bytes(double(f.total.hbm_bytes() + b.total.hbm_bytes())), format_si(double(flops), "FLOP"),
                 format_seconds(f.time.predicted_s), format_seconds(b.time.predicted_s),
                 format_seconds(f.time.predicted_s + b.time.predicted_s));
      model = f.time.model;
    }
  }
  if (heading)
    fmt::print(out, "  (HBM: the paper's count; time: {})\n",
               model == "roofline" ? "roofline estimates, --counts-only" : "predicted by the timing engine");
}

Json problem_json(const AttentionProblem& p) {
  Json j = {{"batch", p.batch}, {"heads", p.heads}, {"seq_len", p.seq_len}, {"head_dim", p.head_dim},
            {"dtype", to_string(p.dtype)}, {"causal", p.causal}};
  // The shapes beyond self-attention, only where set, so that self-attention reads as before.
  if (p.query_len > 0) j["query_len"] = p.query_len;
  if (p.kv_heads > 0) j["kv_heads"] = p.kv_heads;
  if (p.block_mask) j["block_mask"] = p.block_mask->spec();
  if (p.kv_splits > 0) j["splits"] = p.kv_splits;
  if (p.unified_max) j["unified_max"] = *p.unified_max;
  return j;
}

Json simulation_json(const SimulationResult& r) {
  const AttentionProblem& p = r.problem;
  const Counts& c = r.total;
  Json by_tensor = Json::object();
  for (Tensor t : kAllTensors)
    if (c.touches(t)) by_tensor[std::string(tensor_key(t))] = {{"read_bytes", c[t].read_bytes}, {"write_bytes", c[t].write_bytes}};
  Json out = {
      {"gpu", {{"name", r.gpu.name}, {"display_name", r.gpu.display_name}, {"sm_count", r.gpu.sm_count},
               {"sram_bytes_per_sm", r.sram_bytes_per_sm}, {"sram_bytes_per_block", r.sram_bytes_per_block},
               {"l2_bytes", r.gpu.l2_bytes}, {"hbm_bandwidth_gbps", r.gpu.hbm_bandwidth_gbps},
               {"tensor_tflops", r.gpu.tensor_tflops}, {"non_matmul_tflops", r.gpu.non_matmul_tflops}}},
      {"problem", problem_json(p)},
      {"algorithm", r.algo->name()},
      {"blocks", {{"Br", r.blocks.blocks.Br}, {"Bc", r.blocks.blocks.Bc}, {"Tr", r.Tr}, {"Tc", r.Tc},
                  {"M_elements", r.blocks.M_elements}, {"origin", r.blocks.origin}, {"note", r.blocks.note}}},
      {"sram_working_set_bytes", r.blocks.working_set_bytes},
      {"hbm", {{"read_bytes", c.hbm_read_bytes()}, {"write_bytes", c.hbm_write_bytes()}, {"accesses", c.accesses()},
               {"by_tensor", by_tensor}}},
      {"flops", {{"matmul", c.matmul_flops}, {"non_matmul", c.non_matmul_flops}}},
      {"sram", {{"write_bytes", c.sram_write_bytes}, {"read_bytes", c.sram_read_bytes}}},
      {"bound", {{"expression", r.bound.expression}, {"kind", r.bound.kind}, {"value", r.bound.value}, {"ratio", r.bound.ratio}}},
      {"numerics", {{"checked", r.numerics.checked}, {"mode", r.numerics.mode}, {"reason", r.numerics.reason},
                    {"precision", r.numerics.precision}, {"rows_checked", r.numerics.rows_checked},
                    {"finite", r.numerics.finite},
                    {"max_abs_error_vs_reference", r.numerics.checked ? number_or_null(r.numerics.max_abs_error) : Json(nullptr)}}},
      {"time", engine_time_json(r)},
      {"l2", l2_json(r.engine, r.gpu)},
      {"dram", dram_json(r.engine)},
      {"steps_per_head", r.per_instance.steps},
  };
  OnChipCounts on_chip;  // the pass's kernels together, busy over their summed time
  double kernels_s = 0, clock_mhz = r.engine.kernels.empty() ? 0 : r.engine.kernels.front().sm_clock_mhz;
  for (const KernelTiming& k : r.engine.kernels) {
    on_chip += k.on_chip, kernels_s += k.time_s;
    if (k.sm_clock_mhz != clock_mhz) clock_mhz = 0;  // kernels at different clocks: null
  }
  out["on_chip"] = on_chip_json(on_chip, pipe_busy(r.engine.kernels, kernels_s, r.gpu), clock_mhz);
  if (p.kv_splits > 0) out["blocks"]["splits"] = r.algo->grid(p, r.blocks.blocks).splits;
  if (!r.split_candidates.empty()) {
    Json tried = Json::array();
    for (const auto& c : r.split_candidates) tried.push_back({{"splits", c.splits}, {"predicted_s", c.predicted_s}});
    out["blocks"]["splits_auto"] = tried;
  }
  if (r.algo->heads_per_instance(p) > 1) out["instances"] = {{"count", r.algo->instances(p)}, {"what", r.algo->instance_name(p)}};
  if (r.numerics.recomputed_rows > 0) out["numerics"]["recomputed_rows"] = r.numerics.recomputed_rows;
  if (decoding(p)) {
    const NonMatmulOps ops = r.algo->non_matmul_ops(p, r.blocks.blocks);
    const std::int64_t n = r.algo->instances(p);
    out["non_matmul_ops"] = {{"exponentials", n * ops.exponentials}, {"rescaled_elements", n * ops.rescaled_elements},
                             {"max_updates", n * ops.max_updates}, {"kernels", ops.kernels}, {"note", ops.note}};
  }
  // Backward rooms only (forward JSON reads as before): the pass, what the forward keeps for it, and
  // what the numerics compared.
  if (r.algo->pass() != Pass::forward) {
    out["pass"] = to_string(r.algo->pass());
    if (const auto kept = r.algo->forward_state(p))
      out["forward_state"] = {{"tensors", kept->tensors}, {"bytes_per_head", kept->bytes_per_head},
                              {"bytes", kept->bytes_per_head * p.instances()},
                              {"extra_bytes_per_head", kept->extra_bytes_per_head}};
    out["numerics"]["compared"] = r.numerics.compared;
  }
  if (r.mask)
    out["block_mask"] = {{"spec", r.mask->spec}, {"kept_pairs", r.mask->kept_pairs}, {"pairs", r.mask->pairs},
                         {"density", r.mask->density},
                         {"dense_hbm_bytes", r.mask->dense_total.hbm_bytes()}};
  if (const std::optional<Pipeline> pipe = r.algo->pipeline(p, r.blocks.blocks)) {
    out["blocks"]["stages"] = pipe->stages;
    out["blocks"]["consumer_warpgroups"] = pipe->consumer_warpgroups;
  }
  return out;
}

// [SECTION] bounds

namespace {

std::string range_text(const BoundsRow& row) {
  if (row.axis == SweepAxis::s) return fmt::format("{:.3g}..{:.3g}", row.points.front().s, row.points.back().s);
  auto value = [&](const BoundsPoint& pt) {
    return row.axis == SweepAxis::N ? pt.N : row.axis == SweepAxis::d ? pt.d : pt.M;
  };
  return fmt::format("{}..{}", value(row.points.front()), value(row.points.back()));
}

}  // namespace

void print_bounds(std::ostream& out, std::span<const BoundsRow> rows, const BoundsConfig& config) {
  fmt::print(out, "IO-complexity check: counted HBM accesses (elements, one head, {}{}) against N, d and M\n",
             to_string(config.dtype), config.causal ? ", causal" : "");
  fmt::print(out, "Fixed values: N = {}, d = {}, M = {} elements; blocks follow the paper's rule for each M.\n\n",
             config.base_N, config.base_d, config.base_M);
  std::size_t name_width = 9;  // "algorithm"; wider for "flash1 backward"
  for (const BoundsRow& row : rows) name_width = std::max(name_width, to_string(row.algo).size());
  fmt::print(out, "  {:<{}} {:<5} {:<14} {:>8} {:>9} {:<6} {:<13} {:<20} {:<15}\n", "algorithm", name_width, "sweep", "range",
             "fitted", "expected", "", "closed form", "bound", "count / bound");
  bool all_ok = true;
  for (const BoundsRow& row : rows) {
    const bool ok = row.exponent_ok && row.exact_ok;
    all_ok = all_ok && ok;
    fmt::print(out, "  {:<{}} {:<5} {:<14} {:>8.3f} {:>9.0f} {:<6} {:<13} {:<20} {:.3g}..{:.3g}\n", to_string(row.algo),
               name_width, to_string(row.axis), range_text(row), row.fitted, row.expected, row.exponent_ok ? "✓" : "✗",
               row.exact_ok ? "= counted ✓" : "differs ✗", row.bound_expression, row.ratio_min, row.ratio_max);
  }
  fmt::print(out, "\nverdict: {} (exponents within {} of the expected; every count equal to its closed form)\n",
             all_ok ? "PASS" : "FAIL", config.tolerance);
  std::vector<Algo> tiled;  // the rooms whose bound is the paper's N²d²/M, in the rows' order
  for (const BoundsRow& row : rows)
    if (row.bound_expression == "N^2 d^2 / M" && std::find(tiled.begin(), tiled.end(), row.algo) == tiled.end())
      tiled.push_back(row.algo);
  if (!tiled.empty())
    fmt::print(out, "Counts are Θ of their bound where count/bound stays within a constant range; for {}\n"
                    "N²d²/M is also the lower bound Ω for M in [d, Nd] (Proposition 3).\n", names_of(tiled));
  else
    fmt::print(out, "Counts are Θ of their bound where count/bound stays within a constant range.\n");
  if (std::any_of(rows.begin(), rows.end(), [](const BoundsRow& r) { return r.axis == SweepAxis::s; }))
    fmt::print(out, "s: the density of a random block mask (kept pairs over Tr·Tc) at the fixed N, d and M, against\n"
                    "Proposition 4's Θ(N d + N² d² s / M); the exponent in s is 1 where the N² d² s / M term dominates.\n");
}

Json bounds_json(std::span<const BoundsRow> rows, const BoundsConfig& config) {
  Json out = {{"tolerance", config.tolerance}, {"dtype", to_string(config.dtype)}, {"causal", config.causal},
              {"fixed", {{"N", config.base_N}, {"d", config.base_d}, {"M", config.base_M}}}, {"rows", Json::array()}};
  bool all_ok = true;
  for (const BoundsRow& row : rows) {
    Json points = Json::array();
    for (const BoundsPoint& pt : row.points)
      points.push_back({{"N", pt.N}, {"d", pt.d}, {"M", pt.M}, {"s", pt.s}, {"Br", pt.blocks.Br}, {"Bc", pt.blocks.Bc},
                        {"accesses", pt.accesses}, {"closed_form_accesses", pt.closed_form_accesses},
                        {"bound_value", pt.bound_value}, {"ratio", pt.ratio}});
    all_ok = all_ok && row.exponent_ok && row.exact_ok;
    out["rows"].push_back({{"algorithm", row.algo->name()}, {"pass", to_string(row.algo->pass())},
                           {"sweep", to_string(row.axis)},
                           {"fitted_exponent", row.fitted}, {"expected_exponent", row.expected},
                           {"exponent_ok", row.exponent_ok}, {"exact_ok", row.exact_ok},
                           {"bound", row.bound_expression}, {"ratio_min", row.ratio_min}, {"ratio_max", row.ratio_max},
                           {"points", points}});
  }
  out["verdict"] = all_ok ? "pass" : "fail";
  return out;
}

// One line per point: bounds_json's rows flattened, each row's fields (its points left out) and then
// its point's, so the two outputs carry the same columns by construction.
std::string bounds_csv(std::span<const BoundsRow> rows, const BoundsConfig& config) {
  auto cell = [](const Json& v) {
    if (v.is_string()) {
      const std::string text = v.get<std::string>();
      return text.find_first_of(",\"\n ") == std::string::npos ? text : v.dump();  // JSON's quoting is CSV's for these
    }
    if (v.is_boolean()) return std::string(v.get<bool>() ? "1" : "0");
    if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
    return v.dump();
  };
  const Json json = bounds_json(rows, config);
  std::string out;
  for (const Json& row : json["rows"])
    for (const Json& point : row["points"]) {
      std::vector<std::string> names, cells;
      for (const auto& [key, v] : row.items())
        if (key != "points") names.push_back(key), cells.push_back(cell(v));
      for (const auto& [key, v] : point.items()) names.push_back(key), cells.push_back(cell(v));
      if (out.empty()) out = fmt::format("{}\n", fmt::join(names, ","));
      out += fmt::format("{}\n", fmt::join(cells, ","));
    }
  return out;
}

// [SECTION] presets

void print_presets(std::ostream& out, std::span<const GpuSpec> presets) {
  for (const GpuSpec& gpu : presets) {
    fmt::print(out, "{} — {}\n", gpu.name, gpu.display_name);
    for (const Quantity& q : gpu.quantities)
      fmt::print(out, "  {:<33} {:>11} {:<18} {}\n", q.key,
                 q.value == std::floor(q.value) ? format_count(q.value) : fmt::format("{:g}", q.value), q.unit, q.source);
    fmt::print(out, "\n");
  }
}

Json presets_json(std::span<const GpuSpec> presets) {
  Json out = Json::array();
  for (const GpuSpec& gpu : presets) {
    Json numbers = Json::object();
    for (const Quantity& q : gpu.quantities) numbers[q.key] = {{"value", q.value}, {"unit", q.unit}, {"source", q.source}};
    out.push_back({{"name", gpu.name}, {"display_name", gpu.display_name}, {"numbers", numbers}});
  }
  return out;
}

}  // namespace hbmlab
