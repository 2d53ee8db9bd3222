// Predicted against measured, record by record (see validate.hpp).
//
// [SECTION] Reading the two file kinds
// [SECTION] Errors and summaries
// [SECTION] Reports

// std::regex's compiler draws a false -Wmaybe-uninitialized from GCC 12 at -O1 with -fsanitize=address
// (GCC bug 105616, in std::function's move): silenced for the standard headers it is in, included first.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <functional>
#include <regex>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include "sim/measure/validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "sim/algo/block_sparse/masks.hpp"
#include "sim/common/error.hpp"
#include "sim/common/parallel.hpp"
#include "sim/common/units.hpp"
#include "sim/report/on_chip_json.hpp"
#include "sim/report/report.hpp"
#include "sim/scenario/embedded.hpp"

namespace hbmlab {
namespace {

// nlohmann's "[json.exception.type_error.302] type must be number, but is string" without its
// bracketed id, for a one-line error that reads as the rest of hbmlab's.
std::string json_error_text(const Json::exception& e) {
  const std::string_view what = e.what();
  const std::size_t close = what.starts_with("[json.exception.") ? what.find("] ") : std::string_view::npos;
  return std::string(close == std::string_view::npos ? what : what.substr(close + 2));
}

// j[key], or an error naming `where.key` when the record has no such key.
const Json& member(const Json& j, const char* key, const std::string& where) {
  if (!j.is_object()) fail_input("{}: expected an object, got {}", where, j.type_name());
  const auto it = j.find(key);
  if (it == j.end()) fail_input("{}.{}: missing", where, key);
  return *it;
}
// j[key] as true or false, `fallback` when absent.
bool flag_or(const Json& j, const char* key, bool fallback, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_boolean()) fail_input("{}.{}: expected true or false, got {}", where, key, it->dump());
  return it->get<bool>();
}


// [SECTION] Reading the two file kinds

// The preset of a measured device, from the name the driver reports.
std::string preset_for(const Json& device, const std::string& file) {
  const std::string name = device.value("name", "");
  if (name.find("H100") != std::string::npos) return "h100-sxm";
  if (name.find("H200") != std::string::npos) return "h200";
  if (name.find("A100") != std::string::npos)
    return name.find("80GB") != std::string::npos ? "a100-80gb" : "a100-40gb";
  fail_input("{}: device.name: no preset for '{}' (give one with --gpu)", file, name);
}

double number_or_nan(const Json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : kNaN;
}

// A measured figure of an hbmlab record: absent or null (what a writer gives for a figure it did not
// measure) is NaN; otherwise a number, above 0 for a time, at least 0 for a count of bytes.
double measured_figure(const Json& r, const char* key, const std::string& where, bool time) {
  const auto it = r.find(key);
  if (it == r.end() || it->is_null()) return kNaN;
  if (!it->is_number()) fail_input("{}.{}: expected a number, got {}", where, key, it->type_name());
  const double v = it->get<double>();
  if (time && !(v > 0)) fail_input("{}.{}: must be a time above 0 ms, got {}", where, key, it->dump());
  if (!time && !(v >= 0)) fail_input("{}.{}: must be a number of bytes ≥ 0, got {}", where, key, it->dump());
  return v;
}

// A whole number: a JSON integer within int64, or a float with no fraction up to 2^53 (nlohmann's
// get<std::int64_t>() casts a float without checking its range).
std::int64_t whole_number(const Json& j, std::string_view where) {
  if (j.is_number_unsigned() && j.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
    fail_input("{}: {} is more than hbmlab models", where, j.dump());
  if (j.is_number_integer()) return j.get<std::int64_t>();
  if (j.is_number_float()) {
    const double v = j.get<double>();
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) <= 9007199254740992.0) return static_cast<std::int64_t>(v);
  }
  fail_input("{}: expected a whole number, got {}", where, j.is_number() ? j.dump() : std::string(j.type_name()));
}

std::int64_t whole_number_or(const Json& j, const char* key, std::int64_t fallback, std::string_view where);

// The L2 a set-aside record's kernel had: "l2_set_aside_bytes" (absent: 0), checked against the
// preset now so that a bad value fails the file with its record named.
std::int64_t read_l2_set_aside(const Json& r, const std::string& gpu, const std::string& where) {
  const std::int64_t bytes = whole_number_or(r, "l2_set_aside_bytes", 0, where);
  if (bytes != 0) gpu_with_l2_set_aside(load_gpu(gpu), bytes, where + ".l2_set_aside_bytes");
  return bytes;
}

std::int64_t whole_number_or(const Json& j, const char* key, std::int64_t fallback, std::string_view where) {
  const auto it = j.find(key);
  return it == j.end() ? fallback : whole_number(*it, fmt::format("{}.{}", where, key));
}

// Threads, registers or shared-memory bytes of one CTA: at least 1 and, as in CUDA's own fields,
// below 2^31.
std::int64_t launch_figure(std::int64_t v, std::string_view where) {
  if (v < 1 || v > std::numeric_limits<std::int32_t>::max())
    fail_input("{}: {} is not a launch figure (1 to {})", where, v, std::numeric_limits<std::int32_t>::max());
  return v;
}

std::int64_t launch_figure(double v, std::string_view where) {
  if (!(v >= 1 && v <= double(std::numeric_limits<std::int32_t>::max())))
    fail_input("{}: {} is not a launch figure (1 to {})", where, v, std::numeric_limits<std::int32_t>::max());
  return static_cast<std::int64_t>(v);
}

// Blocks of a record: positive, and no more than the engine takes (sim/common/limits.hpp), checked
// as the file is read so that `validate` refuses it before any engine work. Keeps `where` for the
// errors that only the engine finds (a kernel that cannot take the record's shape).
void check_row(ValidationRow& row, const std::string& where) {
  row.where = where;
  if (row.blocks.Br < 1 || row.blocks.Bc < 1)
    fail_input("{}.blocks: Br = {}, Bc = {}: blocks must hold at least one row", where, row.blocks.Br, row.blocks.Bc);
  try {
    check_engine_size(row.algo, row.problem, row.blocks);
  } catch (const InputError& e) {
    fail_input("{}: {}", where, e.what());
  }
  // A record of hbmlab's own kernel is of a problem gpu/ compiles it for, as simulate() asks
  // (sim/algo/kernel_tiles.hpp): its dtype, d and shape (the GPU's SRAM is the engine's to ask).
  if (row.launch.hbmlab_kernels && row.algo->has_hbmlab_kernel())
    if (const std::optional<KernelMiss> miss = row.algo->hbmlab_kernel_miss(row.problem, std::nullopt))
      fail_input("{}: {}'s CUDA kernel in gpu/ {}", where, to_string(row.algo), miss->refusal);
}

