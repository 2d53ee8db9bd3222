// The hbmlab command line.
//
// [SECTION] Options that only some rooms take
// [SECTION] Shared options
// [SECTION] simulate
// [SECTION] bounds
// [SECTION] sweep
// [SECTION] presets, gui, measure and the default action
// [SECTION] run_cli
#include "sim/cli/cli.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <span>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <unistd.h>

#include "sim/algo/algorithm.hpp"
#include "sim/algo/block_sparse/masks.hpp"
#include "sim/bounds/sweep.hpp"
#include "sim/common/error.hpp"
#include "sim/common/files.hpp"
#include "sim/common/limits.hpp"
#include "sim/common/units.hpp"
#include "sim/engine/replay.hpp"
#include "sim/measure/validate.hpp"
#include "sim/report/report.hpp"
#include "sim/scenario/scenario.hpp"

namespace hbmlab {
namespace {

// `gui --screenshot` without `--frames`: the frame whose picture is saved.
constexpr int kScreenshotFrames = 8;

// [SECTION] Options that only some rooms take

// An option that applies to some of the rooms of a list and not to the others: it is applied to those
// that take it, and the output says which rooms it leaves as they are (`rooms`) or leaves out (`left_out`).
struct OptionNote {
  std::string text;         // "--kv-descending applies to flash2; standard, flash1 and flash3 have no K/V order to reverse"
  std::vector<Algo> rooms;  // the rooms it does not apply to
  bool left_out = false;    // those rooms are not run: their figures beside the others' would mislead
};

// What some rooms take and others do not, in the words of the notes and refusals.
struct RoomTrait {
  std::function<bool(Algo)> takes;
  std::string_view lacks_one, lacks_many;  // "does not take a block mask", "do not take a block mask"
  std::string_view has_one, has_many;      // after the rooms that take it, in a refusal: "(flash1 and flash2 do)"
  std::string_view elsewhere = {};         // where set, the refusal's brackets say this instead
  // An option that changes no problem: what the note adds about the rooms run without it, where the
  // words above leave it unsaid (" and is timed on its reference launch").
  std::string_view instead_one = {}, instead_many = {};
};

const RoomTrait kBlockMask{[](Algo a) { return a->supports().block_mask; }, "does not take a block mask",
                           "do not take a block mask", "does", "do"};
const RoomTrait kSplits{[](Algo a) { return a->supports().splits; }, "does not split the K/V cache",
                        "do not split the K/V cache", "does", "do"};
const RoomTrait kUnifiedMax{[](Algo a) { return a->supports().unified_max; }, "does not take a unified max",
                            "do not take a unified max", "takes one", "take one"};
const RoomTrait kKvOrder{[](Algo a) { return a->has_kv_order(); }, "has no K/V order to reverse",
                         "have no K/V order to reverse", "has one", "have one"};
const RoomTrait kLaunch{[](Algo a) { return a->takes_launch(); },
                        "launches library GEMMs, whose launch hbmlab does not set",
                        "launch library GEMMs, whose launch hbmlab does not set", "", "", "the other rooms take it"};
// flash3's CTA is its warpgroups (one producer, consumers by Br): its blocks set its threads.
const RoomTrait kLaunchThreads{[](Algo a) { return a->takes_launch_threads(); }, "sets its own threads per CTA",
                               "set their own threads per CTA", "takes it", "take it"};
// The rooms without a kernel in gpu/ are timed on the launch they would have without the option, as
// each room's report says ("launch    the reference launch"): their traffic is the same either way,
// and a CSV row has no launch column, so the note says it too.
const RoomTrait kHbmlabKernel{[](Algo a) { return a->has_hbmlab_kernel(); }, "has no CUDA kernel in gpu/",
                              "have no CUDA kernel in gpu/", "has one", "have one", {},
                              " and is timed on its reference launch", " and are timed on their reference launch"};

// "64 and 128": the d's some kernel of gpu/ is compiled for.
std::string kernel_head_dims() {
  std::vector<KernelTile> tiles;
  for (Pass pass : {Pass::forward, Pass::backward})
    for (Algo a : algorithms(pass)) tiles.insert(tiles.end(), a->hbmlab_kernel_tiles().begin(), a->hbmlab_kernel_tiles().end());
  std::sort(tiles.begin(), tiles.end(), [](const KernelTile& a, const KernelTile& b) { return a.d < b.d; });
  return compiled_head_dims(tiles);
}

std::string display_names(std::span<const Algo> list);

// Whether --hbmlab-kernels can time a room's kernel on this problem: one compiled for its dtype, d and
// shape (NQ < N, HKV < H, a block mask: sim/algo/kernel_tiles.hpp) whose row of S, if it keeps one,
// one CTA of `cta_bytes` holds, and without blocks given, a compiled tile shape that CTA holds.
bool runs_hbmlab_kernel(Algo a, const AttentionProblem& p, std::int64_t cta_bytes, bool blocks_given) {
  if (!a->has_hbmlab_kernel() || a->hbmlab_kernel_miss(p, cta_bytes)) return false;
  return blocks_given || a->hbmlab_kernel_blocks(p, cta_bytes).has_value();
}

// --hbmlab-kernels where a room's kernel cannot run: none compiled for the problem's dtype, d, NQ < N,
// HKV < H or block mask (the first of these that applies), its row of S does not fit one CTA
// (standard at N = 65536), or none of its tile shapes at d fits one CTA (an A100's 163 KiB). That room is timed on its reference launch, as a room without a kernel is;
// where no room of the list can run one, the refusal says why. The trait's words are the strings
// beside it.
struct HbmlabKernelAt {
  std::string lacks_one, lacks_many, elsewhere;
  RoomTrait trait = kHbmlabKernel;
  HbmlabKernelAt(const AttentionProblem& p, std::span<const Algo> rooms, std::int64_t cta_bytes, bool blocks_given) {
    auto runs = [p, cta_bytes, blocks_given](Algo a) { return runs_hbmlab_kernel(a, p, cta_bytes, blocks_given); };
    if (std::all_of(rooms.begin(), rooms.end(), [&](Algo a) { return !a->has_hbmlab_kernel() || runs(a); })) return;
    // Why each room of the list with a kernel cannot run it, each reason once with its rooms.
    struct Why {
      std::string text;
      std::optional<KernelMiss::What> what;  // none: no tile shape fits a CTA, or no kernel at all
      std::vector<Algo> rooms;
    };
    std::vector<Why> whys;
    std::vector<Algo> without;  // the rooms with no kernel at all: a reason of their own beside the others
    for (Algo a : rooms) {
      if (!a->has_hbmlab_kernel()) without.push_back(a);
      if (!a->has_hbmlab_kernel() || runs(a)) continue;
      const std::optional<KernelMiss> miss = a->hbmlab_kernel_miss(p, cta_bytes);
      const std::string text = miss ? miss->lacks
                                    : fmt::format("at d = {} whose tiles fit the {} B one CTA may use", p.head_dim, cta_bytes);
      const auto it = std::find_if(whys.begin(), whys.end(), [&](const Why& w) { return w.text == text; });
      if (it != whys.end()) it->rooms.push_back(a);
      else whys.push_back({text, miss ? std::optional(miss->what) : std::nullopt, {a}});
    }
    if (!without.empty()) whys.push_back({"at all", std::nullopt, without});
    std::string why;  // "for NQ < N"; with several: "for a block mask (flash1) or at all (flash1 backward)"
    for (const Why& w : whys)
      why += whys.size() == 1 ? w.text : fmt::format("{}{} ({})", why.empty() ? "" : " or ", w.text, display_names(w.rooms));
    lacks_one = "has no CUDA kernel in gpu/ " + why;
    lacks_many = "have no CUDA kernel in gpu/ " + why;
    // The refusal's brackets: the kernels that run this problem where some do, else what they are compiled for.
    bool somewhere = false;
    for (Pass pass : {Pass::forward, Pass::backward})
      for (Algo a : algorithms(pass)) somewhere = somewhere || runs(a);
    using W = KernelMiss::What;
    const std::optional<W> what = whys.size() == 1 ? whys.front().what : std::nullopt;
    if (whys.size() == 1 && !what) elsewhere = "their compiled tile shapes are in sim/algo/kernel_tiles.hpp";
    else if (what == W::dtype) elsewhere = "hbmlab's kernels are compiled for fp16 and bf16";
    else if (what == W::head_dim) elsewhere = fmt::format("hbmlab's kernels are compiled for d = {}", kernel_head_dims());
    else if (!somewhere) elsewhere = "sim/algo/kernel_tiles.hpp says what each kernel takes";
    trait = RoomTrait{runs, lacks_one, lacks_many, "has one", "have one", elsewhere, kHbmlabKernel.instead_one,
                      kHbmlabKernel.instead_many};
  }
  HbmlabKernelAt(const HbmlabKernelAt&) = delete;
};

// An option given that only some rooms of a list may take.
struct RoomOption {
  std::vector<std::string_view> names;  // one option, or several of one kind (--launch-*), joined in the note
  const RoomTrait* trait;
  bool changes_problem;  // --block-mask, --splits, --unified-max: the rooms that do not take it are left out
};

// The --launch-* options given: --launch-threads by the rooms that take a thread count, the others
// by the rooms that take a launch.
void add_launch_options(std::vector<RoomOption>& given, std::span<const std::string_view> options) {
  std::vector<std::string_view> others;
  for (std::string_view option : options)
    if (option == "--launch-threads") given.push_back({{option}, &kLaunchThreads, false});
    else others.push_back(option);
  if (!others.empty()) given.push_back({others, &kLaunch, false});
}

// The options of a problem that change it for the rooms that take them (from flags or a scenario).
std::vector<RoomOption> problem_options(const AttentionProblem& p, bool auto_splits) {
  std::vector<RoomOption> given;
  if (p.block_mask) given.push_back({{"--block-mask"}, &kBlockMask, true});
  if (p.kv_splits > 0 || auto_splits) given.push_back({{"--splits"}, &kSplits, true});
  if (p.unified_max) given.push_back({{"--unified-max"}, &kUnifiedMax, true});
  return given;
}

// "standard, flash1 and flash2 backward": rooms by their display names, as the report heads them.
std::string display_names(std::span<const Algo> list) {
  std::string text;
  for (std::size_t k = 0; k < list.size(); ++k)
    text += fmt::format("{}{}", k == 0 ? "" : k + 1 == list.size() ? " and " : ", ", to_string(list[k]));
  return text;
}

// The rule of every command that runs a list of rooms (simulate, sweep, bounds): an option that no
// room of the list takes is refused, naming it; one that some take is applied to those, and a note
// names the others. An option that changes the problem leaves those others out of `rooms` (an
// unmasked, unsplit or running-max figure beside the others would read as theirs); one that does not
// (--kv-descending, --launch-*, bounds' --densities) runs them as they are.
std::vector<OptionNote> narrow_rooms(std::span<const RoomOption> given, std::vector<Algo>& rooms) {
  std::vector<OptionNote> notes;
  for (bool changes_problem : {true, false})  // the rooms left out first: the other notes name the rooms run
    for (const RoomOption& o : given) {
      if (o.changes_problem != changes_problem) continue;
      const RoomTrait& t = *o.trait;
      std::vector<Algo> taking, not_taking;
      for (Algo a : rooms) (t.takes(a) ? taking : not_taking).push_back(a);
      const bool one = not_taking.size() == 1;
      if (taking.empty()) {
        std::vector<Algo> anywhere;  // the rooms of either pass that take it, each name once: "(flash2 has one)"
        for (Pass pass : {Pass::forward, Pass::backward})
          for (Algo a : algorithms(pass))
            if (t.takes(a) && std::none_of(anywhere.begin(), anywhere.end(), [&](Algo b) { return b->name() == a->name(); }))
              anywhere.push_back(a);
        // Words that end in brackets of their own (several reasons, each with its rooms) are followed by
        // "; " rather than a second pair, so that the refusal reads as one sentence.
        const std::string_view lacks = one ? t.lacks_one : t.lacks_many;
        const std::string where = !t.elsewhere.empty() ? std::string(t.elsewhere)
                                                       : fmt::format("{} {}", names_of(anywhere), anywhere.size() == 1 ? t.has_one : t.has_many);
        fail_input("{}: {} {}{}", o.names.front(), display_names(not_taking), lacks,
                   lacks.ends_with(')') ? "; " + where : " (" + where + ")");
      }
      if (not_taking.empty()) continue;
      std::string names;
      for (std::string_view name : o.names) names += fmt::format("{}{}", names.empty() ? "" : " and ", name);
      notes.push_back({fmt::format("{} {} to {}; {} {}{}", names, o.names.size() > 1 ? "apply" : "applies",
                                   display_names(taking), display_names(not_taking), one ? t.lacks_one : t.lacks_many,
                                   o.changes_problem ? (one ? " and is left out" : " and are left out")
                                                     : one ? t.instead_one : t.instead_many),
                       not_taking, o.changes_problem});
      if (o.changes_problem) rooms = taking;
    }
  return notes;
}

// `all` as every command with a problem reads it: the rooms of the problem's kind (self-attention, or
// decoding when --query-len, --kv-heads, --splits or --unified-max makes it one), before an option that
// only some of them take narrows the list; narrow_rooms() then leaves those out with a note, rather
// than silently.
std::vector<Algo> all_rooms_before_options(const AttentionProblem& p, bool auto_splits) {
  AttentionProblem shape = p;
  shape.kv_splits = 0;
  shape.unified_max.reset();
  const std::vector<Algo> plain = all_rooms_for(shape);
  const bool decoding_by_option = p.kv_splits > 0 || auto_splits || p.unified_max;
  std::vector<Algo> out;
  for (Algo a : algorithms())
    if (std::find(plain.begin(), plain.end(), a) != plain.end() || (decoding_by_option && a->supports().splits))
      out.push_back(a);
  return out;
}

// [SECTION] Shared options

// The items of a comma list; an empty one (`flash2,`, `64,,128`) is refused naming the option.
std::vector<std::string> split_list(const std::string& text, std::string_view option, std::string_view example) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (items.back().empty())
      fail_input("{}: '{}' has an empty item (expected a list such as {})", option, text, example);
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

std::vector<std::int64_t> parse_int_list(const std::string& text, std::string_view option) {
  std::vector<std::int64_t> values;
  for (const std::string& item : split_list(text, option, "64,128,256")) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size() || v <= 0)
      fail_input("{}: '{}' is not a positive integer (expected a list such as 64,128,256)", option, item);
    values.push_back(v);
  }
  if (values.empty()) fail_input("{}: expected a list such as 64,128,256", option);
  return values;
}

