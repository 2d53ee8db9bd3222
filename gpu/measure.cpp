// `hbmlab measure`: a sweep of hbmlab's CUDA kernels; each configuration is checked against the
// fp64 CPU reference on fresh random inputs, then timed, and the records are written whole to a
// measurement file in the format of docs/design.md#measurement-files. Run: hbmlab measure --help
//
// DRAM and L2 counters come in-process from the CUPTI Range Profiler (gpu/counters.hpp), one user
// range per record with the L2 flushed before each pass; where profiling is not permitted the file
// holds times only and says why. gpu/bench/measure_counters.sh cross-checks them with Nsight
// Compute (`--profile-pass` launches each record once between two hbmlab_marker kernels).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <map>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/counters.hpp"
#include "gpu/frontend.hpp"
#include "gpu/runner.hpp"
#include "sim/algo/block_sparse/masks.hpp"
#include "sim/common/error.hpp"
#include "sim/common/files.hpp"
#include "sim/report/report.hpp"
#include "sim/spec/gpu_spec.hpp"

namespace hbmlab::gpu {
namespace {

// The usage text; the rooms with kernels and their --max-n-NAME defaults come from the registries
// (sim/algo/registry.cpp, gpu/dispatch.cu).
std::string usage() {
  std::string rooms, limits, masked, kv_order, decoding, grouped;
  // Appends item to list, with sep before every item but the first. (Appending in place also
  // keeps GCC 12 from a false -Wrestrict on `"literal" + std::string(...)`.)
  auto append = [](std::string& list, std::string_view sep, std::string_view item) {
    if (!list.empty()) list += sep;
    list += item;
  };
  auto add = [&](std::string& list, std::string_view name) {  // once each, '/' between
    if (fmt::format("/{}/", list).find(fmt::format("/{}/", name)) == std::string::npos) append(list, "/", name);
  };
  for (Pass pass : {Pass::forward, Pass::backward}) {
    std::string names, maxima;
    for (Algo algo : algorithms(pass))
      for (const KernelFamily* f : kernel_families())
        if (f->algo() == algo) {
          append(names, ",", algo->name());
          append(maxima, ", ", fmt::format("{} {}", algo->name(), f->default_max_n()));
          if (f->takes_block_mask()) add(masked, algo->name());
          if (f->takes_query_len()) add(decoding, algo->name());
          if (f->takes_kv_heads()) add(grouped, algo->name());
          if (algo->has_kv_order()) add(kv_order, algo->name());
        }
    if (names.empty()) continue;
    append(rooms, "; ", pass == Pass::backward ? names + " (--pass backward)" : names);
    append(limits, "; backward: ", maxima);
  }
  std::string text = R"(hbmlab measure (options listed by `hbmlab measure --usage`): run hbmlab's CUDA kernels, check them against the fp64 reference, time them,
and write a measurement file (docs/design.md#measurement-files).

Options (lists are comma-separated):
  --algo LIST          @ROOMS@ (default: every one of the pass)
  --pass PASS          forward | backward (default forward): the backward rooms' kernels,
                       given the forward's O and L from hbmlab's forward kernel of the same algorithm
  --seq-len LIST       N values (default 512,1024,2048,4096,8192,16384)
  --head-dim LIST      64,128 (default both)
  --dtype LIST         fp16,bf16 (default fp16)
  --causal MODE        no | yes | both (default both)
  --blocks SPEC        default | all | BRxBC[,BRxBC...] (default: default; see --list)
  --block-mask LIST    block masks to run @MASKED@ with (local:W, butterfly, random:DENSITY[:SEED], a mask
                       file; "none" for dense), e.g. none,local:1024,random:0.1 (default none)
  --kv-order ORDER     @KVORDER@'s K/V block order: ascending | descending | both (default ascending);
                       descending is PyTorch's FlashAttention-2 order (other kernels run once, ascending)
  --tokens T           B*H*N of each run (default 262144); --heads H (default 16)
  --batch B            B of each run instead of --tokens (B*H = B x --heads)
  --query-len LIST     decoding: NQ query rows against the N-key cache, e.g. 1,4 (@DECODING@ only)
  --kv-heads HKV       K/V heads, dividing --heads (grouped-query attention; @GROUPED@ only)
  --splits S           split-KV: K/V splits per (batch, K/V head) (default: the room's, every SM filled once)
  --unified-max PHI    flashdecoding++: the unified max (default: the room's, sqrt(2 ln N))
  --max-n-NAME N       largest N for the room NAME (defaults: @LIMITS@)
  --max-scratch-gb G   standard's S and P together stay under G GB by shrinking B*H (default 24)
  --reps R             timed repetitions, median reported (default 50; fewer for runs over 40 ms)
  --warmup W           untimed launches first (default 5)
  --warm-l2            do not flush the L2 between repetitions (default: flush, read 256 MiB)
  --counters MODE      cupti (default: DRAM and L2 traffic per record, CUPTI Range Profiler) | none
  --on-chip            with cupti: also the on-chip counters per record (shared-memory wavefronts,
                       ldmatrix, tensor and exponent-unit instructions, tensor-pipe busy; more passes)
  --stress             also check each configuration on the large_logits and dominant_key inputs
  --check-only         check, do not time
  --profile-pass       launch each record once between hbmlab_marker kernels (for ncu); no file
  --seed S             input seed (default 1)
  --out FILE           measurement file to write (JSON); without it, only the table is printed
  --usage              this text
  --list               print the compiled (algorithm, dtype, d, Br x Bc) shapes and exit
)";
  auto put = [&](std::string_view key, const std::string& value) { text.replace(text.find(key), key.size(), value); };
  put("@ROOMS@", rooms);
  put("@LIMITS@", limits);
  put("@MASKED@", masked);
  put("@KVORDER@", kv_order);
  put("@DECODING@", decoding);
  put("@GROUPED@", grouped);
  return text;
}

struct Options {
  Pass pass = Pass::forward;
  std::vector<std::string> algo_names;  // --algo as given; resolved in the pass once all options are read
  std::vector<Algo> algos;
  std::vector<std::int64_t> seq_lens{512, 1024, 2048, 4096, 8192, 16384};
  std::vector<int> head_dims{64, 128};
  std::vector<Dtype> dtypes{Dtype::fp16};
  std::vector<bool> causal{false, true};
  std::string blocks = "default";
  std::vector<bool> kv_descending{false};
  std::vector<std::string> block_masks{"none"};
  std::int64_t tokens = 262144, heads = 16;
  std::int64_t batch = 0, kv_heads = 0, splits = 0;  // 0: from --tokens; H; the room's default
  std::vector<std::int64_t> query_lens{0};           // 0: NQ = N
  std::optional<double> unified_max;
  std::map<std::string, std::int64_t, std::less<>> max_n;  // --max-n-NAME given; else the family's default

  std::int64_t max_n_of(Algo algo) const {
    const auto it = max_n.find(algo->name());
    return it != max_n.end() ? it->second : family_of(algo).default_max_n();
  }
  double max_scratch_gb = 24;
  int reps = 50, warmup = 5;
  bool warm_l2 = false, stress = false, check_only = false, profile_pass = false, list = false, debug = false;
  bool on_chip = false;
  std::uint64_t seed = 1;
  std::string out;
  std::string counters = "cupti";
  std::vector<std::string> notes;  // an option some kernels of the list do not take: printed before the table
};

struct BadOption : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> parts;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) parts.push_back(item);
  return parts;
}

std::int64_t to_int(const std::string& opt, const std::string& v) {
  try {
    std::size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used != v.size() || x <= 0) throw std::invalid_argument(v);
    return x;
  } catch (const std::exception&) {
    throw BadOption(opt + ": expected a positive integer, got '" + v + "'");
  }
}

// A two-way choice given as FIRST, SECOND or both: {false}, {true} or {false, true}.
std::vector<bool> one_or_both(const std::string& opt, const std::string& v, const char* first, const char* second) {
  if (v == first) return {false};
  if (v == second) return {true};
  if (v == "both") return {false, true};
  throw BadOption(opt + ": '" + v + "' (" + first + ", " + second + ", both)");
}

Options parse(const std::vector<std::string>& args) {
  Options o;
  for (std::size_t k = 0; k < args.size(); ++k) {
    const std::string& a = args[k];
    auto value = [&]() -> std::string {
      if (k + 1 >= args.size()) throw BadOption(a + ": needs a value");
      return args[++k];
    };
    if (a == "--algo") {
      o.algo_names = split(value());
    } else if (a == "--pass") {
      const std::string v = value();
      const std::optional<Pass> pass = parse_pass(v);
      if (!pass) throw BadOption("--pass: '" + v + "' (forward, backward)");
      o.pass = *pass;
    } else if (a == "--seq-len") {
      o.seq_lens.clear();
      for (const auto& s : split(value())) o.seq_lens.push_back(to_int(a, s));
    } else if (a == "--head-dim") {
      o.head_dims.clear();
      for (const auto& s : split(value())) o.head_dims.push_back(static_cast<int>(to_int(a, s)));
    } else if (a == "--dtype") {
      o.dtypes.clear();
      for (const auto& s : split(value())) {
        auto dt = parse_dtype(s);
        if (!dt || *dt == Dtype::fp32) throw BadOption("--dtype: '" + s + "' (kernels exist for fp16, bf16)");
        o.dtypes.push_back(*dt);
      }
    } else if (a == "--causal") {
      o.causal = one_or_both(a, value(), "no", "yes");
    } else if (a == "--blocks") {
      o.blocks = value();
    } else if (a == "--block-mask") {
      o.block_masks = split(value());
      for (const std::string& m : o.block_masks)
        if (m != "none") (void)parse_block_mask(m);  // InputError, reported as a bad option
    } else if (a == "--kv-order") {
      o.kv_descending = one_or_both(a, value(), "ascending", "descending");
    } else if (a == "--tokens") {
      o.tokens = to_int(a, value());
    } else if (a == "--heads") {
      o.heads = to_int(a, value());
    } else if (a == "--batch") {
      o.batch = to_int(a, value());
    } else if (a == "--kv-heads") {
      o.kv_heads = to_int(a, value());
    } else if (a == "--splits") {
      o.splits = to_int(a, value());
    } else if (a == "--query-len") {
      o.query_lens.clear();
      for (const auto& s : split(value())) o.query_lens.push_back(to_int(a, s));
    } else if (a == "--unified-max") {
      const std::string v = value();
      try {
        std::size_t used = 0;
        o.unified_max = std::stod(v, &used);
        if (used != v.size() || !std::isfinite(*o.unified_max)) throw std::invalid_argument(v);
      } catch (const std::exception&) {
        throw BadOption("--unified-max: expected a number, got '" + v + "'");
      }
    } else if (a.starts_with("--max-n-") && parse_algo(a.substr(8))) {
      o.max_n[a.substr(8)] = to_int(a, value());
    } else if (a == "--max-scratch-gb") {
      o.max_scratch_gb = static_cast<double>(to_int(a, value()));
    } else if (a == "--reps") {
      o.reps = static_cast<int>(to_int(a, value()));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(to_int(a, value()));
    } else if (a == "--seed") {
      o.seed = static_cast<std::uint64_t>(to_int(a, value()));
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "--warm-l2") {
      o.warm_l2 = true;
    } else if (a == "--stress") {
      o.stress = true;
    } else if (a == "--check-only") {
      o.check_only = true;
    } else if (a == "--profile-pass") {
      o.profile_pass = true;
    } else if (a == "--counters") {
      const std::string v = value();
      if (v != "cupti" && v != "none") throw BadOption("--counters: '" + v + "' (cupti, none)");
      o.counters = v;
    } else if (a == "--on-chip") {
      o.on_chip = true;
    } else if (a == "--debug") {
      o.debug = true;
    } else if (a == "--list") {
      o.list = true;
    } else {
      throw BadOption(a + ": unknown option (see hbmlab measure --help)");
    }
  }
  if (o.on_chip && o.counters != "cupti") throw BadOption("--on-chip: needs --counters cupti (the on-chip counters come through CUPTI)");
  // The rooms of the pass that have kernels: all of them by default, else the ones named.
  const auto has_kernels = [](Algo algo) {
    for (const KernelFamily* f : kernel_families())
      if (f->algo() == algo) return true;
    return false;
  };
  if (o.algo_names.empty()) {
    for (Algo algo : algorithms(o.pass))
      if (has_kernels(algo)) o.algos.push_back(algo);
  }
  for (const auto& s : o.algo_names) {
    auto algo = parse_algo(s, o.pass);
    if (!algo) throw BadOption("--algo: unknown algorithm '" + s + "' (" + algo_names(o.pass) + ")");
    if (!has_kernels(*algo)) throw BadOption("--algo: " + std::string(to_string(*algo)) + " has no CUDA kernel in this build");
    o.algos.push_back(*algo);
  }
  // An option of a problem shape that only some kernels take (a block mask, NQ < N, HKV < H): its runs
  // go to the kernels that take it, the others run their other configurations only (a "none" in
  // --block-mask, NQ = N in --query-len) and a note names them; refused, naming the option, when no
  // kernel of the list takes it.
  struct ShapeOption {
    std::string_view option;
    bool given;
    bool (KernelFamily::*takes)() const;
    std::string_view lacks, runs;  // "no block mask", "masked runs"
  };
  const ShapeOption shape_options[] = {
      {"--block-mask", std::any_of(o.block_masks.begin(), o.block_masks.end(), [](const std::string& m) { return m != "none"; }),
       &KernelFamily::takes_block_mask, "no block mask", "masked runs"},
      {"--query-len", std::any_of(o.query_lens.begin(), o.query_lens.end(), [](std::int64_t nq) { return nq > 0; }),
       &KernelFamily::takes_query_len, "no NQ but N", "runs with NQ < N"},
      {"--kv-heads", o.kv_heads > 0, &KernelFamily::takes_kv_heads, "no HKV but H", "runs with HKV < H"},
  };
  auto kernels_of = [](const std::vector<Algo>& rooms) {  // "standard's and flash1's"
    std::string text;
    for (std::size_t k = 0; k < rooms.size(); ++k)
      text += (k == 0 ? "" : k + 1 == rooms.size() ? " and " : ", ") + std::string(to_string(rooms[k])) + "'s";
    return text;
  };
  for (const ShapeOption& s : shape_options) {
    if (!s.given) continue;
    std::vector<Algo> taking, others, anywhere;
    for (Algo algo : o.algos) ((family_of(algo).*s.takes)() ? taking : others).push_back(algo);
    for (const KernelFamily* f : kernel_families())
      if ((f->*s.takes)()) anywhere.push_back(f->algo());
    const bool one = others.size() == 1;
    if (taking.empty())
      throw BadOption(fmt::format("{}: {} {} {} ({} {})", s.option, kernels_of(others), one ? "kernel takes" : "kernels take",
                                  s.lacks, kernels_of(anywhere), anywhere.size() == 1 ? "does" : "do"));
    if (!others.empty())
      o.notes.push_back(fmt::format("{} applies to {} {}; {} {} {}: {} {} are left out", s.option, kernels_of(taking),
                                    taking.size() == 1 ? "kernel" : "kernels", kernels_of(others), one ? "takes" : "take",
                                    s.lacks, one ? "its" : "their", s.runs));
  }
  // Sizes and shapes refused here, before the device is looked for: the error names the option on any
  // machine, and a run never starts on a list that holds a value no kernel takes.
  for (std::int64_t N : o.seq_lens) {
    try {
      AttentionProblem(1, 1, N, 64).validate();
    } catch (const InputError& e) {
      throw BadOption(e.what());
    }
  }
  auto compiled = [&](auto&& match) {
    for (const KernelShape& shape : compiled_shapes())
      if (std::find(o.algos.begin(), o.algos.end(), shape.algo) != o.algos.end() &&
          std::find(o.dtypes.begin(), o.dtypes.end(), shape.dtype) != o.dtypes.end() && match(shape))
        return true;
    return false;
  };
  for (int d : o.head_dims)
    if (!compiled([&](const KernelShape& shape) { return shape.d == d; }))
      throw BadOption("--head-dim: no kernel of the rooms and dtypes asked for takes d = " + std::to_string(d) +
                      " (hbmlab measure --list shows the compiled shapes)");
  if (o.blocks != "default" && o.blocks != "all") {
    const std::vector<std::string> items = split(o.blocks);
    if (items.empty()) throw BadOption("--blocks: '" + o.blocks + "' (expected BRxBC, default or all)");
    for (const std::string& item : items) {
      const auto x = item.find('x');
      if (x == std::string::npos) throw BadOption("--blocks: '" + item + "' (expected BRxBC, default or all)");
      const Blocks b{to_int("--blocks", item.substr(0, x)), to_int("--blocks", item.substr(x + 1))};
      if (!compiled([&](const KernelShape& shape) {
            return shape.blocks == b && std::find(o.head_dims.begin(), o.head_dims.end(), shape.d) != o.head_dims.end();
          }))
        throw BadOption("--blocks: no kernel of the rooms, dtypes and d asked for is compiled with " + item +
                        " (hbmlab measure --list shows the compiled shapes)");
    }
  }
  // Refused now, not after the whole run: the records would have nowhere to go.
  if (!o.out.empty()) check_output("--out", o.out);
  return o;
}

struct Config {
  Algo algo;
  AttentionProblem problem;
  Blocks blocks;
  bool kv_descending = false;
};

std::vector<Blocks> blocks_for(const Options& o, Algo algo, Dtype dtype, int d) {
  std::vector<Blocks> out;
  if (o.blocks == "default") return {default_blocks(algo, dtype, d)};
  if (o.blocks == "all") {
    for (const auto& s : compiled_shapes())
      if (s.algo == algo && s.dtype == dtype && s.d == d) out.push_back(s.blocks);
    return out;
  }
  for (const auto& s : split(o.blocks)) {
    const auto x = s.find('x');
    if (x == std::string::npos) throw BadOption("--blocks: '" + s + "' (expected BRxBC, default or all)");
    Blocks b{to_int("--blocks", s.substr(0, x)), to_int("--blocks", s.substr(x + 1))};
    if (is_compiled({algo, dtype, d, b})) out.push_back(b);
  }
  return out;
}

// B and H for one run: B·H·N = --tokens, H at most --heads, and the scratch tensors (standard's S
// and P) under --max-scratch-gb.
AttentionProblem problem_for(const Options& o, Algo algo, Dtype dtype, int d, std::int64_t N, bool causal) {
  std::int64_t bh = std::max<std::int64_t>(1, o.tokens / N);
  const double per_instance = static_cast<double>(scratch_bytes(algo, AttentionProblem(1, 1, N, d, dtype, causal)));
  if (per_instance > 0) {
    const auto cap = static_cast<std::int64_t>(o.max_scratch_gb * 1e9 / per_instance);
    bh = std::max<std::int64_t>(1, std::min(bh, cap));
  }
  AttentionProblem p;
  p.heads = o.batch > 0 ? o.heads : std::min(o.heads, bh);
  p.batch = o.batch > 0 ? o.batch : std::max<std::int64_t>(1, bh / p.heads);
  p.seq_len = N;
  p.head_dim = d;
  p.dtype = dtype;
  p.causal = causal;
  return p;
}

std::vector<Config> plan(const Options& o, const DeviceInfo& dev) {
  GpuSpec gpu;  // the room's defaults (split count) need only the SMs of the device
  gpu.sm_count = dev.sm_count;
  std::vector<Config> configs;
  for (Algo algo : o.algos) {
    const KernelFamily& family = family_of(algo);
    const std::vector<bool> orders = algo->has_kv_order() ? o.kv_descending : std::vector<bool>{false};
    for (Dtype dtype : o.dtypes)
      for (int d : o.head_dims)
        for (std::int64_t N : o.seq_lens) {
          if (N > o.max_n_of(algo)) continue;
          for (bool causal : o.causal)
            for (const std::string& mask : o.block_masks)
              for (std::int64_t Nq : o.query_lens) {
                AttentionProblem p = problem_for(o, algo, dtype, d, N, causal);
                if (mask != "none") {
                  if (!family.takes_block_mask()) continue;  // a dense kernel: the note names it
                  p.block_mask = parse_block_mask(mask);
                }
                const ShapeSupport takes = algo->supports();
                if (Nq > 0 && Nq != N) {
                  if (!family.takes_query_len() || Nq > N) continue;  // a self-attention kernel: the note names it
                  p.query_len = Nq;
                }
                if (o.kv_heads > 0 && o.kv_heads != p.heads) {
                  if (!family.takes_kv_heads()) continue;  // the note names it
                  if (p.heads % o.kv_heads != 0) throw BadOption("--kv-heads: " + std::to_string(o.kv_heads) + " does not divide H = " + std::to_string(p.heads));
                  p.kv_heads = o.kv_heads;
                }
                if (takes.splits && o.splits > 0) p.kv_splits = o.splits;
                if (takes.unified_max) p.unified_max = o.unified_max;
                for (Blocks b : blocks_for(o, algo, dtype, d)) {
                  const AttentionProblem prepared = algo->prepare(p, b, gpu);  // the split count, φ
                  // A mask file describes one grid: refused (file and grid named) where these blocks make another.
                  if (prepared.block_mask) prepared.block_mask->check(BlockGrid(prepared, b));
                  for (bool desc : orders) configs.push_back({algo, prepared, b, desc});
                }
              }
        }
  }
  return configs;
}

std::string describe(const Config& c) {
  std::ostringstream s;
  s << std::left << std::setw(8) << to_string(c.algo) << " " << to_string(c.problem.dtype) << " d=" << std::setw(3)
    << c.problem.head_dim << " N=" << std::setw(5) << c.problem.seq_len << " B*H=" << std::setw(3)
    << c.problem.instances() << (c.problem.causal ? " causal " : " full   ")
    << (c.problem.Nq() < c.problem.seq_len ? "NQ=" + std::to_string(c.problem.Nq()) + " " : std::string())
    << (c.problem.Hkv() < c.problem.heads ? "HKV=" + std::to_string(c.problem.Hkv()) + " " : std::string())
    << (c.problem.kv_splits > 0 ? "S=" + std::to_string(c.problem.kv_splits) + " " : std::string()) << std::setw(7)
    << (std::to_string(c.blocks.Br) + "x" + std::to_string(c.blocks.Bc) + (c.kv_descending ? " desc" : ""))
    << (c.problem.block_mask ? " mask " + c.problem.block_mask->spec() : std::string());
  return s.str();
}

int run(const Options& o, std::ostream& out, std::ostream& err) {
  if (o.list) {
    for (const auto& s : compiled_shapes())
      out << to_string(s.algo) << " " << to_string(s.dtype) << " d=" << s.d << " " << s.blocks.Br << "x" << s.blocks.Bc
          << "\n";
    return 0;
  }
  for (const std::string& note : o.notes) out << "note: " << note << "\n";
  if (device_count() == 0) {
    err << "hbmlab measure: no CUDA device found (this build has the kernels, but there is no GPU to run them on)\n";
    return 1;
  }
  const DeviceInfo dev = device_info();
  std::vector<Config> configs;
  try {
    configs = plan(o, dev);
  } catch (const InputError& e) {
    err << "hbmlab measure: " << e.what() << "\n";
    return 2;
  }
  if (configs.empty()) {
    err << "hbmlab measure: nothing to run (check --blocks against --list and the --max-n-* limits)\n";
    return 2;
  }

  if (o.debug) {  // first values of S, P, O of instance 0 after one checked launch (standard only has S, P)
    for (const Config& c : configs) {
      AttentionBuffers buf(c.problem, c.algo, c.blocks);
      const CheckResult r = check_kernel(c.problem, c.blocks, c.kv_descending, InputKind::unit, o.seed, buf, 0);
      out << describe(c) << " err " << r.max_abs_error << " pass " << r.pass << "\n";
      auto dump = [&](const char* name, const void* p) {
        if (p == nullptr) return;
        std::uint16_t h[8];
        CUDA_CHECK(cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost));
        out << "  " << name << ":";
        for (auto x : h) out << " " << std::hex << x << std::dec;
        out << "\n";
      };
      const DeviceTensors t = buf.tensors();
      for (Tensor tensor : {Tensor::Q, Tensor::K, Tensor::S, Tensor::P, Tensor::O})
        dump(std::string(tensor_key(tensor)).c_str(), t.at(tensor));
    }
    return 0;
  }
  if (o.profile_pass) {
    for (std::size_t k = 0; k < configs.size(); ++k) {
      const Config& c = configs[k];
      AttentionBuffers buf(c.problem, c.algo, c.blocks);
      check_kernel(c.problem, c.blocks, c.kv_descending, InputKind::unit, o.seed + k, buf, 0);  // fills inputs, one launch
      launch_marker(static_cast<int>(k) + 1, 32);  // begin of record k
      launch(c.algo, c.problem, c.blocks, buf.tensors(), nullptr, c.kv_descending);
      launch_marker(static_cast<int>(k) + 1, 64);  // end of record k
      CUDA_CHECK(cudaDeviceSynchronize());
      out << "profiled " << k << ": " << describe(c) << "\n" << std::flush;
    }
    return 0;
  }