AttentionProblem problem_of(const Json& j, const std::string& where) {
  try {
    AttentionProblem p;
    p.batch = whole_number(member(j, "batch", where), where + ".batch");
    p.heads = whole_number(member(j, "heads", where), where + ".heads");
    p.seq_len = whole_number(member(j, "seq_len", where), where + ".seq_len");
    p.head_dim = whole_number(member(j, "head_dim", where), where + ".head_dim");
    const auto dtype = parse_dtype(j.value("dtype", "fp16"));
    if (!dtype) fail_input("{}.dtype: unknown dtype", where);
    p.dtype = *dtype;
    p.causal = flag_or(j, "causal", false, where);
    if (j.contains("block_mask")) p.block_mask = parse_block_mask(j.at("block_mask").get<std::string>());
    p.query_len = whole_number_or(j, "query_len", 0, where);
    p.kv_heads = whole_number_or(j, "kv_heads", 0, where);
    p.kv_splits = whole_number_or(j, "splits", 0, where);
    if (j.contains("unified_max")) p.unified_max = j.at("unified_max").get<double>();
    p.validate();
    return p;
  } catch (const Json::exception& e) {
    fail_input("{}: {}", where, json_error_text(e));
  } catch (const InputError& e) {
    if (std::string_view(e.what()).starts_with(where)) throw;  // already names the record's key
    throw InputError(problem_error_at(where, e.what()));
  }
}

// An SDPA record's problem: B, H, N, d, dtype and causal, as calibrate_h100.py writes them.
AttentionProblem sdpa_problem(const Json& r, const std::string& where) {
  return problem_of({{"batch", member(r, "B", where)}, {"heads", member(r, "H", where)}, {"seq_len", member(r, "N", where)},
                     {"head_dim", member(r, "d", where)}, {"dtype", r.value("dtype", "fp16")},
                     {"causal", flag_or(r, "causal", false, where)}},
                    where);
}

// A row for a PyTorch record whose main kernel is `kernel_name`: the room that models that kernel
// (Algorithm::external_kernels, among the split-KV rooms or the others), or none, the record then
// listed as skipped.
std::optional<ValidationRow> sdpa_row(const std::string& kernel_name, Pass pass, bool split_kv, const std::string& source,
                                      const std::string& path, const std::string& gpu, const std::string& where,
                                      ValidationReport& report) {
  const std::optional<Algo> room = room_for_kernel(kernel_name, pass, split_kv);
  if (!room) {
    report.skipped.push_back(fmt::format("{}: no {} room models {}", where, to_string(pass), kernel_name));
    return std::nullopt;
  }
  ValidationRow row;
  row.file = path;
  row.source = source;
  row.gpu = gpu;
  row.algo = *room;
  return row;
}

// Registers and shared memory per CTA from ncu's launch__ figures of `kernel`, where it has them.
void read_ncu_launch(const Json& kernel, const std::string& where, ValidationRow& row) {
  const double regs = number_or_nan(kernel, "launch__registers_per_thread");
  const double smem = number_or_nan(kernel, "launch__shared_mem_per_block_dynamic") +
                      number_or_nan(kernel, "launch__shared_mem_per_block_static");
  if (std::isfinite(regs)) row.launch.registers_per_thread = launch_figure(regs, where + ": launch__registers_per_thread");
  if (std::isfinite(smem)) row.launch.smem_bytes_per_cta = launch_figure(smem, where + ": launch__shared_mem_per_block");
}

// How PyTorch launched its main kernel: Br, Bc and warps from the Flash_*_kernel_traits<d, Br, Bc, warps,
// ...> in its name (`traits`, named `traits_where` in messages), registers and shared memory per CTA
// from ncu's launch__ figures of `kernel`.
void read_sdpa_launch(const Json& kernel, const std::smatch& traits, const std::string& traits_where,
                      const std::string& where, ValidationRow& row) {
  // The traits' numbers are digits of any length: read them as doubles, so that none overflows.
  auto trait = [&](int k) { return std::strtod(traits[k].str().c_str(), nullptr); };
  row.blocks = {launch_figure(trait(2), traits_where + " Br"), launch_figure(trait(3), traits_where + " Bc")};
  row.launch.threads_per_cta = launch_figure(32 * trait(4), traits_where + " warps × 32");
  read_ncu_launch(kernel, where, row);
}

// A record's kernels under ncu: time and traffic summed (add) over those whose name holds `family`
// (sum_kernels), and the main one, whose name holds `main_name` (null if none).
struct KernelSums {
  const Json* main = nullptr;
  double time_ns = 0, dram_read = 0, dram_write = 0, l2_read_sectors = 0;
  void add(const Json& k) {
    time_ns += number_or_nan(k, "gpu__time_duration.sum");
    dram_read += number_or_nan(k, "dram__bytes_read.sum");
    dram_write += number_or_nan(k, "dram__bytes_write.sum");
    l2_read_sectors += number_or_nan(k, "lts__t_sectors_srcunit_tex_op_read.sum");
  }
  void fill(ValidationRow& row) const {
    row.measured_time_s = time_ns * 1e-9;
    row.measured_dram_read = dram_read;
    row.measured_dram_write = dram_write;
    row.measured_l2_read = l2_read_sectors * 32;
  }
};
KernelSums sum_kernels(const Json& r, std::string_view family, std::string_view main_name) {
  KernelSums s;
  if (r.contains("ncu_kernels"))
    for (const Json& k : r.at("ncu_kernels")) {
      const std::string name = k.value("kernel", "");
      if (name.find(family) == std::string::npos) continue;
      if (name.find(main_name) != std::string::npos) s.main = &k;
      s.add(k);
    }
  return s;
}

MeasuredOnChip read_on_chip(const Json& r, const std::string& where);

// PyTorch's FlashAttention-2 backward ("pass": "backward" in a record): its three kernels, as the flash2
// backward room plans them, D = rowsum(dO ∘ O) (flash_bwd_dot_do_o_kernel, which also clears the fp32
// dQ accumulator), one CTA per K_j, V_j (flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel, whose name carries
// Flash_bwd_kernel_traits<d, Br, Bc, warps, ...>) and the dQ conversion (flash_bwd_convert_dq_kernel).
// Time and traffic are the three kernels' sums; the launch is the main kernel's.
void read_sdpa_backward(const Json& r, const std::string& where, const std::string& path, const std::string& gpu,
                        ValidationReport& report) {
  static const std::regex traits(R"(Flash_bwd_kernel_traits<(\d+), (\d+), (\d+), (\d+))");
  const KernelSums sums = sum_kernels(r, "flash_bwd", "flash_bwd_dq_dk_dv_loop");
  const Json* main = sums.main;
  std::smatch m;
  const std::string name = main ? main->value("kernel", "") : "";
  if (!main || !std::regex_search(name, m, traits)) {
    report.skipped.push_back(where + ": no flash_bwd_dq_dk_dv_loop kernel with its traits in ncu_kernels");
    return;
  }
  std::optional<ValidationRow> found = sdpa_row(name, Pass::backward, false, "sdpa flash backward", path, gpu, where, report);
  if (!found) return;
  ValidationRow& row = *found;
  row.problem = sdpa_problem(r, where);
  read_sdpa_launch(*main, m, where + ": ncu_kernels: Flash_bwd_kernel_traits", where, row);
  sums.fill(row);
  row.measured_on_chip = read_on_chip(r, where);  // gpu/bench/sdpa_onchip.sh's records carry them
  check_row(row, where);
  report.rows.push_back(row);
}