// SRAM bytes per SM within what the model takes (sim/common/limits.hpp).
std::int64_t checked_sram_bytes(std::int64_t bytes, std::string_view option) {
  if (bytes <= 0 || bytes > kMaxSramBytes)
    fail_input("{}: {} is outside 1 to {} bytes (1 GiB; a GPU has a few hundred KiB of SRAM per SM)", option, bytes,
               kMaxSramBytes);
  return bytes;
}

// A figure of a CSV row: empty where JSON writes null (NaN: not computed, such as the time of blocks
// that do not fit).
std::string csv_number(double x) { return std::isfinite(x) ? fmt::format("{:.6g}", x) : std::string(); }

// "standard, flash1, flash2, a comma list, or all": what --algo takes, from the registry.
std::string algo_choices() { return algo_names() + ", a comma list, or all"; }

// "flash1/flash2": the forward rooms that take a shape, for the help of its option.
std::string rooms_taking(bool ShapeSupport::*shape) { return names_of(rooms_supporting(shape), "/", "/"); }

// "flash2": the forward rooms for which --kv-descending means something, for its help.
std::string kv_order_rooms() {
  std::vector<Algo> rooms;
  for (Algo a : algorithms())
    if (a->has_kv_order()) rooms.push_back(a);
  return names_of(rooms, "/", "/");
}

// `all`: the self-attention rooms (a command with a problem reads it by all_rooms_before_options()).
std::vector<Algo> parse_algos(const std::string& text) {
  if (text == "all") return all_rooms_for(AttentionProblem(1, 1, 1024, 64));
  std::vector<Algo> algos;
  for (const std::string& item : split_list(text, "--algo", "flash1,flash2")) {
    const auto algo = parse_algo(item);
    if (!algo) fail_input("--algo: unknown algorithm '{}' (expected {})", item, algo_choices());
    algos.push_back(*algo);
  }
  if (algos.empty()) fail_input("--algo: expected {}", algo_choices());
  return algos;
}

// Options that describe a problem on a GPU; a --scenario gives the defaults, flags override.
struct ProblemFlags {
  std::string scenario, gpu, algo, dtype, pass, block_mask, splits;
  std::int64_t batch = 0, heads = 0, seq_len = 0, head_dim = 0, query_len = 0, kv_heads = 0;
  double unified_max = 0;
  bool causal = false;
  CLI::Option *o_scenario{}, *o_gpu{}, *o_algo{}, *o_dtype{}, *o_batch{}, *o_heads{}, *o_seq_len{}, *o_head_dim{}, *o_causal{};
  CLI::Option *o_pass{}, *o_block_mask{}, *o_query_len{}, *o_kv_heads{}, *o_splits{}, *o_unified_max{};

