// The CTA schedule of hbmlab's flash2 kernel as the GPU ran it: for every CTA, the SM it ran on
// and when it started and ended (%smid, %globaltimer), so that the timing engine's schedule
// (hbmlab simulate --timeline) can be compared with the real one (cta_schedule_compare.py).
// Run: hbmlab_cta_schedule --seq-len 4096 --head-dim 128 --batch 4 --heads 16 --causal
//        --kv-descending --blocks 128x64 --out schedule.json
// The inputs are checked against the fp64 reference first; the traced launch follows warm-ups,
// with the L2 flushed before it as for the measurement files.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpu/runner.hpp"
#include "sim/common/files.hpp"
#include "sim/report/report.hpp"

namespace {

using hbmlab::AttentionProblem;
using hbmlab::Blocks;

struct Options {
  AttentionProblem problem{1, 16, 4096, 64, hbmlab::Dtype::fp16, false};
  Blocks blocks{0, 0};
  bool kv_descending = false;
  int warmup = 3;
  std::string out;
};

// The whole of `text` as a positive integer.
bool parse_positive(const std::string& text, std::int64_t& n) {
  try {
    std::size_t used = 0;
    n = std::stoll(text, &used);
    return used == text.size() && n > 0;
  } catch (...) {
    return false;
  }
}

int usage_error(const std::string& what) {
  std::cerr << "hbmlab_cta_schedule: " << what << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hbmlab::gpu;
  const hbmlab::Algo flash2 = hbmlab::algo_named("flash2");
  Options o;
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t k = 0; k < args.size(); ++k) {
    const std::string& a = args[k];
    auto value = [&]() -> std::string { return k + 1 < args.size() ? args[++k] : std::string(); };
    auto number = [&](std::int64_t& n) { return parse_positive(value(), n); };
    if (a == "--seq-len") { if (!number(o.problem.seq_len)) return usage_error("--seq-len: give a positive integer"); }
    else if (a == "--head-dim") { if (!number(o.problem.head_dim)) return usage_error("--head-dim: give 64 or 128"); }
    else if (a == "--batch") { if (!number(o.problem.batch)) return usage_error("--batch: give a positive integer"); }
    else if (a == "--heads") { if (!number(o.problem.heads)) return usage_error("--heads: give a positive integer"); }
    else if (a == "--causal") o.problem.causal = true;
    else if (a == "--kv-descending") o.kv_descending = true;
    else if (a == "--blocks") {
      const std::string v = value();
      const auto x = v.find('x');
      if (x == std::string::npos || !parse_positive(v.substr(0, x), o.blocks.Br) ||
          !parse_positive(v.substr(x + 1), o.blocks.Bc))
        return usage_error("--blocks: give BRxBC, e.g. 128x64");
    } else if (a == "--out") o.out = value();
    else return usage_error("unknown option " + a + " (see the comment at the top of gpu/bench/cta_schedule.cpp)");
  }
  if (o.out.empty()) return usage_error("--out: give the schedule file to write");
  if (device_count() == 0) return usage_error("no CUDA device: the schedule is read off a GPU");
  if (o.blocks.Br == 0) o.blocks = default_blocks(flash2, o.problem.dtype, static_cast<int>(o.problem.head_dim));
  if (!is_compiled({flash2, o.problem.dtype, static_cast<int>(o.problem.head_dim), o.blocks}))
    return usage_error("--blocks: this (d, Br x Bc) shape of flash2 is not compiled (hbmlab measure --list)");

  const AttentionProblem& p = o.problem;
  AttentionBuffers buffers(p, flash2, o.blocks);
  const CheckResult check = check_kernel(p, o.blocks, o.kv_descending, hbmlab::InputKind::unit, 1, buffers);
  if (!check.pass) {
    std::cerr << "hbmlab_cta_schedule: flash2 does not match the reference here (" << check.note << ")\n";
    return 1;
  }
  const std::int64_t rows = (p.seq_len + o.blocks.Br - 1) / o.blocks.Br;
  const std::int64_t ctas = rows * p.instances();
  DeviceBuffer trace(static_cast<std::size_t>(ctas) * 3 * sizeof(unsigned long long));
  DeviceBuffer scratch(256u << 20);
  // The kernel's time without the trace (CUDA events, L2 flushed), to show the trace costs nothing.
  const Timing untraced = time_kernel(p, o.blocks, o.kv_descending, buffers, 11, 2, true);
  DeviceTensors t = buffers.tensors();
  for (int n = 0; n < o.warmup; ++n) launch(flash2, p, o.blocks, t, nullptr, o.kv_descending);
  flush_l2(scratch);
  t.trace = trace.get<unsigned long long>();
  launch(flash2, p, o.blocks, t, nullptr, o.kv_descending);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<unsigned long long> spans(static_cast<std::size_t>(ctas) * 3);
  CUDA_CHECK(cudaMemcpy(spans.data(), trace.get(), spans.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));

  unsigned long long first = spans[0], last = spans[1];
  for (std::int64_t c = 0; c < ctas; ++c) {
    first = std::min(first, spans[3 * c]);
    last = std::max(last, spans[3 * c + 1]);
  }
  const DeviceInfo device = device_info();
  nlohmann::json out;
  out["device"] = {{"name", device.name}, {"sm_count", device.sm_count}, {"l2_bytes", device.l2_bytes}};
  out["command"] = "hbmlab_cta_schedule (gpu/bench/cta_schedule.cpp)";
  out["problem"] = hbmlab::problem_json(p);
  out["blocks"] = {{"Br", o.blocks.Br}, {"Bc", o.blocks.Bc}};
  out["kv_descending"] = o.kv_descending;
  const LaunchInfo info = launch_info(flash2, p, o.blocks, o.kv_descending);
  out["launch"] = {{"threads_per_cta", info.threads_per_cta}, {"registers_per_thread", info.registers_per_thread},
                   {"smem_bytes_per_cta", info.smem_bytes_per_cta}, {"ctas_per_sm", info.ctas_per_sm}};
  out["span_ns"] = last - first;
  out["untraced_kernel_ms_median"] = untraced.median_ms;
  out["note"] = "ctas: [linear CTA index (blockIdx.x fastest over Q blocks), SM, start ns, end ns], times from the "
                "first CTA's start (%globaltimer)";
  nlohmann::json rows_json = nlohmann::json::array();
  for (std::int64_t c = 0; c < ctas; ++c)
    rows_json.push_back({c, spans[3 * c + 2], spans[3 * c] - first, spans[3 * c + 1] - first});
  out["ctas"] = std::move(rows_json);
  hbmlab::write_file_atomically(o.out, out.dump() + "\n");
  std::cout << "hbmlab_cta_schedule: " << ctas << " CTAs in " << (last - first) / 1000.0 << " us (untraced: "
            << untraced.median_ms * 1000.0 << " us), written to " << o.out << "\n";
  return 0;
}