// cuDNN's backward ("backend": "cudnn", "pass": "backward"): D = rowsum(dO ∘ O)
// (cudnn::compute_dot_do_o_specialized), the main wgmma kernel (cudnn_generated_fort_native_sdpa_sm90_
// flash_bprop_wgmma_..._{keys}x{queries}x{d}_...) and the dQ conversion (cudnn::convert_dq_to_16bits),
// read as the room that names the main kernel (flash3 backward). The tile is a consumer warpgroup's
// (wgmma's m64: 64 keys), so Bc = 64 × the consumer warpgroups (ncu's block size / 128, less the
// producer) and Br = the tile's queries, as FlashAttention-3's backward lays out its CTA. Time and
// traffic are the three kernels' sums; the launch (threads, registers, shared memory) is the main
// kernel's, from ncu. (cuDNN's kernel is persistent, one CTA per SM; the room plans one per K_j.)
void read_cudnn_backward(const Json& r, const std::string& where, const std::string& path, const std::string& gpu,
                         ValidationReport& report) {
  static const std::regex tile(R"(_(\d+)x(\d+)x(\d+)_)");
  const KernelSums sums = sum_kernels(r, "cudnn", "flash_bprop");
  const Json* main = sums.main;
  std::smatch m;
  const std::string name = main ? main->value("kernel", "") : "";
  if (!main || !std::regex_search(name, m, tile)) {
    report.skipped.push_back(where + ": no cuDNN flash_bprop kernel with its Br x Bc x d tile in ncu_kernels");
    return;
  }
  std::optional<ValidationRow> found = sdpa_row(name, Pass::backward, false, "sdpa cudnn backward", path, gpu, where, report);
  if (!found) return;
  ValidationRow& row = *found;
  row.problem = sdpa_problem(r, where);
  auto figure = [&](const char* key) { return number_or_nan(*main, key); };
  const double consumers = std::max(1.0, figure("launch__block_size") / 128 - 1);
  row.blocks = {launch_figure(std::strtod(m[2].str().c_str(), nullptr), where + ": the kernel's tile (queries)"),
                launch_figure(std::strtod(m[1].str().c_str(), nullptr) * (std::isfinite(consumers) ? consumers : 1.0),
                              where + ": the kernel's tile (keys) × consumer warpgroups")};
  if (std::isfinite(figure("launch__block_size")))
    row.launch.threads_per_cta = launch_figure(figure("launch__block_size"), where + ": launch__block_size");
  read_ncu_launch(*main, where, row);
  sums.fill(row);
  check_row(row, where);
  report.rows.push_back(row);
}

// cuDNN's Hopper forward (PyTorch's cuDNN SDPA backend on sm_90), read as the room that names its
// kernel (flash3: a producer warpgroup filling a K/V ring by TMA, consumer warpgroups on wgmma).
// Its name carries the consumer warpgroup's tile, `_64x128x128_`: 64 rows of Q_i, Bc = 128 keys,
// d; the CTA holds one producer and (threads/128 − 1) consumer warpgroups, so Br is 64 times the
// consumers. ncu gives threads, shared memory and registers. Records that profiled something else
// (no such kernel, or more than it) are listed as skipped.
void read_cudnn_forward(const Json& r, const std::string& where, const std::string& path, const std::string& gpu,
                        ValidationReport& report) {
  static const std::regex tile(R"(_(\d+)x(\d+)x(\d+)_\d+x\d+x\d+_)");
  const Json* kernel = nullptr;
  int kernels = 0;
  if (r.contains("ncu_kernels"))
    for (const Json& k : r.at("ncu_kernels")) {
      ++kernels;
      const std::string name = k.value("kernel", "");
      if (room_for_kernel(name, Pass::forward, false)) kernel = &k;
    }
  std::smatch m;
  const std::string name = kernel ? kernel->value("kernel", "") : "";
  if (!kernel || kernels != 1 || !std::regex_search(name, m, tile)) {
    report.skipped.push_back(where + ": cudnn backend: not one fused forward kernel of a modelled room with its "
                                     "tile (_MxNxD_) in its name");
    return;
  }
  std::optional<ValidationRow> found = sdpa_row(name, Pass::forward, false, "sdpa cudnn", path, gpu, where, report);
  if (!found) return;
  ValidationRow& row = *found;
  row.problem = sdpa_problem(r, where);
  row.l2_set_aside_bytes = read_l2_set_aside(r, gpu, where);
  auto figure = [&](int k) { return std::strtod(m[k].str().c_str(), nullptr); };
  const double threads = number_or_nan(*kernel, "launch__block_size");
  if (!std::isfinite(threads) || threads < 256 || std::fmod(threads, 128) != 0) {
    report.skipped.push_back(fmt::format("{}: cudnn backend: launch__block_size {} is not a producer and consumer "
                                         "warpgroups", where, threads));
    return;
  }
  if (figure(3) != double(row.problem.head_dim)) {
    report.skipped.push_back(fmt::format("{}: cudnn backend: the kernel's tile is for d = {}, the record's d is {}",
                                         where, figure(3), row.problem.head_dim));
    return;
  }
  const double consumers = threads / 128 - 1;
  row.blocks = {launch_figure(figure(1) * consumers, where + ": tile rows × consumer warpgroups"),
                launch_figure(figure(2), where + ": tile columns (Bc)")};
  row.launch.threads_per_cta = launch_figure(threads, where + ": launch__block_size");
  read_ncu_launch(*kernel, where, row);
  KernelSums one;
  one.add(*kernel);
  one.fill(row);
  row.measured_on_chip = read_on_chip(r, where);  // gpu/bench/flash3_onchip.sh's records carry them
  check_row(row, where);
  report.rows.push_back(row);
}