  void add_to(CLI::App& cmd) {
    o_scenario = cmd.add_option("--scenario", scenario, "workload or lesson: a .toml path or an embedded name, such as "
                                                       "gpt2-medium or lessons/03-block-size-against-sram [none]")
                     ->type_name("FILE|NAME");
    o_gpu = cmd.add_option("--gpu", gpu, "GPU preset (hbmlab presets) or a .toml path [a100-40gb]")->type_name("NAME|FILE");
    o_algo = cmd.add_option("--algo", algo, fmt::format("{} [{}]", algo_choices(), default_algo()->name()))->type_name("LIST");
    o_batch = cmd.add_option("--batch", batch, "batch size B [1]");
    o_heads = cmd.add_option("--heads", heads, "heads H [1]");
    o_seq_len = cmd.add_option("--seq-len", seq_len, "sequence length N [1024]");
    o_head_dim = cmd.add_option("--head-dim", head_dim, "head dimension d [64]");
    o_dtype = cmd.add_option("--dtype", dtype, "fp16, bf16 or fp32 [fp16]");
    o_causal = cmd.add_flag("--causal", causal, "causal mask: skip block pairs above the diagonal");
    o_pass = cmd.add_option("--pass", pass, "forward, backward, or both (forward then backward) [forward]");
    o_block_mask = cmd.add_option("--block-mask", block_mask,
                                  rooms_taking(&ShapeSupport::block_mask) +
                                      ": keep only some block pairs: local:W, butterfly, random:DENSITY[:SEED], "
                                      "or a file of Tr lines of Tc 0/1 characters [every pair]")
                       ->type_name("SPEC");
    o_query_len = cmd.add_option("--query-len", query_len, "NQ query rows, the last NQ positions (decoding) [N]");
    o_kv_heads = cmd.add_option("--kv-heads", kv_heads, "HKV K/V heads shared by H/HKV query heads (GQA, MQA) [H]");
    o_splits = cmd.add_option("--splits", splits,
                              rooms_taking(&ShapeSupport::splits) +
                                  ": K/V splits per (batch, K/V head), or auto (simulate): the count the timing engine "
                                  "predicts fastest [fill every SM once]");
    o_unified_max = cmd.add_option("--unified-max", unified_max,
                                   rooms_taking(&ShapeSupport::unified_max) +
                                       ": the unified max φ, in the scores' natural units [from the scores' statistics]");
  }

  bool auto_splits() const { return *o_splits && splits == "auto"; }
  bool all() const { return *o_algo && algo == "all"; }

  // auto_allowed: only simulate searches the split counts (--splits auto).
  Scenario resolve(bool auto_allowed = false) const {
    Scenario s = *o_scenario ? load_scenario(scenario) : Scenario{};
    if (*o_gpu) s.gpu = gpu;
    if (*o_algo && algo != "all") s.algorithms = parse_algos(algo);
    if (*o_batch) s.problem.batch = batch;
    if (*o_heads) s.problem.heads = heads;
    if (*o_seq_len) s.problem.seq_len = seq_len;
    if (*o_head_dim) s.problem.head_dim = head_dim;
    if (*o_causal) s.problem.causal = causal;
    if (*o_dtype) {
      const auto d = parse_dtype(dtype);
      if (!d) fail_input("--dtype: unknown dtype '{}' (expected fp16, bf16 or fp32)", dtype);
      s.problem.dtype = *d;
    }
    auto positive = [](std::int64_t v, std::string_view option) {
      if (v <= 0) fail_input("{}: must be a positive integer, got {}", option, v);
      return v;
    };
    if (*o_pass) s.passes = parse_passes(pass, "--pass");
    if (*o_query_len) s.problem.query_len = positive(query_len, "--query-len");
    if (*o_kv_heads) s.problem.kv_heads = positive(kv_heads, "--kv-heads");
    if (auto_splits()) {
      if (!auto_allowed) fail_input("--splits: auto is for simulate; give a positive integer");
    } else if (*o_splits) {
      std::int64_t v = 0;
      const auto [end, ec] = std::from_chars(splits.data(), splits.data() + splits.size(), v);
      if (ec != std::errc{} || end != splits.data() + splits.size() || v <= 0)
        fail_input("--splits: must be a positive integer or auto, got '{}'", splits);
      s.problem.kv_splits = v;
    }
    if (*o_unified_max) s.problem.unified_max = unified_max;
    if (*o_block_mask) s.problem.block_mask = parse_block_mask(block_mask);
    s.problem.validate();
    if (all()) s.algorithms = all_rooms_before_options(s.problem, auto_splits());  // which rooms depends on the problem
    return s;
  }
};

// --launch-threads, --launch-registers, --launch-smem-bytes: the main kernel's launch (simulate, sweep).
struct LaunchFlags {
  std::int64_t threads = 0, registers = 0, smem_bytes = 0;
  CLI::Option *o_threads{}, *o_registers{}, *o_smem_bytes{};

  void add_to(CLI::App& cmd) {
    o_threads = cmd.add_option("--launch-threads", threads,
                               "threads per CTA of the room's main kernel (flash3's are its warpgroups: --block-rows) "
                               "[the room's launch]");
    o_registers = cmd.add_option("--launch-registers", registers,
                                 "registers per thread of the main kernel, limits CTAs per SM [not limiting]");
    o_smem_bytes = cmd.add_option("--launch-smem-bytes", smem_bytes, "shared memory per CTA of the main kernel [the SRAM working set]");
  }

  // The options given, in the order of their help.
  std::vector<std::string_view> given() const {
    std::vector<std::string_view> names;
    if (o_threads->count() > 0) names.push_back("--launch-threads");
    if (o_registers->count() > 0) names.push_back("--launch-registers");
    if (o_smem_bytes->count() > 0) names.push_back("--launch-smem-bytes");
    return names;
  }

  // The launch given, checked here so that an error names the option rather than the GPU preset's
  // number it exceeds; cta_smem_bytes: the shared memory one CTA may use.
  LaunchOverride checked(const GpuSpec& gpu, std::int64_t cta_smem_bytes) const {
    auto positive = [](std::int64_t v, std::string_view option) {
      if (v <= 0) fail_input("{}: must be a positive integer, got {}", option, v);
      return v;
    };
    LaunchOverride launch;
    if (*o_threads) launch.threads_per_cta = positive(threads, "--launch-threads");
    if (*o_registers) launch.registers_per_thread = positive(registers, "--launch-registers");
    if (*o_smem_bytes) launch.smem_bytes_per_cta = positive(smem_bytes, "--launch-smem-bytes");
    if (launch.threads_per_cta && *launch.threads_per_cta > gpu.max_threads_per_sm)
      fail_input("--launch-threads: {} threads per CTA are more than an SM of {} holds ({})", *launch.threads_per_cta,
                 gpu.name, gpu.max_threads_per_sm);
    // CUDA encodes at most 255 registers per thread in an instruction (every architecture since sm_30).
    constexpr std::int64_t kMaxRegistersPerThread = 255;
    if (launch.registers_per_thread && *launch.registers_per_thread > kMaxRegistersPerThread)
      fail_input("--launch-registers: a thread holds at most {} registers, got {}", kMaxRegistersPerThread,
                 *launch.registers_per_thread);
    if (launch.smem_bytes_per_cta && *launch.smem_bytes_per_cta > cta_smem_bytes)
      fail_input("--launch-smem-bytes: {} B per CTA are more than one CTA may use on {} ({} B)",
                 *launch.smem_bytes_per_cta, gpu.name, cta_smem_bytes);
    return launch;
  }
};

// A CTA of a room's plan that the GPU cannot hold (its threads, shared memory or registers): the
// launch options were checked (LaunchFlags::checked), so the blocks or the launch made it; named by
// the option given that changes them (blocks_option: --block-rows or --block-cols where the user set
// the blocks; empty where the room chose them, and the preset's key leads) rather than by the
// preset's number alone (the SRAM per CTA is named by what gave it, `sram_source`: the preset's key,
// --sram-bytes or a scenario's line). Other errors go on as they are.
[[noreturn]] void name_cta_option(const InputError& e, const GpuSpec& gpu, const LaunchOverride& l,
                                  std::string_view blocks_option, std::string_view sram_source) {
  const std::string_view what = e.what();
  if (!(what.starts_with(gpu.origin + ": numbers.") || what.starts_with(fmt::format("{}: ", sram_source))) ||
      what.find("cannot hold one") == what.npos)
    throw e;
  const bool registers = what.find("numbers.registers_per_sm") != what.npos;
  if (registers && l.registers_per_thread) fail_input("--launch-registers: {}; fewer registers per thread fit", what);
  if (registers && l.threads_per_cta) fail_input("--launch-threads: {}; fewer threads per CTA fit", what);
  if (blocks_option.empty()) fail_input("{}; smaller blocks (--block-rows, --block-cols) fit", what);
  fail_input("{}: {}; smaller blocks (--block-rows, --block-cols) fit", blocks_option, what);
}

