// The "Inside the SM" tab: the bytes each kernel moves between shared memory and registers beside its
// HBM bytes, and where its predicted time goes on the SM's pipes (docs/on-chip.md). Figures come from
// the timing engine's kernels (KernelTiming::on_chip) and the preset's measured pipe rates.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/common/units.hpp"
#include "sim/report/on_chip_json.hpp"
#include "viz/panels.hpp"

namespace hbmlab::viz {

namespace {

const ImU32 kHbmColour = IM_COL32(235, 90, 80, 255);
const ImU32 kFillColour = IM_COL32(120, 120, 135, 255);
const ImU32 kTextOnBar = IM_COL32(10, 10, 10, 255);
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
      dl->AddText(ImVec2(x + 3, p.y + (height - ImGui::GetFontSize()) / 2), kTextOnBar, name);
    x += std::max(w, 2.0f);
  };
  if (by_tensor) {
    for (Tensor t : kAllTensors) segment((*by_tensor)[static_cast<std::size_t>(t)], tensor_colour(t), tensor_symbol(t).data());
  } else {
    segment(bytes, colour, nullptr);
  }
  dl->AddText(ImVec2(x + 6, p.y + (height - ImGui::GetFontSize()) / 2), ImGui::GetColorU32(ImGuiCol_Text), figure.c_str());
  ImGui::Dummy(ImVec2(width, height));
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
  dl->AddText(ImVec2(p.x + 6, p.y + (height - ImGui::GetFontSize()) / 2), IM_COL32(255, 255, 255, 255), text.c_str());
  ImGui::Dummy(ImVec2(width, height));
}

}  // namespace

std::vector<const ValidationRow*> MeasuredOnChipRows(const AppState& app, const SimulationResult& res) {
  std::vector<const ValidationRow*> rows;
  if (!app.measured) return rows;
  for (const ValidationRow& row : app.measured->rows)
    if (row.measured_on_chip.any() && row.algo == res.algo && row.problem.seq_len == res.problem.seq_len &&
        row.problem.head_dim == res.problem.head_dim && row.problem.causal == res.problem.causal &&
        row.problem.instances() == res.problem.instances())
      rows.push_back(&row);
  return rows;
}

namespace {

// Recorded Nsight Compute counters of this problem and room beside the prediction (h100-onchip.json).
void ShowMeasuredOnChip(AppState& app, const SimulationResult& res) {
  request_measured(app);
  if (!app.measured) {
    if (app.measured_error.empty()) ImGui::TextDisabled("Reading the recorded measurements…");
    else TextWrappedColoured(IM_COL32(255, 110, 100, 255), app.measured_error.c_str());
    return;
  }
  bool any = false;
  for (const ValidationRow* found : MeasuredOnChipRows(app, res)) {
    const ValidationRow& row = *found;
    const MeasuredOnChip& m = row.measured_on_chip;
    if (!any) ImGui::Text("Measured by Nsight Compute on the %s, this problem:", row.gpu.c_str());
    any = true;
    const OnChipCounts& c = row.predicted_on_chip;
    ImGui::TextColored(ImVec4(0.6f, 0.85f, 1.0f, 1.0f), "%s, %lld × %lld blocks", row.source.c_str(),
                       static_cast<long long>(row.blocks.Br), static_cast<long long>(row.blocks.Bc));
    if (!ImGui::BeginTable(row.file.c_str(), 4, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit))
      continue;
    // Widths set, not fitted: the table often first shows on the frame a screenshot keeps.
    const float pad = 2 * ImGui::GetStyle().CellPadding.x;
    const float name_w = ImGui::CalcTextSize("shared → registers").x + pad, figure_w = ImGui::CalcTextSize("000,000,000").x + pad;
    ImGui::TableSetupColumn("warp level", ImGuiTableColumnFlags_WidthFixed, name_w);
    ImGui::TableSetupColumn("measured", ImGuiTableColumnFlags_WidthFixed, figure_w);
    ImGui::TableSetupColumn("predicted", ImGuiTableColumnFlags_WidthFixed, figure_w);
    ImGui::TableSetupColumn("error", ImGuiTableColumnFlags_WidthFixed, ImGui::CalcTextSize("+0.00%").x + pad);
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
    dl->AddText(ImVec2(p.x + 5, p.y + (height - fs) / 2), kTextOnBar, text.c_str());
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
  ImGui::Text("Warpgroups of 128 threads, one CTA of %lld query rows", static_cast<long long>(r.blocks().Br));
  const float label_w = ImGui::CalcTextSize("consumer 0 ").x + gap;
  const float w = ImGui::GetContentRegionAvail().x - label_w;
  ImGui::TextUnformatted("producer");
  ImGui::SameLine(label_w);
  p = ImGui::GetCursorScreenPos();
  box(p, w, IM_COL32(150, 150, 165, 255),
      j + 1 < res.Tc ? fmt::format("TMA: K_{}, V_{} into a free stage; then waits", j + 1, j + 1) : std::string("waits: no block left"));
  ImGui::Dummy(ImVec2(w, height));
  // Pingpong: at each K_j the consumers take turns on the tensor cores, the others in their softmax.
  for (std::int64_t g = 0; g < pipe->consumer_warpgroups; ++g) {
    const bool gemm = (j + g) % pipe->consumer_warpgroups == 0;
    ImGui::Text("consumer %lld", static_cast<long long>(g + 1));
    ImGui::SameLine(label_w);
    p = ImGui::GetCursorScreenPos();
    box(p, w, gemm ? IM_COL32(90, 170, 110, 255) : IM_COL32(200, 120, 200, 255),
        gemm ? fmt::format("GEMMs: S = Q K_{}ᵀ and P̃ V (wgmma)", j) : fmt::format("softmax of S_{} (exponent unit)", j));
    ImGui::Dummy(ImVec2(w, height));
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
    const PipeBusy pipes = pipe_busy(c, k.time_s, res.gpu);
    ImGui::Spacing();
    ImGui::Text("Where the time goes: each pipe's busy share at its measured rate");
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