// The calibration file's SDPA records: PyTorch's FlashAttention-2 forward, modelled as it was
// launched. Its kernel name carries Flash_fwd_kernel_traits<d, Br, Bc, warps, ...>; ncu gives the
// shared memory and registers; the kernel visits K_j, V_j from the last block down. Records of the
// backward pass go to read_sdpa_backward.
void read_sdpa(const Json& file, const std::string& path, const std::string& gpu, ValidationReport& report) {
  static const std::regex traits(R"(Flash_fwd_kernel_traits<(\d+), (\d+), (\d+), (\d+))");
  const Json& records = file.at("sdpa");
  if (!records.is_array()) fail_input("{}: sdpa: expected an array of records, got {}", path, records.type_name());
  for (std::size_t n = 0; n < records.size(); ++n) {
    const Json& r = records[n];
    const std::string where = fmt::format("{}: sdpa[{}]", path, n);
    if (!r.is_object()) fail_input("{}: expected an object, got {}", where, r.type_name());
    const std::string backend = r.value("backend", "");
    if (r.value("pass", "forward") == "backward" && backend == "flash") {
      read_sdpa_backward(r, where, path, gpu, report);
      continue;
    }
    if (r.value("pass", "forward") == "backward" && backend == "cudnn") {
      read_cudnn_backward(r, where, path, gpu, report);
      continue;
    }
    if (backend == "math") {
      report.skipped.push_back(where + ": math backend: PyTorch upcasts to fp32 and runs about a dozen kernels "
                                       "(copies, masks, FFMA GEMMs); hbmlab's standard is three fp16 kernels");
      continue;
    }
    if (backend == "cudnn" && r.value("pass", "forward") == "forward") {
      read_cudnn_forward(r, where, path, gpu, report);
      continue;
    }
    if (backend != "flash") {
      report.skipped.push_back(fmt::format("{}: {} backend: its fused kernel's tiles and K/V order are not recorded in "
                                           "a form hbmlab models", where, backend));
      continue;
    }
    const Json* kernel = nullptr;
    if (r.contains("ncu_kernels"))
      for (const Json& k : r.at("ncu_kernels"))
        if (k.value("kernel", "").find("flash_fwd_kernel") != std::string::npos) kernel = &k;
    std::smatch m;
    const std::string name = kernel ? kernel->value("kernel", "") : "";
    if (!kernel || !std::regex_search(name, m, traits)) {
      report.skipped.push_back(where + ": no flash_fwd_kernel with its traits in ncu_kernels");
      continue;
    }
    std::optional<ValidationRow> found = sdpa_row(name, Pass::forward, false, "sdpa flash", path, gpu, where, report);
    if (!found) continue;
    ValidationRow& row = *found;
    row.problem = sdpa_problem(r, where);
    row.l2_set_aside_bytes = read_l2_set_aside(r, gpu, where);
    read_sdpa_launch(*kernel, m, where + ": ncu_kernels: Flash_fwd_kernel_traits", where, row);
    row.launch.kv_descending = true;
    KernelSums one;
    one.add(*kernel);
    one.fill(row);
    row.measured_on_chip = read_on_chip(r, where);  // gpu/bench/sdpa_onchip.sh's records carry them
    check_row(row, where);
    report.rows.push_back(row);
  }
}

// The decode calibration's records (gpu/bench/decode_calibrate.py): PyTorch's FlashAttention-2 on a
// decode step, which runs Flash-Decoding as hbmlab's flash-decoding room does. With one query row
// and grouped heads it packs each K/V head's g query heads into the rows of one instance (g·NQ
// rows), so each K/V head is read once; then flash_fwd_splitkv_kernel over S splits (the grid's y)
// and flash_fwd_splitkv_combine_kernel, or flash_fwd_kernel alone when S = 1. Measured: the sum of
// its kernels' durations and DRAM bytes under ncu.
void read_sdpa_decode(const Json& file, const std::string& path, const std::string& gpu, ValidationReport& report) {
  static const std::regex traits(R"(Flash_fwd_kernel_traits<(\d+), (\d+), (\d+), (\d+))");
  static const std::regex grid_dims(R"(\((\d+), (\d+), (\d+)\))");
  const Json& records = file.at("sdpa_decode");
  if (!records.is_array()) fail_input("{}: sdpa_decode: expected an array of records, got {}", path, records.type_name());
  const bool cache_control_all = file.contains("method") && file.at("method").is_object() &&
                                 file.at("method").value("counters", "").find("--cache-control all") != std::string::npos;
  for (std::size_t n = 0; n < records.size(); ++n) {
    const Json& r = records[n];
    const std::string where = fmt::format("{}: sdpa_decode[{}]", path, n);
    if (!r.is_object()) fail_input("{}: expected an object, got {}", where, r.type_name());
    if (!r.contains("ncu_kernels") || r.at("ncu_kernels").empty()) {
      report.skipped.push_back(where + ": no kernels were profiled");
      continue;
    }
    const Json* main_kernel = nullptr;
    bool other = false;
    double time_ns = 0, dram_read = 0, dram_write = 0, l2_read = 0;
    for (const Json& k : r.at("ncu_kernels")) {
      const std::string name = k.value("kernel", "");
      if (name.find("splitkv_combine") == std::string::npos && name.find("flash_fwd") != std::string::npos) main_kernel = &k;
      else if (name.find("splitkv_combine") == std::string::npos) other = true;
      time_ns += number_or_nan(k, "gpu__time_duration.sum");
      dram_read += number_or_nan(k, "dram__bytes_read.sum");
      dram_write += number_or_nan(k, "dram__bytes_write.sum");
      l2_read += number_or_nan(k, "lts__t_sectors_srcunit_tex_op_read.sum") * 32;
    }
    std::smatch t, g;
    const std::string name = main_kernel ? main_kernel->value("kernel", "") : "";
    const std::string grid = main_kernel ? main_kernel->value("grid", "") : "";
    if (!main_kernel || other || !std::regex_search(name, t, traits) || !std::regex_search(grid, g, grid_dims)) {
      report.skipped.push_back(where + ": not FlashAttention-2's flash_fwd kernels alone, with their traits and grid");
      continue;
    }
    const std::int64_t B = whole_number(r.at("B"), where + ".B"), H = whole_number(r.at("H"), where + ".H");
    const std::int64_t Hkv = whole_number(r.at("HKV"), where + ".HKV"), Nq = whole_number(r.at("NQ"), where + ".NQ");
    const bool split = name.find("splitkv") != std::string::npos;
    auto dim = [&](int k) { return std::strtod(g[k].str().c_str(), nullptr); };
    // The grid's z is B × the heads it runs: B·HKV when the group is packed into one instance.
    if (dim(3) != double(B * Hkv)) {
      report.skipped.push_back(fmt::format("{}: PyTorch's kernel ran {} (batch, head) instances, not B·HKV = {}: with "
                                           "{} query rows it reads each K/V head once per query head, a launch no "
                                           "room models",
                                           where, dim(3), B * Hkv, Nq));
      continue;
    }
    std::optional<ValidationRow> found = sdpa_row(name, Pass::forward, true, "sdpa flash", path, gpu, where, report);
    if (!found) continue;
    ValidationRow& row = *found;
    Json problem = {{"batch", B}, {"heads", H}, {"kv_heads", Hkv}, {"query_len", Nq}, {"seq_len", r.at("N")},
                    {"head_dim", r.at("d")}, {"dtype", r.value("dtype", "fp16")}};
    problem["splits"] = split ? launch_figure(dim(2), where + ": grid y (splits)") : 1;
    row.problem = problem_of(problem, where);
    read_sdpa_launch(*main_kernel, t, where + ": Flash_fwd_kernel_traits", where, row);
    row.launch.combine_split_by_split = true;
    row.launch.pytorch_decode_kernels = true;
    // Under ncu's --cache-control all each kernel starts with an empty L2: the combine reads the split
    // kernel's partials from DRAM, not from the L2 that holds them in a step.
    row.l2_flushed_between_kernels = cache_control_all;
    row.measured_time_s = time_ns * 1e-9;
    row.measured_dram_read = dram_read;
    row.measured_dram_write = dram_write;
    row.measured_l2_read = l2_read;
    check_row(row, where);
    report.rows.push_back(row);
  }
}