// A progress bar on stderr, only when stderr is a terminal.
class ProgressBar {
public:
  ProgressBar(std::ostream& err, std::string label) : err_(err), label_(std::move(label)), on_(::isatty(2) == 1) {}
  void operator()(std::size_t done, std::size_t total) {
    if (!on_) return;
    const int width = 40, filled = static_cast<int>(width * done / std::max<std::size_t>(total, 1));
    if (filled == last_ && done != total) return;
    last_ = filled;
    err_ << fmt::format("\r{} [{}{}] {}/{}", label_, std::string(filled, '#'), std::string(width - filled, '.'), done, total)
         << (done == total ? "\n" : "") << std::flush;
  }

private:
  std::ostream& err_;
  std::string label_;
  bool on_;
  int last_ = -1;
};

// [SECTION] simulate

struct SimulateFlags {
  ProblemFlags problem;
  std::int64_t block_rows = 0, block_cols = 0, sram_bytes = 0;
  std::string numerics = "auto";
  std::int64_t seed = 1;  // signed, so that "-1" is refused rather than wrapped to 2^64 − 1
  bool json = false, csv = false, steps = false, counts_only = false, no_l2 = false, kv_descending = false,
       hbmlab_kernels = false;
  std::int64_t steps_limit = 200;
  std::string timeline, mask_out;
  LaunchFlags launch;
  CLI::Option *o_block_rows{}, *o_block_cols{}, *o_sram_bytes{};
  CLI::Option *o_numerics{}, *o_seed{}, *o_steps_limit{};
};

void add_simulate(CLI::App& app, SimulateFlags& f) {
  CLI::App* cmd = app.add_subcommand("simulate", "count HBM traffic of one or more algorithms on one problem");
  f.problem.add_to(*cmd);
  f.o_block_rows = cmd->add_option("--block-rows", f.block_rows, "Br, rows of a Q/O block [paper default]");
  f.o_block_cols = cmd->add_option("--block-cols", f.block_cols, "Bc, rows of a K/V block [paper default]");
  f.o_sram_bytes = cmd->add_option("--sram-bytes", f.sram_bytes, "SRAM bytes per SM (and per CTA) [the GPU's]");
  f.o_numerics = cmd->add_option("--numerics", f.numerics, "check the tiled output against fp64: auto, full, sampled, off [auto]");
  f.o_seed = cmd->add_option("--seed", f.seed, "seed of the random Q, K, V, 0 or more [1]");
  cmd->add_flag("--json", f.json, "print JSON (one object; an array for several algorithms)");
  cmd->add_flag("--csv", f.csv, "print CSV, one row per algorithm");
  cmd->add_flag("--counts-only", f.counts_only, "only the paper's counts and bound: no numerics, no timing engine");
  cmd->add_flag("--steps", f.steps, "also narrate the steps of one (batch, head), in the paper's words");
  f.o_steps_limit = cmd->add_option("--steps-limit", f.steps_limit, "narrate at most this many steps [200]");
  cmd->add_flag("--no-l2", f.no_l2, "turn the L2 off: the paper's model, every counted access reaches HBM");
  cmd->add_option("--mask-out", f.mask_out, "write the block pairs the algorithm visits as a mask file (Tr lines of "
                                            "Tc characters 0/1; --block-mask takes it back)")
      ->type_name("FILE");
  cmd->add_option("--timeline", f.timeline, "write the per-SM timeline and HBM bandwidth as Chrome trace JSON "
                                            "(chrome://tracing, Perfetto) to this file")
      ->type_name("FILE");
  f.launch.add_to(*cmd);
  cmd->add_flag("--kv-descending", f.kv_descending,
                kv_order_rooms() + ": visit K_j, V_j from the last block down, as FlashAttention-2's kernel does");
  cmd->add_flag("--hbmlab-kernels", f.hbmlab_kernels,
                "time hbmlab's own CUDA kernels (gpu/) as written, as `hbmlab validate` does for their records, "
                "instead of the reference launch; without --block-rows/--block-cols each on the tile shape it is "
                "compiled for at d, the one `hbmlab measure` runs by default (or the first compiled one a CTA holds; d = " +
                    kernel_head_dims() + ")");
}

std::string simulation_csv(std::span<const SimulationResult> results) {
  std::string out =
      "algorithm,gpu,batch,heads,seq_len,head_dim,dtype,causal,Br,Bc,Tr,Tc,sram_working_set_bytes,hbm_read_bytes,"
      "hbm_write_bytes,hbm_accesses,matmul_flops,non_matmul_flops,bound,bound_ratio,predicted_s\n";
  for (const SimulationResult& r : results) {
    const AttentionProblem& p = r.problem;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", to_string(r.algo),
                       r.gpu.name, p.batch, p.heads, p.seq_len, p.head_dim, to_string(p.dtype), p.causal ? 1 : 0,
                       r.blocks.blocks.Br, r.blocks.blocks.Bc, r.Tr, r.Tc, r.blocks.working_set_bytes,
                       r.total.hbm_read_bytes(), r.total.hbm_write_bytes(), r.total.accesses(), r.total.matmul_flops,
                       r.total.non_matmul_flops, r.bound.expression, csv_number(r.bound.ratio), csv_number(r.time.predicted_s));
  }
  return out;
}

// An option that would change nothing in this run is refused, naming it, rather than ignored: what
// needs the timing engine under --counts-only, what no room run models, what only text shows. An
// option that some of the rooms take and others do not follows narrow_rooms().
// cta_bytes: the shared memory one CTA may use (the preset's, or --sram-bytes).
std::vector<OptionNote> refuse_ignored(const SimulateFlags& f, const AttentionProblem& p, std::vector<Algo>& rooms,
                                       std::int64_t cta_bytes) {
  const bool numerics_given = f.o_numerics->count() > 0, seed_given = f.o_seed->count() > 0;
  const std::vector<std::string_view> launch_options = f.launch.given();
  if (f.counts_only) {
    const std::pair<bool, std::string_view> engine_options[] = {
        {!f.timeline.empty(), "--timeline"}, {f.hbmlab_kernels, "--hbmlab-kernels"}, {f.kv_descending, "--kv-descending"},
        {f.no_l2, "--no-l2"},                {f.problem.auto_splits(), "--splits auto"}};
    for (const auto& [given, option] : engine_options)
      if (given) fail_input("{}: needs the timing engine, not --counts-only", option);
    for (std::string_view option : launch_options) fail_input("{}: needs the timing engine, not --counts-only", option);
    if (numerics_given && f.numerics != "off") fail_input("--numerics: --counts-only checks no numerics");
    if (seed_given) fail_input("--seed: seeds the numerics check, which --counts-only skips");
  }
  if (seed_given && f.numerics == "off") fail_input("--seed: seeds the numerics check, which --numerics off skips");
  if (f.o_steps_limit->count() > 0 && !f.steps) fail_input("--steps-limit: goes with --steps");
  if (f.steps && (f.json || f.csv)) fail_input("--steps: narrates in the text report, not with {}", f.json ? "--json" : "--csv");

  std::vector<RoomOption> given = problem_options(p, f.problem.auto_splits());
  if (f.kv_descending) given.push_back({{"--kv-descending"}, &kKvOrder, false});
  const HbmlabKernelAt hbmlab_kernel(p, rooms, cta_bytes, *f.o_block_rows || *f.o_block_cols);
  if (f.hbmlab_kernels) given.push_back({{"--hbmlab-kernels"}, &hbmlab_kernel.trait, false});
  add_launch_options(given, launch_options);
  return narrow_rooms(given, rooms);
}

