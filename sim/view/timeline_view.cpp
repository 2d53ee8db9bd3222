// Binning the engine's timeline for drawing, and reading the recorded measurements.
#include "sim/view/timeline_view.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hbmlab::view {

TimelineView timeline_view(const SimulationResult& result, int max_lanes, int bins) {
  TimelineView v;
  const EngineResult& e = result.engine;
  bins = std::max(bins, 1);
  for (const KernelTiming& k : e.kernels) {
    v.kernels.push_back(k.name);
    v.kernel_start_s.push_back(k.start_s);
    v.kernel_time_s.push_back(k.time_s);
    v.end_s = std::max(v.end_s, k.start_s + k.time_s);
  }
  v.sm_count = result.gpu.sm_count;
  v.peak_gbps = result.gpu.hbm_bandwidth_gbps;
  v.dropped_spans = e.timeline.dropped_spans;
  v.dram_bytes = double(e.dram_read_bytes() + e.dram_write_bytes());
  const double flops = double(result.total.matmul_flops + result.total.non_matmul_flops);
  v.flop_per_dram_byte = v.dram_bytes > 0 ? flops / v.dram_bytes : 0;
  v.ridge_flop_per_byte = result.gpu.tensor_tflops * 1e12 / (result.gpu.hbm_bandwidth_gbps * 1e9);
  v.bandwidth_floor_s = v.dram_bytes / (result.gpu.hbm_bandwidth_gbps * 1e9);
  if (e.timeline.ctas.empty() || v.end_s <= 0) {
    v.why_not = "the engine recorded no timeline for this run";
    return v;
  }
  // Lanes: each bin holds the kernel of the CTA that covers it (−1: idle), then runs merge bins.
  const int lanes = static_cast<int>(std::min<std::int64_t>(max_lanes, v.sm_count));
  std::vector<std::vector<std::int32_t>> cover(static_cast<std::size_t>(lanes), std::vector<std::int32_t>(bins, -1));
  const double per_bin = v.end_s / bins;
  for (const CtaSpan& s : e.timeline.ctas) {
    if (s.sm >= lanes) continue;
    const int b0 = std::clamp(static_cast<int>(s.start_s / per_bin), 0, bins - 1);
    const int b1 = std::clamp(static_cast<int>(std::ceil(s.end_s / per_bin)), b0 + 1, bins);
    for (int b = b0; b < b1; ++b) cover[s.sm][b] = s.kernel;
  }
  v.lanes.resize(static_cast<std::size_t>(lanes));
  for (int l = 0; l < lanes; ++l)
    for (int b = 0; b < bins; ++b) {
      const std::int32_t k = cover[l][b];
      if (k < 0) continue;
      std::vector<LaneRun>& runs = v.lanes[l];
      if (!runs.empty() && runs.back().kernel == k && runs.back().end_s >= b * per_bin - per_bin * 0.5) {
        runs.back().end_s = (b + 1) * per_bin;
      } else {
        runs.push_back({b * per_bin, (b + 1) * per_bin, k});
      }
    }
  // HBM bandwidth: each sample's bytes spread over the bins it overlaps, in proportion.
  std::vector<double> bytes(static_cast<std::size_t>(bins), 0.0);
  for (const BandwidthSample& s : e.timeline.hbm) {
    const double total = double(s.dram_read_bytes + s.dram_write_bytes), len = s.end_s - s.start_s;
    if (len <= 0 || total <= 0) continue;
    const int b0 = std::clamp(static_cast<int>(s.start_s / per_bin), 0, bins - 1);
    const int b1 = std::clamp(static_cast<int>(std::ceil(s.end_s / per_bin)), b0 + 1, bins);
    for (int b = b0; b < b1; ++b) {
      const double overlap = std::min(s.end_s, (b + 1) * per_bin) - std::max(s.start_s, b * per_bin);
      if (overlap > 0) bytes[b] += total * overlap / len;
    }
  }
  for (double b : bytes) v.hbm_gbps.push_back(b / per_bin / 1e9);
  v.available = true;
  return v;
}

ValidationReport load_measured(const std::string& dir, const Progress& progress) {
  MeasuredLoad load(dir);
  while (load.step(std::numeric_limits<std::size_t>::max(), progress)) {
  }
  return load.finish();
}

ValidationReport load_measured_where(const std::string& dir, const std::function<bool(const ValidationRow&)>& keep) {
  const std::vector<std::string> files = json_files_in(dir);
  if (files.empty()) return {};
  ValidationReport report = read_measurements(files, std::nullopt, FileErrors::skip);
  std::erase_if(report.rows, [&](const ValidationRow& row) { return !keep(row); });
  predict_measurements(report);
  return report;
}

bool MeasuredLoad::step(std::size_t records, const Progress& progress) {
  if (!read_) {
    const std::vector<std::string> files = json_files_in(dir_);
    any_file_ = !files.empty();
    if (any_file_) report_ = read_measurements(files, std::nullopt, FileErrors::skip);
    done_.assign(report_.rows.size(), false);
    read_ = true;
    return !report_.rows.empty();
  }
  const std::size_t total = report_.rows.size();
  // The lowest rank still to predict, then up to `records` of its rows in file order.
  auto rank_of = [&](std::size_t k) { return rank_ ? rank_(report_.rows[k]) : 0; };
  int lowest = std::numeric_limits<int>::max();
  for (std::size_t k = 0; k < total; ++k)
    if (!done_[k]) lowest = std::min(lowest, rank_of(k));
  std::vector<std::size_t> picked;
  for (std::size_t k = 0; k < total && picked.size() < records; ++k)
    if (!done_[k] && rank_of(k) == lowest) picked.push_back(k);
  ValidationReport some;
  for (std::size_t k : picked) some.rows.push_back(std::move(report_.rows[k]));
  const std::size_t before = predicted_;
  predict_measurements(some, [&](std::size_t done, std::size_t) {
    if (progress) progress(before + done, total);
  });
  for (std::size_t i = 0; i < picked.size(); ++i) {
    report_.rows[picked[i]] = std::move(some.rows[i]);
    done_[picked[i]] = true;
  }
  predicted_ += picked.size();
  return predicted_ < total;
}

ValidationReport MeasuredLoad::so_far() const {
  ValidationReport some;
  some.skipped = report_.skipped;
  some.skipped_files = report_.skipped_files;
  some.targets = report_.targets;
  for (std::size_t k = 0; k < report_.rows.size(); ++k)
    if (done_[k]) some.rows.push_back(report_.rows[k]);
  if (any_file_) summarise_measurements(some);
  return some;
}

bool MeasuredLoad::done_through(int rank) const {
  if (!read_) return false;
  for (std::size_t k = 0; k < report_.rows.size(); ++k)
    if (!done_[k] && (!rank_ || rank_(report_.rows[k]) <= rank)) return false;
  return true;
}

ValidationReport MeasuredLoad::finish() {
  if (any_file_) summarise_measurements(report_);
  return std::move(report_);
}

}  // namespace hbmlab::view