// The on-chip counters of a record, where it has them: numbers ≥ 0, tensor_pipe_busy at most 1.
MeasuredOnChip read_on_chip(const Json& r, const std::string& where) {
  MeasuredOnChip m;
  for (int k = 0; k < int(std::size(MeasuredOnChip::kKeys)); ++k) {
    const char* key = MeasuredOnChip::kKeys[k];
    if (!r.contains(key)) continue;
    const Json& v = r.at(key);
    if (!v.is_number()) fail_input("{}.{}: expected a number, got {}", where, key, v.dump());
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < 0) fail_input("{}.{}: must be a number ≥ 0, got {}", where, key, v.dump());
    if (k == 6 && x > 1) fail_input("{}.{}: a fraction of the kernel's cycles, must be at most 1, got {}", where, key, x);
    *m.field(k) = x;
  }
  return m;
}

// `hbmlab measure` files (docs/design.md#measurement-files): hbmlab's own kernels, with the
// blocks they ran with. A record may add "launch": {"threads_per_cta", "registers_per_thread",
// "smem_bytes_per_cta", "ctas", "kv_descending"}; without it the launch is the engine's default. "pass":
// "backward" names the room of the backward pass (absent: the forward).
void read_records(const Json& file, const std::string& path, const std::string& gpu, ValidationReport& report) {
  const Json& records = file.at("records");
  if (!records.is_array()) fail_input("{}: records: expected an array of records, got {}", path, records.type_name());
  // `hbmlab measure` times with CUDA events ("cuda-events median ..."); --on-chip files profiled
  // under Nsight Compute say "ncu gpu__time_duration ...".
  const bool events = file.contains("method") && file.at("method").is_object() &&
                      file.at("method").value("timing", "").rfind("cuda-events", 0) == 0;
  for (std::size_t n = 0; n < records.size(); ++n) {
    const Json& r = records[n];
    const std::string where = fmt::format("{}: records[{}]", path, n);
    if (!r.is_object()) fail_input("{}: expected an object, got {}", where, r.type_name());
    const std::optional<Pass> pass = parse_pass(r.value("pass", "forward"));
    if (!pass) fail_input("{}.pass: '{}' is not forward or backward", where, r.value("pass", ""));
    const auto algo = parse_algo(r.value("kernel", ""), *pass);
    if (!algo && room_for_kernel(r.value("kernel", ""), *pass, false))
      fail_input("{}.kernel: PyTorch's FlashAttention-2 kernel without its registers and shared memory per CTA, "
                 "which set how many CTAs share an SM (a layout study); calibration files' \"sdpa\" records carry them",
                 where);
    if (!algo) fail_input("{}.kernel: '{}' is not {}", where, r.value("kernel", ""), algo_names(*pass, " or "));
    ValidationRow row;
    row.file = path;
    row.source = std::string(to_string(*algo));
    row.gpu = gpu;
    row.algo = *algo;
    row.problem = problem_of(member(r, "problem", where), where + ".problem");
    const Json& blocks = member(r, "blocks", where);
    row.blocks = {whole_number(member(blocks, "Br", where + ".blocks"), where + ".blocks.Br"),
                  whole_number(member(blocks, "Bc", where + ".blocks"), where + ".blocks.Bc")};
    row.launch.hbmlab_kernels = true;  // these records time gpu/'s kernels, not the reference launch
    if (r.contains("launch")) {  // optional: how the kernel was launched, when the file records it
      const Json& l = r.at("launch");
      for (auto [key, field] : {std::pair{"threads_per_cta", &LaunchOverride::threads_per_cta},
                                std::pair{"registers_per_thread", &LaunchOverride::registers_per_thread},
                                std::pair{"smem_bytes_per_cta", &LaunchOverride::smem_bytes_per_cta},
                                std::pair{"ctas", &LaunchOverride::ctas}})
        if (l.contains(key)) {
          const std::string at = fmt::format("{}.launch.{}", where, key);
          row.launch.*field = launch_figure(whole_number(l.at(key), at), at);
        }
      row.launch.kv_descending = flag_or(l, "kv_descending", false, where + ".launch");
    }
    row.measured_time_s = measured_figure(r, "time_ms_median", where, true) * 1e-3;
    row.timed_by_events = events;
    row.measured_dram_read = measured_figure(r, "dram_read_bytes", where, false);
    row.measured_dram_write = measured_figure(r, "dram_write_bytes", where, false);
    row.measured_l2_read = measured_figure(r, "l2_sm_read_bytes", where, false);
    row.measured_on_chip = read_on_chip(r, where);
    if (!std::isfinite(row.measured_time_s) && !std::isfinite(row.measured_dram_read)) {
      report.skipped.push_back(where + ": neither a time nor DRAM counters were recorded");
      continue;
    }
    check_row(row, where);
    report.rows.push_back(row);
  }
}

// [SECTION] Errors and summaries

double relative(double predicted, double measured) {
  return std::isfinite(measured) && measured > 0 ? (predicted - measured) / measured : kNaN;
}

ValidationSummary summarise(const std::vector<double>& errors, double tolerance) {
  ValidationSummary s;
  s.tolerance = tolerance;
  double sum = 0;
  for (double e : errors) {
    if (!std::isfinite(e)) continue;
    ++s.count;
    sum += std::abs(e);
    if (std::abs(e) <= tolerance) ++s.within;
    if (std::abs(e) > std::abs(s.worst)) s.worst = e;
  }
  s.mean_abs = s.count ? sum / double(s.count) : kNaN;
  return s;
}

}  // namespace

bool MeasuredOnChip::any() const {
  for (int k = 0; k < int(std::size(kKeys)); ++k)
    if (std::isfinite(*field(k))) return true;
  return false;
}

double* MeasuredOnChip::field(int k) {
  double* fields[] = {&smem_ld_bytes,         &smem_st_bytes,    &smem_mma_bytes,  &mma_instructions,
                      &ldmatrix_instructions, &ex2_instructions, &tensor_pipe_busy};
  return fields[k];
}

double ValidationRow::time_error() const { return relative(predicted_time_s, measured_time_s); }

double ValidationRow::dram_read_error() const { return relative(predicted_dram_read, measured_dram_read); }

std::string RoomSummary::label() const {
  return fmt::format("{} {}, {}{}", gpu, to_string(algo), pytorch ? "PyTorch SDPA" : "hbmlab's kernel",
                     l2_set_aside ? ", L2 partly set aside" : "");
}