// notes: where an option applies to some of the rooms only (refuse_ignored).
std::vector<SimulationResult> simulate_scenario(const Scenario& s, const SimulateFlags* flags,
                                                std::vector<OptionNote>* notes = nullptr) {
  SimulateRequest request = request_for(s);
  std::vector<Algo> rooms = rooms_of(s);  // less those an option leaves out
  if (flags) {
    if (*flags->o_block_rows) request.block_rows = flags->block_rows;
    if (*flags->o_block_cols) request.block_cols = flags->block_cols;
    if (*flags->o_sram_bytes) {
      request.sram_bytes = checked_sram_bytes(flags->sram_bytes, "--sram-bytes");
      request.sram_source = "--sram-bytes";
    }
    if (flags->seed < 0) fail_input("--seed: must be 0 or more, got {}", flags->seed);
    request.seed = static_cast<std::uint64_t>(flags->seed);
    request.l2_enabled = !flags->no_l2;
    request.counts_only = flags->counts_only;
    const std::vector<OptionNote> option_notes =
        refuse_ignored(*flags, s.problem, rooms, request.sram_bytes.value_or(request.gpu.sram_bytes_per_block));
    if (notes) *notes = option_notes;
    request.record_timeline = !flags->timeline.empty();
    request.launch = flags->launch.checked(request.gpu, request.sram_bytes.value_or(request.gpu.sram_bytes_per_block));
    request.launch.kv_descending = flags->kv_descending;
    request.launch.hbmlab_kernels = flags->hbmlab_kernels;
    request.auto_splits = flags->problem.auto_splits();
    const std::string& n = flags->numerics;
    request.numerics = n == "auto" ? NumericsMode::automatic : n == "full" ? NumericsMode::full
                     : n == "sampled" ? NumericsMode::sampled : n == "off" ? NumericsMode::off
                     : (fail_input("--numerics: unknown mode '{}' (expected auto, full, sampled or off)", n), NumericsMode::off);
  }
  std::vector<SimulationResult> results;
  const LaunchOverride launch = request.launch;
  for (Algo algo : rooms) {
    request.algo = algo;
    // A room that does not take an option runs as it would without it (the notes say so).
    request.launch = launch;
    if (!algo->has_kv_order()) request.launch.kv_descending = false;
    if (!runs_hbmlab_kernel(algo, request.problem, request.sram_bytes.value_or(request.gpu.sram_bytes_per_block),
                            request.block_rows || request.block_cols))
      request.launch.hbmlab_kernels = false;
    if (!algo->takes_launch()) {
      request.launch.registers_per_thread.reset();
      request.launch.smem_bytes_per_cta.reset();
    }
    if (!algo->takes_launch_threads()) request.launch.threads_per_cta.reset();
    try {
      results.push_back(simulate(request));
    } catch (const InputError& e) {
      if (!flags) throw;
      name_cta_option(e, request.gpu, request.launch,
                      *flags->o_block_rows ? "--block-rows" : *flags->o_block_cols ? "--block-cols" : "",
                      request.sram_source);
    }
  }
  return results;
}

// Streams the steps twice (to count them, then to narrate the first `limit`) rather than recording
// them: a long replay keeps nothing in memory.
void print_steps(std::ostream& out, const SimulationResult& r, std::int64_t limit) {
  class Narrator final : public StepSink {
  public:
    Narrator(std::ostream* out, const SimulationResult& r, std::int64_t limit) : out_(out), r_(r), limit_(limit) {}
    void on_step(const Step& step) override {
      if (++count > limit_ || !out_) return;
      running_.on_step(step);
      fmt::print(*out_, "  {:>6}  read {:>9}  written {:>9}  {}\n", count,
                 format_bytes(double(running_.counts().hbm_read_bytes())),
                 format_bytes(double(running_.counts().hbm_write_bytes())), r_.algo->narrate(step));
    }
    std::int64_t count = 0;

  private:
    std::ostream* out_;
    const SimulationResult& r_;
    std::int64_t limit_;
    IoCounter running_;
  };
  check_countable(r.algo, r.problem, r.blocks.blocks);
  Narrator counter(nullptr, r, 0);
  r.algo->emit(r.problem, r.blocks.blocks, counter);
  fmt::print(out, "\nSteps of one (batch, head) for {} ({} in all); HBM bytes read and written so far, then the step:\n",
             to_string(r.algo), format_count(double(counter.count)));
  Narrator narrator(&out, r, limit);
  r.algo->emit(r.problem, r.blocks.blocks, narrator);
  if (counter.count > limit)
    fmt::print(out, "  ... {} more steps (--steps-limit to show more)\n", format_count(double(counter.count - limit)));
}

// Notes (an option some rooms run do not take) go where the output's reader looks: a line of the text
// report, a `notes` list in the JSON objects of the rooms they concern, stderr beside CSV.
int run_simulate(const SimulateFlags& f, std::ostream& out, std::ostream& err) {
  if (f.json && f.csv) fail_input("--csv: choose one of --json and --csv");
  if (f.steps_limit < 0) fail_input("--steps-limit: must be 0 or more, got {}", f.steps_limit);
  const Scenario s = f.problem.resolve(/*auto_allowed=*/true);
  std::vector<OptionNote> notes;
  const std::vector<SimulationResult> results = simulate_scenario(s, &f, &notes);
  if (!f.mask_out.empty()) {
    if (results.size() != 1) fail_input("--mask-out: choose one algorithm (--algo) for a mask file");
    // From the room's own steps: a pair is visited unless the stream skips it.
    const SimulationResult& r = results.front();
    class Skips final : public StepSink {
    public:
      Skips(std::int64_t Tr, std::int64_t Tc) : rows(static_cast<std::size_t>(Tr), std::string(Tc, '1')) {}
      void on_step(const Step& s) override {
        if (s.kind == StepKind::skip) rows[static_cast<std::size_t>(s.i)][static_cast<std::size_t>(s.j)] = '0';
      }
      std::vector<std::string> rows;
    } skips(r.Tr, r.Tc);
    r.algo->emit(r.problem, r.blocks.blocks, skips);
    std::string text;
    for (const std::string& row : skips.rows) text += row + "\n";
    write_output("--mask-out", f.mask_out, text);
  }
  if (!f.timeline.empty()) {
    if (results.size() != 1) fail_input("--timeline: choose one algorithm (--algo) for a timeline");
    write_output("--timeline", f.timeline, timeline_chrome_trace(results.front().engine, results.front().gpu));
  }
  if (f.json) {
    Json all = Json::array();
    for (const SimulationResult& r : results) {
      Json j = simulation_json(r);
      for (const OptionNote& note : notes)
        // A note on rooms left out goes on each room run, as they have no object of their own.
        if (note.left_out || std::find(note.rooms.begin(), note.rooms.end(), r.algo) != note.rooms.end())
          j["notes"].push_back(note.text);
      all.push_back(std::move(j));
    }
    out << (results.size() == 1 ? all.front() : all).dump(2) << "\n";
    return 0;
  }
  for (const OptionNote& note : notes) fmt::print(f.csv ? err : out, "note: {}\n", note.text);
  if (f.csv) {
    out << simulation_csv(results);
    return 0;
  }
  if (!notes.empty()) out << "\n";
  for (const SimulationResult& r : results) {
    print_simulation(out, r);
    if (f.steps) print_steps(out, r, f.steps_limit);
    out << "\n";
  }
  if (results.size() > 1) print_comparison(out, results);
  print_pass_sums(out, results);
  return 0;
}

// [SECTION] bounds

struct BoundsFlags {
  std::string algo = "all", pass = "forward", seq_lens, head_dims, sram_elements, densities, dtype = "fp16";
  std::int64_t base_N = 0, base_d = 0, base_M = 0;
  double tolerance = 0.05;
  bool json = false, csv = false, causal = false;
  CLI::Option *o_base_N{}, *o_base_d{}, *o_base_M{};
};

void add_bounds(CLI::App& app, BoundsFlags& f) {
  CLI::App* cmd = app.add_subcommand("bounds", "sweep N, d and M, fit the exponents of the counted accesses, "
                                               "and check them against the Θ/Ω bounds");
  cmd->add_option("--algo", f.algo, algo_choices() + " [all]")->type_name("LIST");
  cmd->add_option("--pass", f.pass, "forward, backward, or both: the rooms of that pass (Theorem 5 for the "
                                    "backward) [forward]");
  cmd->add_option("--seq-lens", f.seq_lens, "N values of the N sweep [8192,16384,32768,65536]")->type_name("LIST");
  cmd->add_option("--head-dims", f.head_dims, "d values of the d sweep [32,64,128]")->type_name("LIST");
  cmd->add_option("--sram-elements", f.sram_elements, "M values (SRAM in elements) of the M sweep [16384,32768,65536,131072]")->type_name("LIST");
  cmd->add_option("--densities", f.densities, rooms_taking(&ShapeSupport::block_mask) +
                                                  ": block-mask densities s of the s sweep, in (0, 1] [0.125,0.25,0.5,1]")->type_name("LIST");
  f.o_base_N = cmd->add_option("--seq-len", f.base_N, "N held fixed in the d and M sweeps [32768]");
  f.o_base_d = cmd->add_option("--head-dim", f.base_d, "d held fixed in the N and M sweeps [64]");
  f.o_base_M = cmd->add_option("--sram-element-count", f.base_M, "M held fixed in the N and d sweeps [65536]");
  cmd->add_option("--dtype", f.dtype, "fp16, bf16 or fp32 [fp16]");
  cmd->add_flag("--causal", f.causal, "causal mask: skip block pairs above the diagonal");
  cmd->add_option("--tolerance", f.tolerance, "allowed |fitted − expected| exponent [0.05]");
  cmd->add_flag("--json", f.json, "print JSON");
  cmd->add_flag("--csv", f.csv, "print CSV, one row per point");
}

