// Loading GpuSpec presets from TOML. Every number is an inline table
// `key = { value = ..., unit = "...", source = "..." }`; the unit must match the key's.
#include "sim/spec/gpu_spec.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <variant>

#include <toml++/toml.h>

#include "sim/common/error.hpp"
#include "sim/scenario/embedded.hpp"

namespace hbmlab {
namespace {

struct Field {
  std::string_view key;
  std::string_view unit;
  std::variant<std::int64_t GpuSpec::*, double GpuSpec::*> member;
  bool power_of_two = false;
  bool at_most_one = false;  // a fraction of a peak rate
  bool optional = false;     // a measured number (a pipe rate, a latency) a preset may leave out
};

// The numbers a preset must give, with the unit each must be written in.
constexpr Field kFields[] = {
    {"sm_count", "SMs", &GpuSpec::sm_count},
    {"clock_mhz", "MHz", &GpuSpec::clock_mhz},
    {"sram_bytes_per_sm", "bytes", &GpuSpec::sram_bytes_per_sm},
    {"sram_bytes_per_block", "bytes", &GpuSpec::sram_bytes_per_block},
    {"sram_bytes_per_cycle_per_sm", "bytes/cycle", &GpuSpec::sram_bytes_per_cycle_per_sm},
    {"max_ctas_per_sm", "CTAs", &GpuSpec::max_ctas_per_sm},
    {"max_threads_per_sm", "threads", &GpuSpec::max_threads_per_sm},
    {"l2_bytes", "bytes", &GpuSpec::l2_bytes},
    {"l2_line_bytes", "bytes", &GpuSpec::l2_line_bytes, true},
    {"l2_sector_bytes", "bytes", &GpuSpec::l2_sector_bytes, true},
    {"hbm_bandwidth_gbps", "GB/s", &GpuSpec::hbm_bandwidth_gbps},
    {"hbm_latency_ns", "ns", &GpuSpec::hbm_latency_ns},
    {"tensor_tflops", "TFLOP/s", &GpuSpec::tensor_tflops},
    {"non_matmul_tflops", "TFLOP/s", &GpuSpec::non_matmul_tflops},
    {"l2_effective_bytes", "bytes", &GpuSpec::l2_effective_bytes},
    {"l2_ways", "ways", &GpuSpec::l2_ways},
    {"l2_dirty_limit_bytes", "bytes", &GpuSpec::l2_dirty_limit_bytes, false, false, true},
    {"l2_bandwidth_gbps", "GB/s", &GpuSpec::l2_bandwidth_gbps},
    {"l2_latency_ns", "ns", &GpuSpec::l2_latency_ns},
    {"hbm_bytes_in_flight_per_sm", "bytes", &GpuSpec::hbm_bytes_in_flight_per_sm},
    {"hbm_bytes_in_flight_per_cta", "bytes", &GpuSpec::hbm_bytes_in_flight_per_cta, false, false, true},
    {"hbm_loaded_latency_sharpness", "exponent", &GpuSpec::hbm_loaded_latency_sharpness, false, false, true},
    {"hbm_load_gbps_per_thread", "GB/s", &GpuSpec::hbm_load_gbps_per_thread, false, false, true},
    {"hbm_thread_ceiling_sharpness", "exponent", &GpuSpec::hbm_thread_ceiling_sharpness, false, false, true},
    {"registers_per_sm", "registers", &GpuSpec::registers_per_sm},
    {"kernel_overhead_ns", "ns", &GpuSpec::kernel_overhead_ns},
    {"event_timing_overhead_ns", "ns", &GpuSpec::event_timing_overhead_ns, false, false, true},
    {"kernel_gap_ns", "ns", &GpuSpec::kernel_gap_ns, false, false, true},
    {"gemm_efficiency", "fraction", &GpuSpec::gemm_efficiency, false, true},
    {"hbm_efficiency", "fraction", &GpuSpec::hbm_efficiency, false, true},
    {"mma_sync_flops_per_cycle_per_sm", "FLOP/cycle", &GpuSpec::mma_sync_flops_per_cycle_per_sm, false, false, true},
    {"mma_sync_flops_per_cycle_per_warp", "FLOP/cycle", &GpuSpec::mma_sync_flops_per_cycle_per_warp, false, false, true},
    {"wgmma_flops_per_cycle_per_sm", "FLOP/cycle", &GpuSpec::wgmma_flops_per_cycle_per_sm, false, false, true},
    {"ex2_per_cycle_per_sm", "results/cycle", &GpuSpec::ex2_per_cycle_per_sm, false, false, true},
    {"fp32_fma_flops_per_cycle_per_sm", "FLOP/cycle", &GpuSpec::fp32_fma_flops_per_cycle_per_sm, false, false, true},
    {"issue_per_cycle_per_sm", "instructions/cycle", &GpuSpec::issue_per_cycle_per_sm, false, false, true},
    {"pipe_clock_mhz", "MHz", &GpuSpec::pipe_clock_mhz, false, false, true},
    {"wgmma_wait_cycles", "cycles", &GpuSpec::wgmma_wait_cycles, false, false, true},
    {"mma_sync_latency_cycles", "cycles", &GpuSpec::mma_sync_latency_cycles, false, false, true},
    {"ldmatrix_latency_cycles", "cycles", &GpuSpec::ldmatrix_latency_cycles, false, false, true},
    {"barrier_cycles", "cycles", &GpuSpec::barrier_cycles, false, false, true},
    {"fp32_fma_latency_cycles", "cycles", &GpuSpec::fp32_fma_latency_cycles, false, false, true},
    {"ld_shared_latency_cycles", "cycles", &GpuSpec::ld_shared_latency_cycles, false, false, true},
    {"shuffle_step_cycles", "cycles", &GpuSpec::shuffle_step_cycles, false, false, true},
    {"expf_latency_cycles", "cycles", &GpuSpec::expf_latency_cycles, false, false, true},
    {"fp32_divide_latency_cycles", "cycles", &GpuSpec::fp32_divide_latency_cycles, false, false, true},
    {"fp32_matmul_sram_share_per_cta", "fraction", &GpuSpec::fp32_matmul_sram_share_per_cta, false, true, true},
    {"global_load_wavefronts_per_warp", "wavefronts", &GpuSpec::global_load_wavefronts_per_warp, false, false, true},
    {"global_store_wavefronts_per_warp", "wavefronts", &GpuSpec::global_store_wavefronts_per_warp, false, false, true},
    {"l2_reduction_sector_gbps", "GB/s", &GpuSpec::l2_reduction_sector_gbps, false, false, true},
    {"l2_reduction_line_gbps", "GB/s", &GpuSpec::l2_reduction_line_gbps, false, false, true},
    {"sm_reduction_sector_cycles", "cycles", &GpuSpec::sm_reduction_sector_cycles, false, false, true},
    {"sm_reduction_line_cycles", "cycles", &GpuSpec::sm_reduction_line_cycles, false, false, true},
    {"sm_reduction_queue_cycles", "cycles", &GpuSpec::sm_reduction_queue_cycles, false, false, true},
    {"l2_partitions", "partitions", &GpuSpec::l2_partitions, false, false, true},
    {"l2_partition_run_sms", "SMs", &GpuSpec::l2_partition_run_sms, false, false, true},
    {"l2_partition_first_sms", "SMs", &GpuSpec::l2_partition_first_sms, false, false, true},
};

constexpr double kMaxWholeNumber = 9007199254740992.0;  // 2^53

std::string where(std::string_view origin, const toml::node& node) {
  return fmt::format("{}:{}", origin, node.source().begin.line);
}

}  // namespace

GpuSpec parse_gpu_spec(std::string_view toml_text, std::string_view origin) {
  toml::table root;
  try {
    root = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    fail_input("{}:{}: {}", origin, e.source().begin.line, e.description());
  }

  GpuSpec spec;
  spec.origin = std::string(origin);
  for (auto&& [key, node] : root) {
    if (key == "name" || key == "display_name") {
      const auto* text = node.as_string();
      if (!text) fail_input("{}: {}: expected a string", where(origin, node), key.str());
      (key == "name" ? spec.name : spec.display_name) = text->get();
    } else if (key != "numbers") {
      fail_input("{}: {}: unknown key (expected name, display_name, [numbers])", where(origin, node), key.str());
    }
  }
  if (spec.name.empty()) fail_input("{}:1: name: missing", origin);
  if (spec.display_name.empty()) spec.display_name = spec.name;

  const toml::table* numbers = root["numbers"].as_table();
  if (!numbers) fail_input("{}:1: numbers: missing table [numbers]", origin);

  for (auto&& [toml_key, node] : *numbers) {
    const std::string_view key = toml_key;  // a name the lambdas below may capture
    const std::string at = where(origin, node);
    const auto field = std::find_if(std::begin(kFields), std::end(kFields),
                                    [&](const Field& f) { return f.key == key; });
    if (key == "matmul_efficiency" || key == "non_matmul_efficiency")
      fail_input("{}: numbers.{}: no longer a key: every kernel is timed from the SM's pipes "
                 "(mma_sync_flops_per_cycle_per_sm, ex2_per_cycle_per_sm, …; docs/design.md#the-sms-pipes)",
                 at, key);
    if (field == std::end(kFields))
      fail_input("{}: numbers.{}: unknown key", at, key);
    const toml::table* entry = node.as_table();
    if (!entry) fail_input("{}: numbers.{}: expected {{ value = ..., unit = \"{}\", source = \"...\" }}", at, key, field->unit);

    Quantity q;
    q.key = std::string(key);
    const auto value = (*entry)["value"].value<double>();
    const auto unit = (*entry)["unit"].value<std::string>();
    const auto source = (*entry)["source"].value<std::string>();
    if (!value) fail_input("{}: numbers.{}.value: missing or not a number", at, key);
    if (!unit) fail_input("{}: numbers.{}.unit: missing (expected \"{}\")", at, key, field->unit);
    if (!source || source->empty()) fail_input("{}: numbers.{}.source: missing; every number needs its source", at, key);
    if (*unit != field->unit)
      fail_input("{}: numbers.{}.unit: \"{}\", expected \"{}\"", at, key, *unit, field->unit);
    if (!(*value > 0) || !std::isfinite(*value))
      fail_input("{}: numbers.{}.value: must be a positive number, got {}", at, key, *value);
    if (field->at_most_one && *value > 1)
      fail_input("{}: numbers.{}.value: a fraction of the peak rate, must be at most 1, got {}", at, key, *value);
    q.value = *value;
    q.unit = *unit;
    q.source = *source;

    std::visit(
        [&](auto member) {
          using T = std::remove_reference_t<decltype(spec.*member)>;
          if constexpr (std::is_integral_v<T>) {
            if (q.value != std::floor(q.value))
              fail_input("{}: numbers.{}.value: must be a whole number, got {}", at, key, q.value);
            // Whole numbers stay exact in a double up to 2^53; larger ones would not survive the cast.
            if (q.value > kMaxWholeNumber)
              fail_input("{}: numbers.{}.value: {} is more than hbmlab models ({})", at, key, q.value, kMaxWholeNumber);
            spec.*member = static_cast<T>(q.value);
            if (field->power_of_two && (spec.*member & (spec.*member - 1)) != 0)
              fail_input("{}: numbers.{}.value: must be a power of two, got {}", at, key, spec.*member);
          } else {
            spec.*member = q.value;
          }
        },
        field->member);
    spec.quantities.push_back(std::move(q));
  }

  for (const Field& field : kFields) {
    if (field.optional) continue;
    const bool present = std::any_of(spec.quantities.begin(), spec.quantities.end(),
                                     [&](const Quantity& q) { return q.key == field.key; });
    if (!present) fail_input("{}:1: numbers.{}: missing (unit \"{}\")", origin, field.key, field.unit);
  }
  if (spec.sram_bytes_per_block > spec.sram_bytes_per_sm)
    fail_input("{}:1: numbers.sram_bytes_per_block: {} is more than sram_bytes_per_sm ({})", origin,
               spec.sram_bytes_per_block, spec.sram_bytes_per_sm);
  if (spec.l2_effective_bytes > spec.l2_bytes)
    fail_input("{}:1: numbers.l2_effective_bytes: {} is more than l2_bytes ({})", origin, spec.l2_effective_bytes,
               spec.l2_bytes);
  if (spec.l2_partitions > 2)
    fail_input("{}:1: numbers.l2_partitions: {} partitions; hbmlab models 1 or 2", origin, spec.l2_partitions);
  if (spec.l2_partitions == 2 && spec.l2_partition_run_sms == 0)
    fail_input("{}:1: numbers.l2_partition_run_sms: missing (unit \"SMs\"), needed with l2_partitions = 2", origin);
  if (spec.l2_sector_bytes > spec.l2_line_bytes)
    fail_input("{}:1: numbers.l2_sector_bytes: {} is more than l2_line_bytes ({})", origin,
               spec.l2_sector_bytes, spec.l2_line_bytes);
  return spec;
}

std::vector<std::string> gpu_preset_names() {
  std::vector<std::string> names;
  for (std::string_view path : embedded_in("gpus")) {
    std::string_view file = path.substr(path.find('/') + 1);
    names.emplace_back(file.substr(0, file.rfind('.')));
  }
  return names;
}

std::vector<GpuSpec> gpu_presets() {
  std::vector<GpuSpec> presets;
  for (std::string_view path : embedded_in("gpus"))
    presets.push_back(parse_gpu_spec(*find_embedded(path), fmt::format("scenarios/{}", path)));
  return presets;
}

GpuSpec load_gpu(std::string_view name_or_path) {
  const std::string key(name_or_path);
  if (auto text = find_embedded("gpus/" + key + ".toml"))
    return parse_gpu_spec(*text, "scenarios/gpus/" + key + ".toml");
  if (key.ends_with(".toml") && exists_on_disk(std::string(key))) return parse_gpu_spec(read_text_file(key), key);
  if (key.ends_with(".toml") && key.find('/') != std::string::npos)  // a path, not a preset's name
    fail_input("--gpu: no GPU preset file '{}'", key);
  std::string known;
  for (const std::string& name : gpu_preset_names()) known += (known.empty() ? "" : ", ") + name;
  fail_input("--gpu: unknown preset '{}' (known: {}; or a path to a .toml file)", key, known);
}

}  // namespace hbmlab