std::vector<RoomSummary> summarise_by_room(const ValidationReport& report) {
  struct Group {
    RoomSummary summary;
    std::vector<double> time_errors, dram_errors;
  };
  std::vector<Group> groups;
  for (const ValidationRow& row : report.rows) {
    const bool pytorch = row.source.rfind("sdpa", 0) == 0;
    const bool set_aside = row.l2_set_aside_bytes > 0;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.summary.gpu == row.gpu && g.summary.algo == row.algo && g.summary.pytorch == pytorch &&
             g.summary.l2_set_aside == set_aside;
    });
    if (it == groups.end()) {
      groups.push_back({RoomSummary{row.gpu, row.algo, pytorch, set_aside, {}, {}}, {}, {}});
      it = groups.end() - 1;
    }
    it->time_errors.push_back(row.time_error());
    it->dram_errors.push_back(row.dram_read_error());
  }
  std::vector<RoomSummary> out;
  for (Group& g : groups) {
    g.summary.time = summarise(g.time_errors, report.targets.time);
    g.summary.dram_read = summarise(g.dram_errors, report.targets.dram_read);
    out.push_back(std::move(g.summary));
  }
  return out;
}

namespace {

// Appends `more`'s rows, skipped records and skipped files to `report`.
void merge(ValidationReport& report, const ValidationReport& more) {
  report.rows.insert(report.rows.end(), more.rows.begin(), more.rows.end());
  report.skipped.insert(report.skipped.end(), more.skipped.begin(), more.skipped.end());
  report.skipped_files.insert(report.skipped_files.end(), more.skipped_files.begin(), more.skipped_files.end());
}

// The rows and skipped records of one file; InputError when it cannot be read or has the wrong shape.
ValidationReport read_file(const std::string& path, const std::optional<std::string>& gpu) {
  return parse_measurements(read_text_file(path), path, gpu);
}

}  // namespace

ValidationReport parse_measurements(std::string_view json_text, const std::string& path,
                                    const std::optional<std::string>& gpu) {
  ValidationReport one;
  Json file;
  try {
    file = Json::parse(json_text);
  } catch (const Json::exception& e) {
    fail_input("{}: not JSON: {}", path, json_error_text(e));
  }
  try {
    if (!file.is_object() || (!file.contains("sdpa") && !file.contains("sdpa_decode") && !file.contains("records")))
      fail_input("{}: neither \"sdpa\" or \"sdpa_decode\" (a calibration file) nor \"records\" (a measurement file)",
                 path);
    const std::string preset = gpu ? *gpu : preset_for(file.value("device", Json::object()), path);
    if (file.contains("sdpa")) read_sdpa(file, path, preset, one);
    else if (file.contains("sdpa_decode")) read_sdpa_decode(file, path, preset, one);
    else read_records(file, path, preset, one);
  } catch (const Json::exception& e) {
    fail_input("{}: {}", path, json_error_text(e));
  }
  return one;
}

std::vector<std::string> json_files_in(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

ValidationReport read_measurements(const std::vector<std::string>& files, const std::optional<std::string>& gpu,
                                   FileErrors on_error) {
  if (files.empty()) fail_input("--measurements: give at least one measurement file");
  ValidationReport report;
  for (const std::string& path : files) {
    ValidationReport one;
    try {
      one = read_file(path, gpu);
    } catch (const InputError& e) {
      if (on_error == FileErrors::fail) throw;
      report.skipped_files.push_back(e.what());  // the message starts with the file's path
      continue;
    }
    merge(report, one);
  }
  return report;
}

// The timing engine on every row (on all cores: a large file takes a minute on one), then the
// summaries.
void predict_measurements(ValidationReport& report, const Progress& progress) {
  parallel_for(
      report.rows.size(),
      [&](std::size_t i) {
        ValidationRow& row = report.rows[i];
        const GpuSpec spec = row.l2_set_aside_bytes == 0 ? load_gpu(row.gpu)
                                                         : gpu_with_l2_set_aside(load_gpu(row.gpu), row.l2_set_aside_bytes, row.file);
        EngineOptions options;
        options.launch = row.launch;
        options.l2_flushed_between_kernels = row.l2_flushed_between_kernels;
        EngineResult e;
        try {
          e = run_engine(row.algo, row.problem, row.blocks, spec, options);
        } catch (const InputError& error) {
          // The record named, not the option a simulate run would have set (`--hbmlab-kernels: `).
          const std::string_view what = error.what();
          const std::size_t colon = what.starts_with("--") ? what.find(": ") : std::string_view::npos;
          fail_input("{}: {}", row.where.empty() ? row.file : row.where,
                     colon == std::string_view::npos ? what : what.substr(colon + 2));
        }
        // The engine's time is the kernels' own, as Nsight Compute measures them one by one; CUDA events
        // around the sequence also see the events themselves and the gaps between its kernels.
        row.predicted_time_s = e.predicted_s;
        if (row.timed_by_events && !e.kernels.empty())
          row.predicted_time_s += (spec.event_timing_overhead_ns + spec.kernel_gap_ns * double(e.kernels.size() - 1)) * 1e-9;
        row.predicted_dram_read = double(e.dram_read_bytes());
        row.predicted_dram_write = double(e.dram_write_bytes());
        row.predicted_l2_read = double(e.sm_read_bytes());
        row.predicted_on_chip = {};
        for (const KernelTiming& k : e.kernels) row.predicted_on_chip += k.on_chip;
        // The tensor pipe's busy share of the engine's time, each kernel's FLOPs at its instruction
        // kind's measured rate and at the clock the engine ran that kernel at (as `simulate --json`).
        row.predicted_tensor_busy = pipe_busy(e.kernels, e.predicted_s, spec).tensor.value_or(kNaN);
      },
      progress);
  summarise_measurements(report);
}

GpuSpec gpu_with_l2_set_aside(GpuSpec gpu, std::int64_t bytes, std::string_view where) {
  const std::int64_t way = gpu.l2_ways > 0 ? gpu.l2_bytes / gpu.l2_ways : 0;
  if (bytes < 0 || way <= 0 || bytes % way != 0 || bytes / way >= gpu.l2_ways)
    fail_input("{}: {} bytes is not a whole number of the L2's ways ({} bytes each) short of all {} of them", where,
               bytes, way, gpu.l2_ways);
  const std::int64_t kept = gpu.l2_ways - bytes / way;
  gpu.l2_effective_bytes = gpu.l2_effective_bytes / gpu.l2_ways * kept;
  gpu.l2_ways = kept;
  return gpu;
}

void summarise_measurements(ValidationReport& report) {
  std::vector<double> time_errors, dram_errors;
  for (const ValidationRow& row : report.rows) {
    time_errors.push_back(row.time_error());
    dram_errors.push_back(row.dram_read_error());
  }
  report.time = summarise(time_errors, report.targets.time);
  report.dram_read = summarise(dram_errors, report.targets.dram_read);
}

ValidationReport validate_measurements(const std::vector<std::string>& files, const std::optional<std::string>& gpu,
                                       FileErrors on_error, const Progress& progress) {
  ValidationReport report = read_measurements(files, gpu, on_error);
  predict_measurements(report, progress);
  return report;
}

ValidationReport validate_paths(const std::vector<std::string>& paths, const std::optional<std::string>& gpu,
                                const Progress& progress, const ValidationTargets& targets) {
  if (paths.empty()) fail_input("--measurements: give at least one measurement file or folder");
  // Every file is read once, before any engine work, so a bad named file fails at once; a file
  // named and also found in a named folder is read as named.
  auto canonical = [](const std::string& file) {
    std::error_code ec;
    return std::filesystem::weakly_canonical(file, ec);
  };
  std::vector<std::filesystem::path> named, seen;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) named.push_back(canonical(path));
  }
  auto first_time = [&](const std::filesystem::path& file) {
    if (std::find(seen.begin(), seen.end(), file) != seen.end()) return false;
    seen.push_back(file);
    return true;
  };
  auto is_named = [&](const std::filesystem::path& file) {
    return std::find(named.begin(), named.end(), file) != named.end();
  };
  ValidationReport report;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      std::vector<std::string> found = json_files_in(path);
      if (found.empty()) fail_input("--measurements: {}: no *.json files in this folder", path);
      found.erase(std::remove_if(found.begin(), found.end(),
                                 [&](const std::string& f) {
                                   const std::filesystem::path file = canonical(f);
                                   return is_named(file) || !first_time(file);
                                 }),
                  found.end());
      if (!found.empty()) merge(report, read_measurements(found, gpu, FileErrors::skip));
    } else if (first_time(canonical(path))) {
      merge(report, read_measurements({path}, gpu, FileErrors::fail));
    }
  }
  report.targets = targets;
  predict_measurements(report, progress);
  return report;
}