  std::unique_ptr<RangeCounters> counters;
  std::string counters_note = "none (--counters none)";
  if (o.counters == "cupti" && !o.check_only) {
    std::string why;
    counters = RangeCounters::create(&why, o.on_chip);
    if (counters) {
      counters_note = "cupti-range-profiler: one user range per record around its whole launch sequence, "
                      "L2 flushed (256 MiB read) before each replay pass; dram__bytes_read/write.sum, "
                      "lts__t_sectors_srcunit_tex_op_read/write.sum x 32 bytes";
      if (o.on_chip)
        counters_note += "; on-chip: l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld/st.sum x 128 bytes, "
                         "smsp__inst_executed_op_ldsm.sum, smsp__inst_executed_pipe_tensor_op_hmma.sum, "
                         "sm__inst_executed_pipe_xu.sum, sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed / 100";
    } else {
      counters_note = "none: " + why;
      err << "hbmlab measure: hardware counters are not available (" << why << "); recording times only\n";
    }
  }
  DeviceBuffer flush(256u << 20);
  CUDA_CHECK(cudaMemset(flush.get(), 0x5A, flush.bytes()));

  nlohmann::ordered_json file;
  file["device"] = {{"name", dev.name}, {"sm_count", dev.sm_count}, {"l2_bytes", dev.l2_bytes},
                    {"driver", dev.driver}, {"cuda", dev.runtime}};
  file["method"] = {
      {"counters", counters_note},
      {"timing", "cuda-events median of up to " + std::to_string(o.reps) + " after " + std::to_string(o.warmup) +
                     " warm-ups (fewer repetitions when one launch takes over 40 ms: see each record's reps)"},
      {"l2_flushed_between_reps", !o.warm_l2},
      {"l2_flush", "a kernel reading a 256 MiB buffer (clean lines only) before each timed repetition and counter pass"},
      {"dram_write_note", "dram_write_bytes counts write-backs that happen while the range runs; output lines still "
                          "dirty in the 50 MB L2 when the last kernel ends are written back later and are not counted"},
      {"check", "each record checked before timing against the fp64 CPU reference (sim/numerics) on fresh "
                "random inputs; instances 0 and B*H-1, all rows for N <= 1024, else 48 sampled rows"},
      {"flops", "4*N^2*d*B*H, halved when causal; decoding (NQ < N): 4*d*B*H times the keys each query row sees; "
                "backward: 2.5 times the forward's"}};
  file["records"] = nlohmann::ordered_json::array();
  bool all_pass = true;
  out << "device: " << dev.name << " (" << dev.sm_count << " SMs, L2 " << dev.l2_bytes / (1 << 20)
      << " MiB), CUDA runtime " << dev.runtime << "\n";
  for (std::size_t k = 0; k < configs.size(); ++k) {
    const Config& c = configs[k];
    AttentionBuffers buf(c.problem, c.algo, c.blocks);
    std::vector<std::pair<InputKind, CheckResult>> checks;
    checks.emplace_back(InputKind::unit, check_kernel(c.problem, c.blocks, c.kv_descending, InputKind::unit, o.seed + k, buf));
    if (o.stress) {
      for (InputKind kind : {InputKind::large_logits, InputKind::dominant_key})
        checks.emplace_back(kind, check_kernel(c.problem, c.blocks, c.kv_descending, kind, o.seed + k, buf));
    }
    bool pass = true;
    for (const auto& [kind, r] : checks) {
      const bool intended = !family_of(c.algo).intended_difference(kind).empty();
      if (!r.pass && !intended) pass = false;
    }
    all_pass = all_pass && pass;
    const CheckResult& unit = checks.front().second;
    out << describe(c) << "  err " << std::scientific << std::setprecision(2) << unit.max_abs_error
        << std::defaultfloat << (pass ? "  ok " : "  FAIL");
    for (std::size_t e = 1; e < checks.size(); ++e)
      out << " " << to_string(checks[e].first) << "=" << std::scientific << std::setprecision(2)
          << checks[e].second.max_abs_error << std::defaultfloat << (checks[e].second.pass ? "" : "!");
    nlohmann::ordered_json rec;
    rec["kernel"] = std::string(c.algo->name());
    if (c.algo->pass() == Pass::backward) rec["pass"] = "backward";  // forward records read as before
    rec["problem"] = problem_json(c.problem);
    if (c.problem.block_mask) rec["problem"]["density"] = density(BlockGrid(c.problem, c.blocks));
    rec["blocks"] = {{"Br", c.blocks.Br}, {"Bc", c.blocks.Bc}};
    {
      const LaunchInfo li = launch_info(c.algo, c.problem, c.blocks, c.kv_descending);
      rec["launch"] = {{"threads_per_cta", li.threads_per_cta}, {"registers_per_thread", li.registers_per_thread},
                       {"smem_bytes_per_cta", li.smem_bytes_per_cta}, {"ctas", li.ctas},
                       {"ctas_per_sm", li.ctas_per_sm}, {"kv_descending", li.kv_descending}};
      if (const char* note = family_of(c.algo).launch_note()) rec["launch"]["note"] = note;
    }
    if (!o.check_only && pass) {
      // Fewer repetitions for slow launches (flash1 at large N): about 2 s of timed work at most.
      Timing probe = time_kernel(c.problem, c.blocks, c.kv_descending, buf, 1, 1, !o.warm_l2);
      int reps = o.reps;
      if (probe.median_ms > 40) reps = std::max(5, std::min(o.reps, static_cast<int>(2000 / probe.median_ms)));
      const Timing t = time_kernel(c.problem, c.blocks, c.kv_descending, buf, reps, probe.median_ms > 40 ? 1 : o.warmup, !o.warm_l2);
      const double tflops = attention_flops(c.problem, c.blocks, c.algo->pass()) / (t.median_ms * 1e-3) / 1e12;
      rec["time_ms_median"] = t.median_ms;
      rec["time_ms_min"] = t.min_ms;
      rec["reps"] = t.reps;
      rec["tflops"] = tflops;
      out << "  " << std::fixed << std::setprecision(3) << t.median_ms << " ms  " << std::setprecision(1) << tflops
          << " TFLOP/s" << std::defaultfloat;
    }
    rec["dram_read_bytes"] = nullptr;
    rec["dram_write_bytes"] = nullptr;
    rec["l2_sm_read_bytes"] = nullptr;
    rec["l2_sm_write_bytes"] = nullptr;
    if (counters && pass) {
      const TrafficCounters tc = counters->measure(
          [&] { launch(c.algo, c.problem, c.blocks, buf.tensors(), nullptr, c.kv_descending); },
          [&] { flush_l2(flush); });
      rec["dram_read_bytes"] = static_cast<std::int64_t>(tc.dram_read_bytes);
      rec["dram_write_bytes"] = static_cast<std::int64_t>(tc.dram_write_bytes);
      rec["l2_sm_read_bytes"] = static_cast<std::int64_t>(tc.l2_sm_read_bytes);
      rec["l2_sm_write_bytes"] = static_cast<std::int64_t>(tc.l2_sm_write_bytes);
      rec["counter_passes"] = tc.passes;
      if (tc.on_chip) {  // the fields `hbmlab validate` compares with the warp layout's counts
        rec["smem_ld_bytes"] = static_cast<std::int64_t>(tc.smem_ld_bytes);
        rec["smem_st_bytes"] = static_cast<std::int64_t>(tc.smem_st_bytes);
        rec["ldmatrix_instructions"] = static_cast<std::int64_t>(tc.ldmatrix_instructions);
        rec["mma_instructions"] = static_cast<std::int64_t>(tc.mma_instructions);
        rec["ex2_instructions"] = static_cast<std::int64_t>(tc.ex2_instructions);
        rec["tensor_pipe_busy"] = tc.tensor_pipe_busy;
      }
      out << "  DRAM r/w " << std::fixed << std::setprecision(1) << tc.dram_read_bytes / 1e6 << "/"
          << tc.dram_write_bytes / 1e6 << " MB" << std::defaultfloat;
    }
    out << "\n" << std::flush;
    rec["max_abs_error"] = unit.max_abs_error;
    nlohmann::ordered_json cj = nlohmann::ordered_json::array();
    for (const auto& [kind, r] : checks) {
      const Tolerance tol = tolerance(c.algo, c.problem.dtype);
      cj.push_back({{"input", std::string(to_string(kind))}, {"max_abs_error", r.max_abs_error},
                    {"tolerance", "atol " + std::to_string(tol.atol) + " + rtol " + std::to_string(tol.rtol) + "*|ref|"},
                    {"worst_error_over_tolerance", r.worst_ratio}, {"rows_checked", r.rows_checked},
                    {"pass", r.pass}, {"note", r.note}});
    }
    rec["check"] = cj;
    file["records"].push_back(rec);
  }
  if (!o.out.empty()) {
    write_output("--out", o.out, file.dump(1) + "\n");
    out << "wrote " << file["records"].size() << " records to " << o.out << "\n";
  }
  if (!all_pass) {
    err << "hbmlab measure: some configurations FAILED their check (see the table); they were not timed\n";
    return 1;
  }
  return 0;
}

}  // namespace

int run_measure(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h" || a == "--usage") {
      out << usage();
      return 0;
    }
  try {
    return run(parse(args), out, err);
  } catch (const BadOption& e) {
    err << "hbmlab measure: " << e.what() << "\n";
    return 2;
  } catch (const InputError& e) {
    err << "hbmlab measure: " << e.what() << "\n";
    return 2;
  } catch (const std::invalid_argument& e) {
    err << "hbmlab measure: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "hbmlab measure: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace hbmlab::gpu