int run_bounds_command(const BoundsFlags& f, std::ostream& out, std::ostream& err) {
  if (f.json && f.csv) fail_input("--csv: choose one of --json and --csv");
  BoundsConfig config;
  config.causal = f.causal;
  Scenario selection;  // each algorithm in each pass asked for, as `simulate --pass` picks rooms
  selection.algorithms = parse_algos(f.algo);
  selection.passes = parse_passes(f.pass, "--pass");
  config.algos = rooms_of(selection);
  std::vector<OptionNote> notes;  // --densities where some rooms take no block mask
  // A fitted exponent needs two distinct values at least: one value "fits" 0 and fails the verdict.
  auto sweep_values = [](const std::string& text, std::string_view option) {
    std::vector<std::int64_t> values = parse_int_list(text, option);
    std::vector<std::int64_t> distinct = values;
    std::sort(distinct.begin(), distinct.end());
    if (std::unique(distinct.begin(), distinct.end()) - distinct.begin() < 2)
      fail_input("{}: a fit needs at least two different values, got '{}'", option, text);
    return values;
  };
  if (!f.seq_lens.empty()) config.seq_lens = sweep_values(f.seq_lens, "--seq-lens");
  if (!f.head_dims.empty()) config.head_dims = sweep_values(f.head_dims, "--head-dims");
  if (!f.sram_elements.empty()) config.sram_elems = sweep_values(f.sram_elements, "--sram-elements");
  if (!f.densities.empty()) {
    config.densities.clear();
    for (const std::string& item : split_list(f.densities, "--densities", "0.125,0.25,0.5,1")) {
      const double s = parse_decimal(item).value_or(0);
      if (!(s > 0 && s <= 1))
        fail_input("--densities: '{}' is not a density in (0, 1] (expected a list such as 0.125,0.25,0.5,1)", item);
      config.densities.push_back(s);
    }
    if (config.densities.size() < 2) fail_input("--densities: a fit needs at least two densities");
    // Only a room that takes a block mask has an s sweep; the others sweep N, d and M as they would.
    const RoomOption densities{{"--densities"}, &kBlockMask, false};
    notes = narrow_rooms({&densities, 1}, config.algos);
  }
  auto positive = [](std::int64_t v, std::string_view option) {
    if (v <= 0) fail_input("{}: must be a positive integer, got {}", option, v);
    return v;
  };
  if (*f.o_base_N) config.base_N = positive(f.base_N, "--seq-len");
  if (*f.o_base_d) config.base_d = positive(f.base_d, "--head-dim");
  if (*f.o_base_M) config.base_M = positive(f.base_M, "--sram-element-count");
  const auto dtype = parse_dtype(f.dtype);
  if (!dtype) fail_input("--dtype: unknown dtype '{}' (expected fp16, bf16 or fp32)", f.dtype);
  config.dtype = *dtype;
  if (!(f.tolerance > 0)) fail_input("--tolerance: must be positive, got {}", f.tolerance);
  config.tolerance = f.tolerance;
  // A swept value out of range is named by its list's option (--head-dims), not the fixed value's (--head-dim).
  auto check_swept = [](const AttentionProblem& p, std::string_view list_option, std::string_view value_option) {
    try {
      p.validate();
    } catch (const InputError& e) {
      std::string_view what = e.what();
      if (!what.starts_with(value_option)) throw;
      what.remove_prefix(value_option.size());
      throw InputError(fmt::format("{}{}", list_option, what));
    }
  };
  // Proposition 3's bound N²d²/M holds for M in [d, N d]: past N d a flash room reads Q, K, V once
  // whatever M is, and the fit of the exponent in M would fail for a reason that is not the count's.
  // Checked for the M values given (the default M against a short --seq-lens is the verdict's to judge).
  const std::int64_t least_N = *std::min_element(config.seq_lens.begin(), config.seq_lens.end());
  const std::int64_t least_d = *std::min_element(config.head_dims.begin(), config.head_dims.end());
  const std::int64_t most_d = *std::max_element(config.head_dims.begin(), config.head_dims.end());
  auto check_M = [&](std::int64_t M, std::int64_t N, std::int64_t d_low, std::int64_t d_high, std::string_view option) {
    if (M > N * d_low)
      fail_input("{}: M = {} elements is more than N·d = {}·{}: the bound N^2 d^2 / M holds for M in [d, N d]", option,
                 M, N, d_low);
    if (M < d_high)
      fail_input("{}: M = {} elements is less than d = {}: the bound N^2 d^2 / M holds for M in [d, N d]", option, M,
                 d_high);
  };
  if (!f.sram_elements.empty())
    for (std::int64_t M : config.sram_elems) check_M(M, config.base_N, config.base_d, config.base_d, "--sram-elements");
  if (*f.o_base_M) {
    check_M(config.base_M, least_N, config.base_d, config.base_d, "--sram-element-count");  // the N sweep
    check_M(config.base_M, config.base_N, least_d, most_d, "--sram-element-count");        // the d sweep
  }
  for (std::int64_t N : config.seq_lens) check_swept({1, 1, N, config.base_d, config.dtype, false}, "--seq-lens", "--seq-len");
  for (std::int64_t d : config.head_dims) check_swept({1, 1, config.base_N, d, config.dtype, false}, "--head-dims", "--head-dim");
  AttentionProblem{1, 1, config.base_N, config.base_d, config.dtype, false}.validate();

  const std::vector<BoundsRow> rows = run_bounds(config);
  if (f.json) {
    Json j = bounds_json(rows, config);
    for (const OptionNote& note : notes) j["notes"].push_back(note.text);
    out << j.dump(2) << "\n";
  } else if (f.csv) {
    for (const OptionNote& note : notes) fmt::print(err, "note: {}\n", note.text);  // beside CSV, as sweep's
    out << bounds_csv(rows, config);
  } else {
    for (const OptionNote& note : notes) fmt::print(out, "note: {}\n\n", note.text);
    print_bounds(out, rows, config);
  }
  const bool pass = std::all_of(rows.begin(), rows.end(), [](const BoundsRow& r) { return r.exponent_ok && r.exact_ok; });
  return pass ? 0 : 1;
}

// [SECTION] sweep

struct SweepFlags {
  ProblemFlags problem;
  std::string block_rows = "16,32,64,128,256", block_cols = "16,32,64,128,256,512", sram_bytes, out_path;
  bool json = false, csv = false, no_l2 = false, kv_descending = false;
  LaunchFlags launch;
};

void add_sweep(CLI::App& app, SweepFlags& f) {
  CLI::App* cmd = app.add_subcommand("sweep", "block size × SRAM grid of HBM traffic and time, as CSV or JSON");
  f.problem.add_to(*cmd);
  cmd->add_option("--block-rows", f.block_rows, "Br values [16,32,64,128,256]")->type_name("LIST");
  cmd->add_option("--block-cols", f.block_cols, "Bc values [16,32,64,128,256,512]")->type_name("LIST");
  cmd->add_option("--sram-bytes", f.sram_bytes, "SRAM bytes per SM (and per CTA) values [the GPU's, per SM and per CTA]")->type_name("LIST");
  cmd->add_option("--out", f.out_path, "write to this file (whole or not at all) instead of standard output")
      ->type_name("FILE");
  cmd->add_flag("--no-l2", f.no_l2, "turn the L2 off: the paper's model, every counted access reaches HBM");
  cmd->add_flag("--kv-descending", f.kv_descending,
                kv_order_rooms() + ": visit K_j, V_j from the last block down, as FlashAttention-2's kernel does");
  f.launch.add_to(*cmd);
  cmd->add_flag("--json", f.json, "print JSON");
  cmd->add_flag("--csv", f.csv, "print CSV, one row per point (the default)");
}