// [SECTION] Reports

namespace {

std::string percent_text(double e) { return std::isfinite(e) ? fmt::format("{:+.1f}%", 100 * e) : "—"; }
std::string mb_text(double b) { return std::isfinite(b) ? fmt::format("{:.1f}", b / 1e6) : "—"; }
std::string ms_text(double s) { return std::isfinite(s) ? fmt::format("{:.3f}", s * 1e3) : "—"; }
// A cut-off as given on the command line: 0.1 → "10%", 0.025 → "2.5%".
std::string cutoff_text(double fraction) { return fmt::format("{:g}%", 100 * fraction); }

// The records that carry on-chip counters: the bytes shared memory hands to registers and to the
// tensor cores (loads, stores and wgmma's operand reads together), measured against the warp
// layout's exact count, and the tensor pipe's busy fraction against the predicted time's.
// Loads, stores and wgmma's operand reads together, of the fields a record has (older records carry
// no wgmma operand bytes); NaN when it has none.
double measured_smem_bytes(const MeasuredOnChip& m) {
  double bytes = 0;
  int have = 0;
  for (double b : {m.smem_ld_bytes, m.smem_st_bytes, m.smem_mma_bytes})
    if (std::isfinite(b)) bytes += b, ++have;
  return have > 0 ? bytes : kNaN;
}

void print_on_chip(std::ostream& out, const ValidationReport& r) {
  std::vector<const ValidationRow*> rows;
  for (const ValidationRow& row : r.rows)
    if (row.measured_on_chip.any()) rows.push_back(&row);
  if (rows.empty()) return;
  fmt::print(out, "On chip, for the records that carry the SM's counters (ncu or CUPTI)\n");
  fmt::print(out, "  {:<15} {:>6} {:>4} {:<6} {:>7}  {:>9} {:>9} {:>7}  {:>8} {:>8} {:>8} {:>8}\n", "source", "N", "d", "mask",
             "Br×Bc", "smem GB", "pred", "err", "ex2 M", "pred", "tensor", "pred");
  auto num = [](double x, const char* f) { return std::isfinite(x) ? fmt::format(fmt::runtime(f), x) : std::string("—"); };
  std::vector<double> errors;
  for (const ValidationRow* row : rows) {
    const MeasuredOnChip& m = row->measured_on_chip;
    const SmemBytes t = row->predicted_on_chip.total();
    const double measured = measured_smem_bytes(m);
    const double predicted = double(t.read + t.write + t.mma_read + row->predicted_on_chip.mbarrier_bytes());
    if (measured > 0) errors.push_back(predicted / measured - 1);
    fmt::print(out, "  {:<15} {:>6} {:>4} {:<6} {:>7}  {:>9} {:>9} {:>7}  {:>8} {:>8} {:>8} {:>8}\n", row->source,
               row->problem.seq_len, row->problem.head_dim, row->problem.causal ? "causal" : "full",
               fmt::format("{}×{}", row->blocks.Br, row->blocks.Bc), num(measured / 1e9, "{:.2f}"),
               num(predicted / 1e9, "{:.2f}"), percent_text(predicted / measured - 1), num(m.ex2_instructions / 1e6, "{:.1f}"),
               num(double(row->predicted_on_chip.ex2) / 1e6, "{:.1f}"), num(m.tensor_pipe_busy, "{:.2f}"),
               num(row->predicted_tensor_busy, "{:.2f}"));
  }
  if (!errors.empty()) {
    const ValidationSummary smem = summarise(errors, 0.05);
    fmt::print(out, "  shared-memory bytes: mean |error| {} over {} records, worst {}; {} of {} within 5%\n",
               percent_text(smem.mean_abs).substr(1), smem.count, percent_text(smem.worst), smem.within, smem.count);
  }
  fmt::print(out, "  (smem: bytes shared memory hands to registers and tensor cores, loads + stores + wgmma operand\n"
                  "   reads, the counters' wavefronts × 128 against the kernel's warp layout; ex2: exponent-unit instructions;\n"
                  "   tensor: the tensor pipe's busy fraction, measured, and its FLOPs at the measured rate over the\n"
                  "   predicted time, at the clock the engine runs the pipes at)\n\n");
}

}  // namespace

