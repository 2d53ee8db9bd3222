// The "Inside the SM" tab: the bytes each kernel moves between shared memory and registers beside its
// HBM bytes, and where its predicted time goes on the SM's pipes (docs/on-chip.md). Figures come from
// the timing engine's kernels (KernelTiming::on_chip) and the preset's measured pipe rates.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/common/units.hpp"
#include "sim/report/on_chip_json.hpp"
#include "sim/view/roofline_view.hpp"
#include "viz/panels.hpp"

namespace hbmlab::viz {

namespace {

const ImU32 kHbmColour = IM_COL32(235, 90, 80, 255);
const ImU32 kFillColour = IM_COL32(120, 120, 135, 255);
const ImU32 kLimiter = IM_COL32(255, 215, 60, 255);

// A labelled bar of `bytes` against `most`, in one colour or stacked by tensor, with the figure after it.
void BytesBar(const char* label, float label_w, double most, double bytes, ImU32 colour,
              const std::array<double, kTensorCount>* by_tensor = nullptr) {
  ImGui::TextUnformatted(label);
  ImGui::SameLine(label_w);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const std::string figure = format_bytes(bytes);
  const float width = std::max(40.0f, ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize("000.0 GB ").x);
  const float height = ImGui::GetFrameHeight();
  float x = p.x;
  auto segment = [&](double b, ImU32 c, const char* name) {
    const float w = most > 0 ? static_cast<float>(b / most) * width : 0;
    if (w <= 0) return;
    dl->AddRectFilled(ImVec2(x, p.y), ImVec2(x + std::max(w, 2.0f), p.y + height), c);
    if (name && w > ImGui::CalcTextSize(name).x + 6)
      DrawText(dl, ImVec2(x + 3, p.y + (height - ImGui::GetFontSize()) / 2), TextOn(c), name);
    x += std::max(w, 2.0f);
  };
  if (by_tensor) {
    for (Tensor t : kAllTensors) segment((*by_tensor)[static_cast<std::size_t>(t)], tensor_colour(t), tensor_symbol(t).data());
  } else {
    segment(bytes, colour, nullptr);
  }
  DrawText(dl, ImVec2(x + 6, p.y + (height - ImGui::GetFontSize()) / 2), ImGui::GetColorU32(ImGuiCol_Text), figure);
  ImGui::Dummy(ImVec2(width, height));
  NoteDrawingItem();  // the room of what was drawn above
}

// A pipe's busy share of the kernel's predicted time, 0–100 %, the busiest outlined.
void ShareBar(const char* label, float label_w, const std::optional<double>& share, ImU32 colour, bool limiter) {
  ImGui::TextUnformatted(label);
  ImGui::SameLine(label_w);
  if (!share) {
    ImGui::TextDisabled("no measured rate in this preset");
    return;
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float width = ImGui::GetContentRegionAvail().x, height = ImGui::GetFrameHeight();
  const float w = static_cast<float>(std::clamp(*share, 0.0, 1.0)) * width;
  dl->AddRectFilled(p, ImVec2(p.x + width, p.y + height), IM_COL32(45, 45, 55, 255));
  dl->AddRectFilled(p, ImVec2(p.x + w, p.y + height), colour);
  if (limiter) dl->AddRect(p, ImVec2(p.x + width, p.y + height), kLimiter, 0, 0, 2.0f);
  const std::string text = fmt::format("{:.0f}% busy{}", *share * 100, limiter ? " (the busiest)" : "");
  DrawText(dl, ImVec2(p.x + 6, p.y + (height - ImGui::GetFontSize()) / 2), IM_COL32(255, 255, 255, 255), text);
  ImGui::Dummy(ImVec2(width, height));
  NoteDrawingItem();  // the room of what was drawn above
}

}  // namespace

bool IsMeasuredOnChipOf(const ValidationRow& row, Algo algo, const AttentionProblem& problem) {
  return row.measured_on_chip.any() && row.algo == algo && row.problem.seq_len == problem.seq_len &&
         row.problem.head_dim == problem.head_dim && row.problem.causal == problem.causal &&
         row.problem.instances() == problem.instances();
}

std::vector<const ValidationRow*> MeasuredOnChipRows(const AppState& app, const SimulationResult& res) {
  std::vector<const ValidationRow*> rows;
  const std::optional<ValidationReport>& report = app.measured ? app.measured : app.onchip_measured;
  if (!report) return rows;
  for (const ValidationRow& row : report->rows)
    if (IsMeasuredOnChipOf(row, res.algo, res.problem)) rows.push_back(&row);
  return rows;
}

namespace {

// Recorded Nsight Compute counters of this problem and room beside the prediction (h100-onchip.json).
void ShowMeasuredOnChip(AppState& app, const SimulationResult& res) {
  if (!app.measured) request_onchip_measured(app, res);
  if (!app.measured && !app.onchip_measured) {
    const std::string& error = app.onchip_measured_error;
    if (error.empty()) ImGui::TextDisabled("Reading the recorded measurements of this problem…");
    else TextWrappedColoured(IM_COL32(255, 110, 100, 255), error.c_str());
    return;
  }
  bool any = false;
  const std::vector<const ValidationRow*> rows = MeasuredOnChipRows(app, res);
  for (const ValidationRow* found : rows) {
    const ValidationRow& row = *found;
    const MeasuredOnChip& m = row.measured_on_chip;
    if (!any) ImGui::TextWrapped("Measured on the %s (Nsight Compute, or CUPTI in hbmlab measure --on-chip), this problem:", row.gpu.c_str());
    any = true;
    const OnChipCounts& c = row.predicted_on_chip;
    const std::string file = row.file.substr(row.file.find_last_of('/') + 1);
    ImGui::TextColored(ImVec4(0.6f, 0.85f, 1.0f, 1.0f), "%s, %lld × %lld blocks (%s)", row.source.c_str(),
                       static_cast<long long>(row.blocks.Br), static_cast<long long>(row.blocks.Bc), file.c_str());
    // Widths set, not fitted: the table often first shows on the frame a screenshot keeps.
    const float pad = 2 * ImGui::GetStyle().CellPadding.x;
    const float name_w = ImGui::CalcTextSize("shared → registers").x + pad, figure_w = ImGui::CalcTextSize("000,000,000").x + pad;
    const float error_w = ImGui::CalcTextSize("+0.00%").x + pad;
    if (found == rows.front())  // the first table: the others are as wide
      NoteRoom("on-chip table", ImVec2(ImGui::GetContentRegionAvail().x, 0), ImVec2(name_w + 2 * figure_w + error_w, 0));
    if (!ImGui::BeginTable(row.file.c_str(), 4, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit))
      continue;
    ImGui::TableSetupColumn("warp level", ImGuiTableColumnFlags_WidthFixed, name_w);
    ImGui::TableSetupColumn("measured", ImGuiTableColumnFlags_WidthFixed, figure_w);
    ImGui::TableSetupColumn("predicted", ImGuiTableColumnFlags_WidthFixed, figure_w);
    ImGui::TableSetupColumn("error", ImGuiTableColumnFlags_WidthFixed, error_w);
    ImGui::TableHeadersRow();
    auto line = [](const char* what, double measured, double predicted, bool bytes) {
      if (std::isnan(measured)) return;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(what);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted((bytes ? format_bytes(measured) : format_count(measured)).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted((bytes ? format_bytes(predicted) : format_count(predicted)).c_str());
      ImGui::TableNextColumn();
      if (measured > 0 && predicted == measured) ImGui::TextUnformatted("exact");
      else if (measured > 0) ImGui::Text("%+.2f%%", (predicted - measured) / measured * 100);
    };
    const SmemBytes t = c.total();
    line("ldmatrix", m.ldmatrix_instructions, double(c.ldmatrix), false);
    line("mma", m.mma_instructions, double(c.mma + 4 * c.wgmma), false);  // ncu counts a wgmma as 4 warp instructions
    line("ex2", m.ex2_instructions, double(c.ex2), false);
    line("shared → registers", m.smem_ld_bytes, double(t.read), true);
    line("wgmma operands", m.smem_mma_bytes, double(t.mma_read), true);
    ImGui::EndTable();
  }
  if (!any) ImGui::TextDisabled("No recorded on-chip counters for this problem and algorithm.");
}

// A warp-specialised room's CTA at the replay's step: its ring of K/V stages in shared memory and what
// each warpgroup does at this K_j (Algorithm::pipeline; the FlashAttention-3 paper's schedule).
void ShowPipeline(const view::ReplayView& r, std::int64_t pos) {
  const SimulationResult& res = r.result();
  const std::optional<Pipeline> pipe = r.algo()->pipeline(res.problem, r.blocks());
  if (!pipe || r.step_count() == 0) return;
  std::int64_t j = 0;  // the K_j the consumers work on: the latest step that names one
  for (std::int64_t k = std::clamp<std::int64_t>(pos, 0, r.step_count() - 1); k >= 0; --k)
    if (r.steps()[static_cast<std::size_t>(k)].j >= 0) {
      j = r.steps()[static_cast<std::size_t>(k)].j;
      break;
    }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize(), height = ImGui::GetFrameHeight() * 1.4f;
  const float gap = ImGui::GetStyle().ItemSpacing.x;
  auto box = [&](ImVec2 p, float w, ImU32 fill, const std::string& text) {
    dl->AddRectFilled(p, ImVec2(p.x + w, p.y + height), fill, 4.0f);
    dl->PushClipRect(p, ImVec2(p.x + w, p.y + height), true);
    DrawText(dl, ImVec2(p.x + 5, p.y + (height - fs) / 2), TextOn(fill), text);
    dl->PopClipRect();
  };
  ImGui::Text("K/V ring in shared memory: %lld stages (at K_%lld of %lld)", static_cast<long long>(pipe->stages),
              static_cast<long long>(j), static_cast<long long>(res.Tc));
  ImVec2 p = ImGui::GetCursorScreenPos();
  const float stage_w = (ImGui::GetContentRegionAvail().x - gap * float(pipe->stages - 1)) / float(pipe->stages);
  for (std::int64_t s = 0; s < pipe->stages; ++s) {
    const std::int64_t jj = j + (s - j % pipe->stages + pipe->stages) % pipe->stages;  // the block this stage holds
    const bool current = jj == j;
    const std::string text = jj >= res.Tc      ? fmt::format("stage {}: empty", s)
                             : current          ? fmt::format("stage {}: K_{}, V_{} in use by wgmma", s, jj, jj)
                                                : fmt::format("stage {}: K_{}, V_{} arriving (TMA)", s, jj, jj);
    box(ImVec2(p.x + float(s) * (stage_w + gap), p.y), stage_w,
        current ? tensor_colour(Tensor::K) : IM_COL32(150, 150, 165, 255), text);
  }
  ImGui::Dummy(ImVec2(ImGui::GetContentRegionAvail().x, height));
  NoteDrawingItem();  // the room of what was drawn above
  ImGui::Text("Warpgroups of 128 threads, one CTA of %lld query rows", static_cast<long long>(r.blocks().Br));
  const float label_w = ImGui::CalcTextSize("consumer 0 ").x + gap;
  const float w = ImGui::GetContentRegionAvail().x - label_w;
  ImGui::TextUnformatted("producer");
  ImGui::SameLine(label_w);
  p = ImGui::GetCursorScreenPos();
  box(p, w, IM_COL32(150, 150, 165, 255),
      j + 1 < res.Tc ? fmt::format("TMA: K_{}, V_{} into a free stage; then waits", j + 1, j + 1) : std::string("waits: no block left"));
  ImGui::Dummy(ImVec2(w, height));
  NoteDrawingItem();  // the room of what was drawn above
  // Pingpong: at each K_j the consumers take turns on the tensor cores, the others in their softmax.
  for (std::int64_t g = 0; g < pipe->consumer_warpgroups; ++g) {
    const bool gemm = (j + g) % pipe->consumer_warpgroups == 0;
    ImGui::Text("consumer %lld", static_cast<long long>(g + 1));
    ImGui::SameLine(label_w);
    p = ImGui::GetCursorScreenPos();
    box(p, w, gemm ? IM_COL32(90, 170, 110, 255) : IM_COL32(200, 120, 200, 255),
        gemm ? fmt::format("GEMMs: S = Q K_{}ᵀ and P̃ V (wgmma)", j) : fmt::format("softmax of S_{} (exponent unit)", j));
    ImGui::Dummy(ImVec2(w, height));
    NoteDrawingItem();  // the room of what was drawn above
  }
}

// The roofline with the shared-memory ceiling: every kernel of the rooms on show as two points at its
// predicted FLOP/s, one per HBM byte (red) and one per shared-memory byte (blue), joined; the ceilings
// are the preset's HBM and shared-memory bandwidths and tensor peak (view::roofline_view).
void ShowRoofline(const AppState& app) {
  std::vector<std::pair<const view::ReplayView*, view::RooflineView>> rooms;
  for (const auto& r : app.replay)
    if (r) rooms.emplace_back(r.get(), view::roofline_view(r->result()));
  if (rooms.empty()) return;
  const view::RooflineView& ceil = rooms.front().second;
  if (ceil.tensor_flop_per_s <= 0 || ceil.hbm_bytes_per_s <= 0 || ceil.smem_bytes_per_s <= 0) return;
  ImGui::TextWrapped("Roofline, log-log: FLOP/s against FLOPs per byte. Red: per HBM byte, under the HBM slope "
                     "(%.2f TB/s); blue: per shared-memory byte, under the shared-memory slope (%.0f TB/s, all SMs); "
                     "the tensor peak %.0f TFLOP/s%s.",
                     ceil.hbm_bytes_per_s / 1e12, ceil.smem_bytes_per_s / 1e12, ceil.tensor_flop_per_s / 1e12,
                     ceil.mma_sync_flop_per_s > 0 ? fmt::format(" (dashed: mma.sync's measured {:.0f})", ceil.mma_sync_flop_per_s / 1e12).c_str() : "");
  // Axis ranges in log10, from the points and the ridges.
  double x_lo = 1e300, x_hi = 0, y_lo = 1e300;
  for (const auto& [r, v] : rooms)
    for (const view::RooflinePoint& p : v.points) {
      x_lo = std::min({x_lo, p.flop_per_smem_byte(), p.flop_per_dram_byte()});
      x_hi = std::max({x_hi, p.flop_per_smem_byte(), p.flop_per_dram_byte()});
      y_lo = std::min(y_lo, p.flop_per_s());
    }
  x_lo = std::min(x_lo, ceil.smem_ridge()), x_hi = std::max(x_hi, ceil.hbm_ridge());
  const double lx0 = std::floor(std::log10(x_lo)) - 0.3, lx1 = std::ceil(std::log10(x_hi)) + 0.3;
  const double ly1 = std::log10(ceil.tensor_flop_per_s) + 0.4;
  const double ly0 = std::min(std::floor(std::log10(std::min(y_lo, ceil.tensor_flop_per_s))) - 0.3, ly1 - 2);
  const float fs = ImGui::GetFontSize();
  const ImVec2 size(ImGui::GetContentRegionAvail().x, fs * 17);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("roofline", size);
  NoteDrawingItem();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  // The y axis's labels in a margin as wide as the widest, the x axis's labels and title under the plot.
  auto y_label = [](double e) {  // a power of ten with its prefix and no decimals: "100 TFLOP/s", "1 PFLOP/s"
    static const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
    const int k = std::clamp(static_cast<int>(std::floor(e / 3)), 0, 6);
    return fmt::format("{:g} {}FLOP/s", std::pow(10, e - 3 * k), prefixes[k]);
  };
  auto x_label = [](double e) { return e < 6 ? fmt::format("{:g}", std::pow(10, e)) : fmt::format("1e{:.0f}", e); };
  float y_label_w = 0;
  for (double e = std::ceil(ly0); e <= ly1; e += 1) y_label_w = std::max(y_label_w, ImGui::CalcTextSize(y_label(e).c_str()).x);
  const float left = p0.x + y_label_w + fs * 0.5f, right = p0.x + size.x - fs * 0.5f, top = p0.y + fs * 0.3f,
              bottom = p0.y + size.y - fs * 2.6f;
  auto X = [&](double x) { return left + (right - left) * float((std::log10(x) - lx0) / (lx1 - lx0)); };
  auto Y = [&](double y) { return bottom - (bottom - top) * float((std::log10(y) - ly0) / (ly1 - ly0)); };
  const ImU32 frame = IM_COL32(110, 110, 125, 255), dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const ImU32 hbm = kHbmColour, smem = IM_COL32(80, 140, 220, 255), peak = IM_COL32(90, 170, 110, 255);
  dl->AddRectFilled(ImVec2(left, top), ImVec2(right, bottom), IM_COL32(28, 28, 34, 255));
  dl->PushClipRect(ImVec2(left, top), ImVec2(right, bottom), true);
  for (double e = std::ceil(lx0); e <= lx1; e += 1) dl->AddLine(ImVec2(X(std::pow(10, e)), top), ImVec2(X(std::pow(10, e)), bottom), IM_COL32(50, 50, 60, 255));
  for (double e = std::ceil(ly0); e <= ly1; e += 1) dl->AddLine(ImVec2(left, Y(std::pow(10, e))), ImVec2(right, Y(std::pow(10, e))), IM_COL32(50, 50, 60, 255));
  // A bandwidth ceiling: FLOP/s = bytes/s × FLOPs per byte, up to the tensor peak.
  // The names drawn on the plot, kept so that a kernel's name goes where it covers none of them.
  std::vector<std::pair<ImVec2, ImVec2>> names;
  auto slope = [&](double bytes_per_s, ImU32 colour, const char* name) {
    const double x0 = std::pow(10, lx0), ridge = ceil.tensor_flop_per_s / bytes_per_s;
    dl->AddLine(ImVec2(X(x0), Y(bytes_per_s * x0)), ImVec2(X(ridge), Y(ceil.tensor_flop_per_s)), colour, 2.0f);
    const double xl = std::max(x0 * 1.2, std::pow(10, ly0 + 0.25) / bytes_per_s);  // near the plot's foot
    const ImVec2 at(X(xl) + fs * 0.6f, Y(bytes_per_s * xl) + fs * 0.1f);  // below the line
    DrawText(dl, at, colour, name);
    names.emplace_back(at, ImVec2(at.x + ImGui::CalcTextSize(name).x, at.y + fs));
  };
  auto covers_a_name = [&](ImVec2 a, ImVec2 b) {
    return std::any_of(names.begin(), names.end(), [&](const auto& n) {
      return a.x < n.second.x && n.first.x < b.x && a.y < n.second.y && n.first.y < b.y;
    });
  };
  slope(ceil.hbm_bytes_per_s, hbm, "HBM");
  slope(ceil.smem_bytes_per_s, smem, "shared memory");
  const double ridge = std::min(ceil.smem_ridge(), ceil.hbm_ridge());
  dl->AddLine(ImVec2(X(ridge), Y(ceil.tensor_flop_per_s)), ImVec2(right, Y(ceil.tensor_flop_per_s)), peak, 2.0f);
  DrawText(dl, ImVec2(right - ImGui::CalcTextSize("tensor peak").x - 4, Y(ceil.tensor_flop_per_s) - fs * 1.2f), peak,
           "tensor peak");
  if (ceil.mma_sync_flop_per_s > 0) {
    const float y = Y(ceil.mma_sync_flop_per_s);
    for (float x = X(ceil.mma_sync_flop_per_s / ceil.smem_bytes_per_s); x < right; x += 10) dl->AddLine(ImVec2(x, y), ImVec2(std::min(x + 5, right), y), peak, 1.5f);
    DrawText(dl, ImVec2(right - ImGui::CalcTextSize("mma.sync").x - 4, y + 2), peak, "mma.sync");
  }
  // The kernels: two discs joined, ringed in the room's colour, named at the shared-memory point.
  for (const auto& [r, v] : rooms)
    for (const view::RooflinePoint& p : v.points) {
      const ImVec2 a(X(p.flop_per_dram_byte()), Y(p.flop_per_s())), b(X(p.flop_per_smem_byte()), Y(p.flop_per_s()));
      dl->AddLine(a, b, IM_COL32(200, 200, 210, 160), 1.0f);
      dl->AddCircleFilled(a, fs * 0.35f, hbm);
      dl->AddCircleFilled(b, fs * 0.35f, smem);
      dl->AddCircle(a, fs * 0.45f, algo_colour(r->algo()), 0, 1.5f);
      dl->AddCircle(b, fs * 0.45f, algo_colour(r->algo()), 0, 1.5f);
      // Right of the shared-memory point, else above it, else below it: wherever it covers no name drawn before.
      const ImVec2 size = ImGui::CalcTextSize(p.kernel.c_str());
      const ImVec2 places[] = {ImVec2(b.x + fs * 0.5f, b.y + 2), ImVec2(b.x - size.x / 2, b.y - fs * 0.5f - size.y),
                               ImVec2(b.x - size.x / 2, b.y + fs * 0.5f)};
      ImVec2 at = places[0];
      for (const ImVec2& place : places)
        if (!covers_a_name(place, ImVec2(place.x + size.x, place.y + size.y))) {
          at = place;
          break;
        }
      DrawText(dl, at, ImGui::GetColorU32(ImGuiCol_Text), p.kernel);
      names.emplace_back(at, ImVec2(at.x + size.x, at.y + size.y));
    }
  dl->PopClipRect();
  dl->AddRect(ImVec2(left, top), ImVec2(right, bottom), frame);
  for (double e = std::ceil(lx0); e <= lx1; e += 1) {
    const std::string label = x_label(e);
    DrawText(dl, ImVec2(X(std::pow(10, e)) - ImGui::CalcTextSize(label.c_str()).x / 2, bottom + 2), dim, label);
  }
  const char* x_title = "FLOPs per byte →";
  DrawText(dl, ImVec2((left + right - ImGui::CalcTextSize(x_title).x) / 2, bottom + fs * 1.3f), ImGui::GetColorU32(ImGuiCol_Text),
           x_title);
  for (double e = std::ceil(ly0); e <= ly1; e += 1) {
    const std::string label = y_label(e);
    DrawText(dl, ImVec2(left - fs * 0.3f - ImGui::CalcTextSize(label.c_str()).x, Y(std::pow(10, e)) - fs * 0.5f), dim, label);
  }
  if (ImGui::IsItemHovered()) {
    std::string tip;
    for (const auto& [r, v] : rooms) {
      for (const view::RooflinePoint& p : v.points)
        tip += fmt::format("{}: {:.3g} FLOP per HBM byte, {:.3g} per shared-memory byte, {} predicted\n", p.kernel,
                           p.flop_per_dram_byte(), p.flop_per_smem_byte(), format_si(p.flop_per_s(), "FLOP/s"));
      for (const std::string& why : v.left_out) tip += "not drawn: " + why + "\n";
    }
    ImGui::SetTooltip("%s", tip.c_str());
  }
}

void ShowOnChipOf(AppState& app, const view::ReplayView& r, double most_bytes, bool measured) {
  const SimulationResult& res = r.result();
  ImGui::PushStyleColor(ImGuiCol_Text, algo_colour(r.algo()));
  ImGui::TextWrapped("%s", std::string(to_string(r.algo())).c_str());
  ImGui::PopStyleColor();
  const float label_w = ImGui::CalcTextSize("shared → registers ").x + ImGui::GetStyle().ItemSpacing.x;
  for (const KernelTiming& k : res.engine.kernels) {
    const OnChipCounts& c = k.on_chip;
    ImGui::Text("%s: %s predicted", k.name.c_str(), format_seconds(k.time_s).c_str());
    if (!c.modelled) {
      ImGui::TextDisabled("This kernel's warp layout is not described yet: no on-chip counts (docs/on-chip.md).");
      continue;
    }
    if (r.algo()->pipeline(res.problem, r.blocks()) && c.wgmma == 0)
      TextWrappedColoured(ImGui::GetColorU32(ImGuiCol_TextDisabled),
                          "(counted with FlashAttention-2's warp layout: hbmlab's wgmma layout is not wired to this room yet)");
    const SmemBytes t = c.total();
    std::array<double, kTensorCount> read{};
    for (Tensor tensor : kAllTensors) read[static_cast<std::size_t>(tensor)] = double(c[tensor].read + c[tensor].mma_read);
    const double dram = double(k.dram_read_bytes + k.dram_write_bytes), smem_read = double(t.read + t.mma_read);
    BytesBar("HBM (DRAM)", label_w, most_bytes, dram, kHbmColour);
    BytesBar("SRAM filled", label_w, most_bytes, double(t.fill), kFillColour);
    BytesBar(t.mma_read > t.read ? "SRAM → tensor cores" : "shared → registers", label_w, most_bytes, smem_read, 0, &read);
    if (dram > 0)
      ImGui::TextWrapped("Shared memory hands the warps %.0f× the bytes HBM moves. %s.", smem_read / dram, c.layout.c_str());
    const std::string instructions =
        fmt::format("{} ldmatrix, {} mma.sync, {} wgmma, {} ex2 (warp instructions)", format_count(double(c.ldmatrix)),
                    format_count(double(c.mma)), format_count(double(c.wgmma)), format_count(double(c.ex2)));
    TextWrappedColoured(ImGui::GetColorU32(ImGuiCol_TextDisabled), instructions.c_str());
    const PipeBusy pipes = pipe_busy(k, res.gpu);
    ImGui::Spacing();
    // The shares are at the clock the engine ran this kernel's pipes at (KernelTiming::sm_clock_mhz).
    ImGui::TextWrapped("Where the time goes: each pipe's busy share, SM at %.2f GHz", k.sm_clock_mhz / 1000);
    ShareBar("tensor cores", label_w, pipes.tensor, IM_COL32(90, 170, 110, 255), pipes.limiter == "tensor");
    ShareBar("shared memory", label_w, pipes.smem, IM_COL32(80, 140, 220, 255), pipes.limiter == "smem");
    ShareBar("exponent (ex2)", label_w, pipes.ex2, IM_COL32(200, 120, 200, 255), pipes.limiter == "ex2");
  }
  if (measured) {
    ImGui::Spacing();
    ShowMeasuredOnChip(app, res);
  }
}

}  // namespace

void ShowOnChipPanel(AppState& app) {
  PanelTitle("Inside the SM: shared memory, registers and the pipes", app.highlight == "onchip");
  if (!app.replay[0]) return;
  // One scale for every bar on the panel, so that two rooms side by side compare at a glance.
  double most = 0;
  for (const auto& r : app.replay)
    if (r)
      for (const KernelTiming& k : r->result().engine.kernels) {
        const SmemBytes t = k.on_chip.total();
        most = std::max({most, double(k.dram_read_bytes + k.dram_write_bytes), double(t.fill), double(t.read + t.mma_read)});
      }
  ImGui::TextWrapped("Bytes per kernel, all heads. Shares: a pipe's work at the preset's microbenchmarked rate over the "
                     "kernel's predicted time.");
  ImGui::Separator();
  ShowRoofline(app);
  for (int side = 0; side < 2; ++side)
    if (app.replay[side] && app.replay[side]->algo()->pipeline(app.replay[side]->result().problem, app.replay[side]->blocks())) {
      ImGui::Separator();
      ImGui::PushStyleColor(ImGuiCol_Text, algo_colour(app.replay[side]->algo()));
      ImGui::TextUnformatted(to_string(app.replay[side]->algo()).data());
      ImGui::PopStyleColor();
      ShowPipeline(*app.replay[side], side == 0 ? app.play.pos : pos_b(app));
    }
  for (int side = 0; side < 2; ++side) {
    if (!app.replay[side]) continue;
    ImGui::Separator();
    ShowOnChipOf(app, *app.replay[side], most, /*measured=*/!app.replay[1]);
  }
}

}  // namespace hbmlab::viz