int run_sweep_command(const SweepFlags& f, std::ostream& out, std::ostream& err) {
  if (f.json && f.csv) fail_input("--csv: choose one of --json and --csv");
  const Scenario s = f.problem.resolve();
  SweepConfig config;
  config.gpu = load_gpu(s.gpu);
  config.problem = s.problem;
  config.algos = rooms_of(s);
  std::vector<RoomOption> given = problem_options(s.problem, false);
  if (f.kv_descending) given.push_back({{"--kv-descending"}, &kKvOrder, false});
  add_launch_options(given, f.launch.given());
  const std::vector<OptionNote> notes = narrow_rooms(given, config.algos);
  config.l2_enabled = !f.no_l2;
  config.kv_descending = f.kv_descending;
  config.block_rows = parse_int_list(f.block_rows, "--block-rows");
  config.block_cols = parse_int_list(f.block_cols, "--block-cols");
  if (!f.sram_bytes.empty()) config.sram_bytes = parse_int_list(f.sram_bytes, "--sram-bytes");
  else if (s.sram_bytes) {
    config.sram_bytes = {*s.sram_bytes};
    config.sram_source = s.sram_bytes_where;
  }
  for (std::int64_t bytes : config.sram_bytes) checked_sram_bytes(bytes, "--sram-bytes");
  // The launch's shared memory against the least SRAM of the sweep: every point takes it.
  config.launch = f.launch.checked(config.gpu, config.sram_bytes.empty()
                                                   ? config.gpu.sram_bytes_per_block
                                                   : *std::min_element(config.sram_bytes.begin(), config.sram_bytes.end()));

  ProgressBar bar(err, "sweep");
  std::vector<SweepPoint> points;
  try {
    points = run_sweep(config, std::ref(bar));
  } catch (const InputError& e) {
    name_cta_option(e, config.gpu, config.launch, "--block-rows", config.sram_source);  // its lists set every point's blocks
  }
  std::string text;
  if (f.json) {
    Json rows = Json::array();
    for (const SweepPoint& pt : points)
      rows.push_back({{"algorithm", to_string(pt.algo)}, {"sram_bytes", pt.sram_bytes},
                      {"cta_sram_bytes", pt.cta_sram_bytes}, {"M_elements", pt.M_elements},
                      {"Br", pt.blocks.Br}, {"Bc", pt.blocks.Bc}, {"Tr", pt.Tr}, {"Tc", pt.Tc},
                      {"working_set_bytes", pt.working_set_bytes}, {"fits", pt.fits},
                      {"hbm_read_bytes", pt.total.hbm_read_bytes()}, {"hbm_write_bytes", pt.total.hbm_write_bytes()},
                      {"accesses", pt.total.accesses()}, {"bound_ratio", pt.bound_ratio}, {"predicted_s", pt.predicted_s}});
    Json j = {{"gpu", config.gpu.name}, {"problem", problem_json(s.problem)}, {"points", rows}};
    for (const OptionNote& note : notes) j["notes"].push_back(note.text);
    text = j.dump(2) + "\n";
  } else {
    // CSV keeps its rows clean: the notes go beside it, after the progress bar (an error before them
    // is then the one line on stderr).
    for (const OptionNote& note : notes) fmt::print(err, "note: {}\n", note.text);
    // cta_sram_bytes last: the columns before it keep their places from earlier versions.
    text = "algorithm,sram_bytes,M_elements,Br,Bc,Tr,Tc,working_set_bytes,fits,hbm_read_bytes,hbm_write_bytes,accesses,"
           "bound_ratio,predicted_s,cta_sram_bytes\n";
    for (const SweepPoint& pt : points)
      text += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", to_string(pt.algo), pt.sram_bytes,
                          pt.M_elements, pt.blocks.Br, pt.blocks.Bc, pt.Tr, pt.Tc, pt.working_set_bytes, pt.fits ? 1 : 0,
                          pt.total.hbm_read_bytes(), pt.total.hbm_write_bytes(), pt.total.accesses(),
                          csv_number(pt.bound_ratio), csv_number(pt.predicted_s), pt.cta_sram_bytes);
  }
  if (f.out_path.empty()) {
    out << text;
  } else {
    write_output("--out", f.out_path, text);
    err << fmt::format("sweep: wrote {} points to {}\n", points.size(), f.out_path);
  }
  return 0;
}

// [SECTION] presets, gui, measure and the default action

// Words of `text` in lines of at most `width` columns, each line after the first indented.
std::string wrap(const std::string& text, std::size_t width, const std::string& indent) {
  std::string out, line, word;
  std::istringstream words(text);
  auto columns = [](const std::string& s) {  // UTF-8 code points, close enough for these captions
    return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
  };
  while (words >> word) {
    if (!line.empty() && columns(line) + 1 + columns(word) > width) {
      out += line + "\n" + indent;
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + line;
}

void print_lesson_report(std::ostream& out, const Scenario& lesson) {
  fmt::print(out, "Lesson {}: {}\n", lesson.number, lesson.title);
  if (!lesson.summary.empty()) fmt::print(out, "{}\n", wrap(lesson.summary, 96, ""));
  int k = 0;
  for (const LessonStage& stage : lesson.stages)
    fmt::print(out, "\n  {}. {}\n     {}\n", ++k, stage.title.empty() ? "Stage" : stage.title, wrap(stage.caption, 91, "     "));
  out << "\n";
  const std::vector<SimulationResult> results = simulate_scenario(lesson, nullptr);
  print_comparison(out, results);
  print_pass_sums(out, results);
}

GuiOptions gui_defaults() { return GuiOptions{}; }

// CLI11's "The following arguments were not expected: x --gpu" (last first) as "--gpu x: not expected
// (hbmlab presets --help lists what it takes)": what was not taken first, in the order it was given.
std::string extras_message(std::string_view what, std::span<const std::string> args, std::string_view command,
                           const std::function<bool(const std::string&)>& is_flag) {
  const std::size_t colon = what.find(": ");
  if (colon == std::string_view::npos) return std::string(what);
  std::vector<std::pair<std::ptrdiff_t, std::string>> extras;  // (where it stands in args, the argument)
  std::string_view rest = what.substr(colon + 2);
  while (!rest.empty()) {
    const std::size_t space = rest.find(' ');
    const std::string item(rest.substr(0, space));
    const auto at = std::find(args.begin(), args.end(), item);
    if (at == args.end()) return std::string(what);  // an argument with a space in it: CLI11's words
    extras.emplace_back(at - args.begin(), item);
    rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
  }
  std::stable_sort(extras.begin(), extras.end());
  // `--causal yes`: a value after an option that takes none (measure's --causal takes one; simulate's
  // is a flag), named as such rather than as a stray word.
  if (const auto [at, item] = extras.front(); at > 0 && is_flag(args[static_cast<std::size_t>(at - 1)]))
    return fmt::format("{}: takes no value, got '{}' ({} --help lists what it takes)",
                       args[static_cast<std::size_t>(at - 1)], item, command);
  std::string given;
  for (const auto& [at, item] : extras) given += (given.empty() ? "" : " ") + item;
  return fmt::format("{}: not expected ({} --help lists what it takes)", given, command);
}

// CLI11's "Could not convert: --seq-len = 1e9" as "--seq-len: '1e9' is not a whole number": the option
// first, as every other error of hbmlab's; other parse errors as CLI11 words them.
std::string parse_error_message(const CLI::ParseError& e, const CLI::App& app, std::span<const std::string> args,
                                std::string_view command) {
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    // The subcommand given (or the command itself) decides what its options take.
    const CLI::App* given = &app;
    for (const CLI::App* sub : app.get_subcommands())
      if (sub->parsed()) given = sub;
    return extras_message(e.what(), args, command, [given](const std::string& arg) {
      if (!arg.starts_with("--")) return false;
      const CLI::Option* o = given->get_option_no_throw(arg);
      return o != nullptr && o->get_expected_max() == 0;
    });
  }
  const std::string_view what = e.what(), head = "Could not convert: ";
  const std::size_t eq = what.find(" = ");
  if (!what.starts_with(head) || eq == std::string_view::npos) return std::string(what);
  const std::string option(what.substr(head.size(), eq - head.size()));
  const std::string_view value = what.substr(eq + 3);
  std::string type;
  for (const CLI::App* sub : app.get_subcommands())
    if (const CLI::Option* o = sub->get_option_no_throw(option)) type = o->get_type_name();
  const std::string_view kind = type == "INT" ? "a whole number" : type == "UINT" ? "a whole number, 0 or more"
                              : type == "FLOAT" ? "a number" : "a value this option takes";
  return fmt::format("{}: '{}' is not {}", option, value, kind);
}

}  // namespace