void print_validation(std::ostream& out, const ValidationReport& r) {
  fmt::print(out, "Predicted (hbmlab timing engine) against measured, one row per configuration\n");
  auto mask_of = [](const AttentionProblem& p) {
    return p.block_mask ? fmt::format("{}+{}", p.causal ? "causal" : "full", p.block_mask->spec())
                        : std::string(p.causal ? "causal" : "full");
  };
  // A record measured with part of the L2 set aside names the GPU with what was set aside.
  auto gpu_of = [](const ValidationRow& row) {
    return row.l2_set_aside_bytes == 0 ? row.gpu
                                       : fmt::format("{}−{:.2f}MiB", row.gpu, double(row.l2_set_aside_bytes) / (1 << 20));
  };
  // Characters, not bytes: fmt pads by code points.
  auto chars = [](const std::string& t) {
    return static_cast<std::size_t>(std::count_if(t.begin(), t.end(), [](char c) { return (c & 0xC0) != 0x80; }));
  };
  // The text columns as wide as their longest entry (a mask such as full+local:1024 is longer than its header).
  std::size_t source_w = 10, gpu_w = 9, mask_w = 6;
  for (const ValidationRow& row : r.rows) {
    source_w = std::max(source_w, row.source.size());
    gpu_w = std::max(gpu_w, chars(gpu_of(row)));
    mask_w = std::max(mask_w, mask_of(row.problem).size());
  }
  auto line = [&](const auto& source, const auto& gpu, const auto& batch, const auto& heads, const auto& N, const auto& d,
                  const std::string& mask, const std::string& blocks, const std::string& order, const std::string& dram,
                  const std::string& dram_pred, const std::string& dram_err, const std::string& time,
                  const std::string& time_pred, const std::string& time_err) {
    fmt::print(out, "  {:<{}} {:<{}} {:>2} {:>3} {:>6} {:>4} {:<{}} {:>7} {:<4}  {:>9} {:>9} {:>7}  {:>8} {:>8} {:>7}\n",
               source, source_w, gpu, gpu_w, batch, heads, N, d, mask, mask_w, blocks, order, dram, dram_pred, dram_err,
               time, time_pred, time_err);
  };
  line("source", "gpu", "B", "H", "N", "d", "mask", "Br×Bc", "K/V", "DRAM rd", "pred", "err", "time ms", "pred", "err");
  for (const ValidationRow& row : r.rows) {
    const AttentionProblem& p = row.problem;
    const char* order = !row.algo->has_kv_order() ? "" : row.launch.kv_descending ? "desc" : "asc";
    line(row.source, gpu_of(row), p.batch, p.heads, p.seq_len, p.head_dim, mask_of(p),
         fmt::format("{}×{}", row.blocks.Br, row.blocks.Bc), order, mb_text(row.measured_dram_read),
         mb_text(row.predicted_dram_read), percent_text(row.dram_read_error()), ms_text(row.measured_time_s),
         ms_text(row.predicted_time_s), percent_text(row.time_error()));
  }
  fmt::print(out, "  (DRAM rd in MB: measured dram__bytes_read.sum against predicted DRAM reads after the L2; time:\n"
                  "   measured kernel duration against predicted; K/V: the order flash2 visits K/V blocks in, asc from\n"
                  "   the first, desc from the last as PyTorch's FlashAttention-2 does)\n\n");
  print_on_chip(out, r);
  auto summary_line = [&](const char* what, const ValidationSummary& s) {
    if (s.count == 0) {
      fmt::print(out, "{} no record measures it\n", what);
      return;
    }
    fmt::print(out, "{} mean |error| {} over {} records, worst {}; {} of {} within {}\n", what,
               percent_text(s.mean_abs).substr(1), s.count, percent_text(s.worst), s.within, s.count,
               cutoff_text(s.tolerance));
  };
  summary_line("DRAM read bytes:", r.dram_read);
  summary_line("kernel time:    ", r.time);
  const std::vector<RoomSummary> rooms = summarise_by_room(r);
  if (rooms.size() > 1) {
    auto mean = [](double m) { return std::isfinite(m) ? fmt::format("{:.1f}%", 100 * m) : std::string("—"); };
    fmt::print(out, "by GPU, room and kernel (mean |error|; records within {} for DRAM reads, {} for time):\n",
               cutoff_text(r.targets.dram_read), cutoff_text(r.targets.time));
    std::size_t label_w = 46;
    for (const RoomSummary& g : rooms) label_w = std::max(label_w, g.label().size());
    for (const RoomSummary& g : rooms)
      fmt::print(out, "  {:<{}} DRAM read {:>6} ({:>3} of {:>3})   time {:>6} ({:>3} of {:>3})\n", g.label(), label_w,
                 mean(g.dram_read.mean_abs), g.dram_read.within, g.dram_read.count, mean(g.time.mean_abs), g.time.within,
                 g.time.count);
  }
  // Skipped records, grouped by reason (--json lists each one).
  std::vector<std::pair<std::string, int>> reasons;
  for (const std::string& s : r.skipped) {
    const std::string reason = s.substr(s.find(": ", s.find("]")) + 2);
    auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& x) { return x.first == reason; });
    if (it == reasons.end()) reasons.push_back({reason, 1}); else ++it->second;
  }
  for (const auto& [reason, count] : reasons) fmt::print(out, "skipped {} records: {}\n", count, reason);
  for (const std::string& why : r.skipped_files) fmt::print(out, "left out {}\n", why);
}

nlohmann::ordered_json validation_json(const ValidationReport& r) {
  auto num = [](double x) { return std::isfinite(x) ? Json(x) : Json(nullptr); };
  Json rows = Json::array();
  for (const ValidationRow& row : r.rows) {
    rows.push_back({{"file", row.file}, {"source", row.source}, {"gpu", row.gpu}, {"algorithm", to_string(row.algo)},
                    {"problem", problem_json(row.problem)},
                    {"blocks", {{"Br", row.blocks.Br}, {"Bc", row.blocks.Bc}}},
                    {"measured", {{"time_s", num(row.measured_time_s)}, {"dram_read_bytes", num(row.measured_dram_read)},
                                  {"dram_write_bytes", num(row.measured_dram_write)},
                                  {"l2_sm_read_bytes", num(row.measured_l2_read)}}},
                    {"predicted", {{"time_s", row.predicted_time_s}, {"dram_read_bytes", row.predicted_dram_read},
                                   {"dram_write_bytes", row.predicted_dram_write},
                                   {"l2_sm_read_bytes", row.predicted_l2_read}}},
                    {"error", {{"time", num(row.time_error())}, {"dram_read", num(row.dram_read_error())}}}});
    if (row.measured_on_chip.any()) {  // the on-chip counters, measured and as the warp layout predicts them
      const MeasuredOnChip& m = row.measured_on_chip;
      Json measured = Json::object();
      for (int k = 0; k < int(std::size(MeasuredOnChip::kKeys)); ++k) measured[MeasuredOnChip::kKeys[k]] = num(*m.field(k));
      const OnChipCounts& c = row.predicted_on_chip;
      const SmemBytes t = c.total();
      rows.back()["measured"]["on_chip"] = measured;
      rows.back()["predicted"]["on_chip"] = {
          {"smem_ld_bytes", t.read},        {"smem_st_bytes", t.write},
          {"smem_mma_bytes", t.mma_read + c.mbarrier_bytes()},  // ncu's other wavefronts: wgmma operands, mbarriers
          {"mma_instructions", c.mma + 4 * c.wgmma},  // ncu counts a wgmma as 4 warp instructions
          {"ldmatrix_instructions", c.ldmatrix},
          {"ex2_instructions", c.ex2},      {"tensor_pipe_busy", num(row.predicted_tensor_busy)}};
    }
  }
  auto summary = [&](const ValidationSummary& s) {
    return Json{{"count", s.count}, {"mean_abs", num(s.mean_abs)}, {"worst", num(s.worst)}, {"tolerance", s.tolerance},
                {"within", s.within}};
  };
  return {{"rows", rows}, {"summary", {{"time", summary(r.time)}, {"dram_read", summary(r.dram_read)}}},
          {"skipped", r.skipped}, {"skipped_files", r.skipped_files}};
}

}  // namespace hbmlab