// [SECTION] run_cli

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, const Frontends& frontends) {
  CLI::App app{"hbmlab — a simulator and visualizer of GPU memory-hierarchy IO for attention.\n"
               "With no command: the window on the default lesson (a text report when there is no display).",
               "hbmlab"};
  app.require_subcommand(0, 1);
  SimulateFlags simulate_flags;
  BoundsFlags bounds_flags;
  SweepFlags sweep_flags;
  GuiOptions gui = gui_defaults();
  bool presets_json_flag = false;

  add_simulate(app, simulate_flags);
  add_bounds(app, bounds_flags);
  add_sweep(app, sweep_flags);
  CLI::App* presets = app.add_subcommand("presets", "list the GPU presets with their numbers, units and sources");
  presets->add_flag("--json", presets_json_flag, "print JSON");
  std::string presets_gpu;
  presets->add_option("--gpu", presets_gpu, "only this preset, or a .toml file of your own (checked as simulate reads it)")
      ->type_name("NAME|FILE");
  CLI::App* gui_cmd = app.add_subcommand("gui", "open the window (Dear ImGui + GLFW)");
  std::int64_t gui_lesson = 0;
  const std::vector<std::string> names = scenario_names();
  const auto lessons = std::count_if(names.begin(), names.end(), [](const std::string& n) { return n.starts_with("lessons/"); });
  CLI::Option* o_gui_lesson = gui_cmd->add_option(
      "--lesson", gui_lesson, fmt::format("open the embedded lesson numbered N (1 to {}) [1]", lessons))->type_name("N");
  CLI::Option* o_gui_scenario =
      gui_cmd->add_option("--scenario", gui.scenario, "lesson or workload: a .toml path or an embedded name [lesson 1]")
          ->type_name("FILE|NAME");
  CLI::Option* o_gui_stage = gui_cmd->add_option("--stage", gui.stage, "open the lesson at its stage S, from 1 [1]")->type_name("S");
  gui_cmd->add_option("--screenshot", gui.screenshot, fmt::format("save a PNG of the window after --frames frames ({} unless given), then exit", kScreenshotFrames))
      ->type_name("PNG");
  gui_cmd->add_option("--frames", gui.frames, "frames to render before the screenshot or exit, each 1/60 s of play however long it takes, "
                      "so that a run shows the same on any machine [0: until closed, on the wall clock]");
  gui_cmd->add_option("--ui-scale", gui.ui_scale, "scale fonts and widgets, 0.5 to 8 (1.5 for a 1080p projector, 2 for 4K) [auto]");
  gui_cmd->add_option("--width", gui.width, "window width in pixels [1600]");
  gui_cmd->add_option("--height", gui.height, "window height in pixels [1000]");
  gui_cmd->add_flag("--report-fps", gui.report_fps, "print frames per second when done");
  std::vector<std::string> validate_files;
  std::string validate_gpu;
  bool validate_json = false;
  CLI::App* validate = app.add_subcommand("validate", "predicted against measured for recorded measurement files, "
                                                      "per record and summarised (mean and worst error)");
  validate->add_option("--measurements", validate_files,
                       "measurement or calibration files, or folders of them (assets/measurements: every file there "
                       "that holds attention records)")
      ->required();
  validate->add_option("--gpu", validate_gpu, "GPU preset for the predictions [from each file's device name]");
  double dram_within_pct = 100 * kDramReadTolerance, time_within_pct = 100 * kTimeTolerance;
  validate->add_option("--dram-within", dram_within_pct,
                       fmt::format("count DRAM reads within this many percent of measured [{:g}]", dram_within_pct));
  validate->add_option("--time-within", time_within_pct,
                       fmt::format("count kernel times within this many percent of measured [{:g}]", time_within_pct));
  validate->add_flag("--json", validate_json, "print JSON");
  CLI::App* measure = app.add_subcommand("measure", "(CUDA builds) run the kernels on the GPU and write a measurement file");
  measure->allow_extras();
  measure->prefix_command();
  measure->set_help_flag();  // `hbmlab measure --help` is answered by the measure command itself

  std::vector<const char*> argv = {"hbmlab"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
      if (e.get_exit_code() == 0) return app.exit(e, out, err);  // --help
      std::string sub;
      for (const CLI::App* s : app.get_subcommands()) sub = " " + s->get_name();
      err << fmt::format("hbmlab{}: {}\n", sub, parse_error_message(e, app, args, "hbmlab" + sub));
      return 2;
    }

    // CLI11 takes a whole number past 64 bits as the nearest one; the value as given is refused instead.
    for (const CLI::App* sub : app.get_subcommands())
      for (const CLI::Option* o : sub->get_options([](const CLI::Option* o) { return o->get_type_name() == "INT"; }))
        for (const std::string& given : o->results()) {
          std::int64_t v = 0;
          if (std::from_chars(given.data(), given.data() + given.size(), v).ec == std::errc::result_out_of_range)
            fail_input("{}: '{}' is outside the 64-bit whole numbers", o->get_name(), given);
        }
    if (app.got_subcommand("simulate")) return run_simulate(simulate_flags, out, err);
    if (app.got_subcommand("bounds")) return run_bounds_command(bounds_flags, out, err);
    if (app.got_subcommand("sweep")) return run_sweep_command(sweep_flags, out, err);
    if (app.got_subcommand("validate")) {
      auto cutoff = [](double pct, std::string_view option) {
        if (!(pct > 0 && pct <= 1000)) fail_input("{}: a percentage in (0, 1000], got {:g}", option, pct);
        return pct / 100;
      };
      const ValidationTargets targets{cutoff(dram_within_pct, "--dram-within"), cutoff(time_within_pct, "--time-within")};
      ProgressBar bar(err, "validate");
      const ValidationReport report =
          validate_paths(validate_files, validate_gpu.empty() ? std::nullopt : std::optional<std::string>(validate_gpu),
                         std::ref(bar), targets);
      if (validate_json) out << validation_json(report).dump(2) << "\n";
      else print_validation(out, report);
      return 0;
    }
    if (app.got_subcommand("presets")) {
      const std::vector<GpuSpec> specs = presets_gpu.empty() ? gpu_presets() : std::vector<GpuSpec>{load_gpu(presets_gpu)};
      if (presets_json_flag) out << presets_json(specs).dump(2) << "\n";
      else print_presets(out, specs);
      return 0;
    }
    if (app.got_subcommand("gui")) {
      if (!frontends.gui) {
        err << "hbmlab gui: this build has no window (GLFW, Dear ImGui or OpenGL were missing at build time); "
               "run `make` to install them and rebuild\n";
        return 2;
      }
      if (gui.frames < 0) fail_input("--frames: must be 0 or more, got {}", gui.frames);
      // A picture needs a last frame: without --frames, --screenshot takes the 8th (the panels' jobs done).
      if (!gui.screenshot.empty() && gui.frames == 0) gui.frames = kScreenshotFrames;
      if (!(gui.ui_scale == 0 || (gui.ui_scale >= 0.5 && gui.ui_scale <= 8)))  // 0: the default, from the monitor
        fail_input("--ui-scale: must be between 0.5 and 8, got {}", gui.ui_scale);
      if (gui.width < 320) fail_input("--width: the window must be at least 320 pixels wide, got {}", gui.width);
      if (gui.height < 240) fail_input("--height: the window must be at least 240 pixels high, got {}", gui.height);
      if (*o_gui_lesson) {
        if (*o_gui_scenario) fail_input("--lesson: give --lesson or --scenario, not both");
        gui.scenario = lesson_name(gui_lesson);
      }
      // A bad --scenario or --stage is a CLI error, not a window that opens on something else.
      const Scenario shown = load_scenario(gui.scenario.empty() ? std::string(kDefaultLesson) : gui.scenario);
      if (*o_gui_stage) {
        const auto stages = static_cast<int>(shown.stages.size());
        if (stages == 0) fail_input("--stage: {} is a workload, with no stages", gui.scenario);
        if (gui.stage < 1 || gui.stage > stages)
          fail_input("--stage: lesson {} has stages 1 to {}, got {}", shown.number, stages, gui.stage);
      }
      return frontends.gui(gui);
    }
    if (app.got_subcommand("measure")) {
      if (!frontends.measure) {
        err << "hbmlab measure: this build has no CUDA kernels (no CUDA compiler at configure time); "
               "install the CUDA toolkit (nvcc) and rebuild with `make`\n";
        return 2;
      }
      return frontends.measure(measure->remaining(), out, err);
    }

    // No command: the window on the default lesson, or its text report without a display.
    if (frontends.gui && frontends.display_available) return frontends.gui(gui);
    print_lesson_report(out, load_scenario(kDefaultLesson));
    if (!frontends.gui)
      out << "\nThis build has no window (it was configured without GLFW and Dear ImGui); `make run` installs them\n"
             "and builds the window.\n";
    else
      out << "\nNo display, so this is the text report. For the window run hbmlab on a desktop, or make a picture of it:\n"
             "  xvfb-run -a -s \"-screen 0 1600x1000x24\" hbmlab gui --screenshot lesson.png --frames 60\n";
    out << "More: hbmlab --help, hbmlab simulate --help\n";
    return 0;
  } catch (const InputError& e) {
    std::string sub;
    for (const CLI::App* s : app.get_subcommands()) sub = " " + s->get_name();
    err << fmt::format("hbmlab{}: {}\n", sub, e.what());
    return 2;
  } catch (const std::exception& e) {
    err << fmt::format("hbmlab: internal error: {}\n", e.what());
    return 1;
  }
}

}  // namespace hbmlab
