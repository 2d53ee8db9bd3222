// Panels made of widgets: controls, lesson, online softmax, IO and bounds, help overlay and
// keyboard shortcuts. Custom drawings (memory, matrix, explorer, timeline, measured) are in canvas.cpp.
//
// [SECTION] Colours and helpers
// [SECTION] Drawings' room
// [SECTION] Controls
// [SECTION] Lesson
// [SECTION] Online softmax
// [SECTION] IO and bounds
// [SECTION] Help and shortcuts
#include "viz/panels.hpp"

#include <GLFW/glfw3.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "sim/common/units.hpp"

namespace hbmlab::viz {

// [SECTION] Colours and helpers

ImVec4 tensor_colour_v(Tensor t) {
  constexpr float c[kTensorCount][3] = {
      {0.27f, 0.53f, 0.96f},  // Q
      {0.24f, 0.72f, 0.36f},  // K
      {0.67f, 0.42f, 0.85f},  // V
      {0.96f, 0.58f, 0.12f},  // O
      {0.90f, 0.30f, 0.26f},  // S
      {0.93f, 0.35f, 0.62f},  // P
      {0.15f, 0.78f, 0.85f},  // ℓ
      {0.80f, 0.62f, 0.45f},  // m
      {0.60f, 0.68f, 0.78f},  // L
      {0.98f, 0.75f, 0.35f},  // dO
      {0.45f, 0.65f, 1.00f},  // dQ
      {0.45f, 0.85f, 0.50f},  // dK
      {0.80f, 0.60f, 0.95f},  // dV
      {0.98f, 0.50f, 0.75f},  // dP
      {0.95f, 0.45f, 0.40f},  // dS
      {0.40f, 0.85f, 0.75f},  // D
      {0.96f, 0.70f, 0.40f},  // O_part
      {0.70f, 0.76f, 0.85f},  // L_part
  };
  const float* v = c[static_cast<int>(t)];
  return {v[0], v[1], v[2], 1.0f};
}

ImU32 tensor_colour(Tensor t, float alpha) {
  ImVec4 v = tensor_colour_v(t);
  v.w = alpha;
  return ImGui::ColorConvertFloat4ToU32(v);
}

ImU32 algo_colour(Algo a) {
  const auto& rgb = a->window().colour;
  return IM_COL32(rgb[0], rgb[1], rgb[2], 255);
}

// Dear ImGui's TextWrapped may break a line after '.' or ',', inside "8.66 GB" or "1,024"; this breaks
// lines at spaces only (and at the text's own '\n'), so a figure is never split. Only a word wider than
// the whole line (a file's path in a narrow pane) is broken, where Dear ImGui would break it.
void TextWrappedAtSpaces(std::string_view text) {
  const float width = std::max(ImGui::GetContentRegionAvail().x, ImGui::GetFontSize());
  std::string out, line;
  auto fits = [width](const std::string& s) { return ImGui::CalcTextSize(s.c_str()).x <= width; };
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find_first_of(" \n", at), text.size());
    const std::string word(text.substr(at, end - at));
    const std::string joined = line.empty() ? word : line + " " + word;
    if (!line.empty() && !fits(joined)) {
      out += line + "\n";
      line = word;
    } else {
      line = joined;
    }
    ImFont* font = ImGui::GetFont();
    while (!fits(line)) {  // a word longer than a line: its head fills this one
      const char* begin = line.c_str();
      const char* cut = font->CalcWordWrapPositionA(ImGui::GetFontSize() / font->FontSize, begin, begin + line.size(), width);
      if (cut <= begin) break;
      out += std::string(begin, cut) + "\n";
      line.erase(0, static_cast<std::size_t>(cut - begin));
    }
    if (end < text.size() && text[end] == '\n') {
      out += line + "\n";
      line.clear();
    }
    at = end + 1;
  }
  out += line;
  ImGui::TextUnformatted(out.c_str());
}

namespace {
float luminance(ImU32 c) {  // WCAG's relative luminance of an sRGB colour
  const ImVec4 v = ImGui::ColorConvertU32ToFloat4(c);
  auto linear = [](float x) { return x <= 0.04045f ? x / 12.92f : std::pow((x + 0.055f) / 1.055f, 2.4f); };
  return 0.2126f * linear(v.x) + 0.7152f * linear(v.y) + 0.0722f * linear(v.z);
}
}  // namespace

float ContrastRatio(ImU32 a, ImU32 b) {
  const float la = luminance(a), lb = luminance(b);
  return (std::max(la, lb) + 0.05f) / (std::min(la, lb) + 0.05f);
}

ImU32 ReadableOn(ImU32 background, ImU32 colour, float ratio) {
  const ImU32 target = ContrastRatio(background, IM_COL32_WHITE) >= ContrastRatio(background, IM_COL32_BLACK) ? IM_COL32_WHITE
                                                                                                               : IM_COL32_BLACK;
  const ImVec4 c = ImGui::ColorConvertU32ToFloat4(colour), t = ImGui::ColorConvertU32ToFloat4(target);
  for (int k = 0; k <= 20; ++k) {  // towards the target in twentieths, keeping the hue as long as it can
    const float f = float(k) / 20.0f;
    const ImU32 m = ImGui::ColorConvertFloat4ToU32(ImVec4(c.x + (t.x - c.x) * f, c.y + (t.y - c.y) * f, c.z + (t.z - c.z) * f, c.w));
    if (ContrastRatio(background, m) >= ratio) return m;
  }
  return target;
}

ImU32 TextOn(ImU32 fill) {
  constexpr ImU32 dark = IM_COL32(12, 12, 16, 255), light = IM_COL32(235, 235, 240, 255);
  return ContrastRatio(fill, dark) >= ContrastRatio(fill, light) ? dark : light;
}

HighlightedRow::HighlightedRow(bool on) : on_(on) {
  if (!on_) return;
  ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg0, kRowHighlight);
  ImGui::PushStyleColor(ImGuiCol_Text, ReadableOn(kRowHighlight, ImGui::GetColorU32(ImGuiCol_Text)));
  ImGui::PushStyleColor(ImGuiCol_TextDisabled, ReadableOn(kRowHighlight, ImGui::GetColorU32(ImGuiCol_TextDisabled)));
}

HighlightedRow::~HighlightedRow() {
  if (on_) ImGui::PopStyleColor(2);
}

ImVec4 HighlightedRow::operator()(ImVec4 colour) const {
  if (!on_) return colour;
  return ImGui::ColorConvertU32ToFloat4(ReadableOn(kRowHighlight, ImGui::ColorConvertFloat4ToU32(colour)));
}

void TextWrappedColoured(ImU32 colour, const char* text) {
  ImGui::PushStyleColor(ImGuiCol_Text, colour);
  TextWrappedAtSpaces(text);
  ImGui::PopStyleColor();
}

void PanelTitle(const char* title, bool highlighted) {
  if (highlighted) {
    ImGui::TextColored(ImVec4(1.0f, 0.85f, 0.3f, 1.0f), "%s", title);
  } else {
    ImGui::TextUnformatted(title);
  }
  ImGui::Separator();
}

// [SECTION] Drawings' room

ImVec2 MinimumSize(Drawing drawing) {
  const float fs = ImGui::GetFontSize();
  switch (drawing) {
    case Drawing::memory: return ImVec2(fs * 27, fs * 23);
    case Drawing::matrix: return ImVec2(fs * 27, fs * 14);
    case Drawing::tab: return ImVec2(fs * 26, fs * 16);
  }
  return ImVec2(0, 0);
}

namespace {

// A table cell the replay has not reached yet: an em dash, which a class sees from the back of the
// room where a centred dot is a speck, in the dim colour (HighlightedRow lifts it to 4.5:1 on its row).
void NotReachedYet() { ImGui::TextDisabled("—"); }

int log2_of(std::int64_t v) {
  int e = 0;
  while ((std::int64_t{1} << (e + 1)) <= v) ++e;
  return e;
}

// A slider over powers of two; returns true when a drag ends with a new value.
bool Pow2Slider(const char* label, std::int64_t& value, int lo, int hi, const char* shown) {
  int e = std::clamp(log2_of(value), lo, hi);
  // The value itself is shown: a scenario or the paper's rule may have chosen one between powers.
  const std::string text = fmt::format(fmt::runtime(shown), value);
  const bool moved = ImGui::SliderInt(label, &e, lo, hi, text.c_str(), ImGuiSliderFlags_AlwaysClamp);
  if (moved) value = std::int64_t{1} << e;
  return ImGui::IsItemDeactivatedAfterEdit();
}

const char* algo_label(Algo a) { return a->window().label.data(); }

}  // namespace

// [SECTION] Controls

void ShowControlsPanel(AppState& app) {
  Settings& s = app.settings;
  bool changed = false;
  const float w = ImGui::GetContentRegionAvail().x;
  ImGui::PushItemWidth(-1);  // widgets span the pane; their text says what they are

  // Scenario picker: embedded lessons and workloads, or a file.
  const std::string current = app.scenario.title.empty() ? std::string("(none)") : app.scenario.title;
  if (ImGui::BeginCombo("##scenario", current.c_str())) {
    for (const std::string& name : app.scenario_names)
      if (ImGui::Selectable(name.c_str(), false)) load_scenario_into(app, name);
    ImGui::EndCombo();
  }
  ImGui::SetNextItemWidth(w - ImGui::CalcTextSize("Open").x - ImGui::GetStyle().FramePadding.x * 2 -
                          ImGui::GetStyle().ItemSpacing.x);
  char path[512];
  std::snprintf(path, sizeof path, "%s", app.open_path.c_str());
  if (ImGui::InputTextWithHint("##open", "path/to/scenario.toml", path, sizeof path, ImGuiInputTextFlags_EnterReturnsTrue)) {
    app.open_path = path;
    load_scenario_into(app, app.open_path);
  } else {
    app.open_path = path;
  }
  ImGui::SameLine();
  if (ImGui::Button("Open")) load_scenario_into(app, app.open_path);
  if (!app.scenario_error.empty()) TextWrappedColoured(IM_COL32(255, 110, 100, 255), app.scenario_error.c_str());

  ImGui::Spacing();
  if (ImGui::BeginCombo("##gpu", current_gpu(app).display_name.c_str())) {
    for (std::size_t g = 0; g < app.gpus.size(); ++g)
      if (ImGui::Selectable(app.gpus[g].display_name.c_str(), static_cast<int>(g) == s.gpu)) {
        s.gpu = static_cast<int>(g);
        changed = true;
      }
    ImGui::EndCombo();
  }
  if (ImGui::BeginCombo("##algorithm", algo_label(s.algo))) {
    for (Pass pass : {Pass::forward, Pass::backward})
      for (Algo a : algorithms(pass))
        if (ImGui::Selectable(algo_label(a), a == s.algo)) {
          s.algo = a;
          changed = true;
        }
    ImGui::EndCombo();
  }
  changed |= ImGui::Checkbox("side by side with", &s.side_by_side);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(-1);
  if (ImGui::BeginCombo("##algo_b", to_string(s.algo_b).data())) {
    for (Pass pass : {Pass::forward, Pass::backward})
      for (Algo a : algorithms(pass))
        if (ImGui::Selectable(algo_label(a), a == s.algo_b)) {
          s.algo_b = a;
          changed = s.side_by_side;
        }
    ImGui::EndCombo();
  }

  ImGui::Spacing();
  ImGui::TextDisabled("problem (one head: N × d)");
  changed |= Pow2Slider("##N", s.N, 4, 16, "N = {}");
  changed |= Pow2Slider("##d", s.d, 2, 8, "d = {}");
  // B, H and the K/V heads HKV (grouped-query attention: H/HKV query heads share one).
  int bh[3] = {static_cast<int>(s.batch), static_cast<int>(s.heads), static_cast<int>(s.kv_heads > 0 ? s.kv_heads : s.heads)};
  ImGui::TextUnformatted("B, H, HKV");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(-1);
  if (ImGui::InputInt3("##BH", bh)) {
    s.batch = std::clamp(bh[0], 1, 4096);
    s.heads = std::clamp(bh[1], 1, 256);
    s.kv_heads = bh[2] == bh[1] ? 0 : std::clamp<std::int64_t>(bh[2], 1, s.heads);
  }
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  changed |= ImGui::Checkbox("causal mask", &s.causal);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(-1);
  // Block masks (flash1, flash2): a few to pick from; a scenario or lesson may set any other spec.
  const std::string shown = s.block_mask.empty() ? "every block pair" : "block mask " + s.block_mask;
  if (ImGui::BeginCombo("##block_mask", shown.c_str())) {
    for (const char* spec : {"", "local:256", "local:1024", "butterfly", "random:0.25"})
      if (ImGui::Selectable(*spec ? spec : "every block pair", s.block_mask == spec)) {
        s.block_mask = spec;
        changed = true;
      }
    ImGui::EndCombo();
  }

  // Decoding: NQ new query rows against a cache of N; the split-KV rooms' split count and φ. Folded
  // away for self-attention; a decoding scenario opens it.
  ImGui::SetNextItemOpen(app.decode_controls_open, ImGuiCond_Always);
  app.decode_controls_open = ImGui::TreeNodeEx("decoding: NQ query rows, S splits, φ", ImGuiTreeNodeFlags_NoTreePushOnOpen);
  if (app.decode_controls_open) {
    const float half = (ImGui::GetContentRegionAvail().x - ImGui::GetStyle().ItemSpacing.x) / 2;
    std::int64_t nq = s.query_len > 0 ? std::min(s.query_len, s.N) : s.N;
    ImGui::SetNextItemWidth(half);
    changed |= Pow2Slider("##NQ", nq, 0, log2_of(s.N), nq == s.N ? "NQ = N" : "NQ = {}");
    s.query_len = nq >= s.N ? 0 : nq;
    const SimulationResult* shown = app.replay[0] ? &app.replay[0]->result() : nullptr;
    ImGui::SameLine();
    ImGui::SetNextItemWidth(-1);
    ImGui::BeginDisabled(!s.algo->supports().splits);
    int splits = static_cast<int>(s.splits);
    const int most = static_cast<int>(std::clamp<std::int64_t>(shown ? shown->Tc : 1, 1, 1024));
    const std::string auto_text =
        shown && s.algo->supports().splits ? fmt::format("S = {} (auto)", shown->problem.kv_splits) : "S = auto";
    if (ImGui::SliderInt("##splits", &splits, 0, most, splits == 0 ? auto_text.c_str() : "S = %d", ImGuiSliderFlags_AlwaysClamp))
      s.splits = splits;
    changed |= ImGui::IsItemDeactivatedAfterEdit();
    ImGui::EndDisabled();
    ImGui::BeginDisabled(!s.algo->supports().unified_max);
    bool auto_phi = !s.unified_max;
    const double room_phi = shown && shown->problem.unified_max ? *shown->problem.unified_max : 0.0;
    if (ImGui::Checkbox("φ from the scores", &auto_phi)) {
      s.unified_max = auto_phi ? std::nullopt : std::optional<double>(room_phi);
      changed = true;
    }
    ImGui::SameLine();
    ImGui::SetNextItemWidth(-1);
    float phi = static_cast<float>(s.unified_max.value_or(room_phi));
    ImGui::BeginDisabled(auto_phi);
    if (ImGui::SliderFloat("##phi", &phi, -100.0f, 100.0f, "φ = %.2f", ImGuiSliderFlags_AlwaysClamp)) s.unified_max = phi;
    changed |= ImGui::IsItemDeactivatedAfterEdit();
    ImGui::EndDisabled();
    ImGui::EndDisabled();
  }

  ImGui::Spacing();
  ImGui::TextDisabled("blocks and SRAM");
  changed |= ImGui::Checkbox("paper's rule for Br, Bc", &s.auto_blocks);
  ImGui::BeginDisabled(s.auto_blocks);
  changed |= Pow2Slider("##Br", s.Br, 0, 10, "Br = {}");
  changed |= Pow2Slider("##Bc", s.Bc, 0, 10, "Bc = {}");
  ImGui::EndDisabled();
  changed |= ImGui::Checkbox("GPU's SRAM per SM", &s.gpu_sram);
  ImGui::BeginDisabled(s.gpu_sram);
  {
    int e = std::clamp(log2_of(s.sram_bytes), 6, 20);
    const std::string text = "SRAM " + format_bytes(double(s.sram_bytes));
    if (ImGui::SliderInt("##SRAM", &e, 6, 20, text.c_str(), ImGuiSliderFlags_AlwaysClamp)) s.sram_bytes = std::int64_t{1} << e;
    changed |= ImGui::IsItemDeactivatedAfterEdit();
  }
  ImGui::EndDisabled();
  int row = s.watch_row >= 0 || !app.replay[0] ? std::max(s.watch_row, 0) : static_cast<int>(app.replay[0]->softmax().row);
  const std::int64_t query_rows = s.query_len > 0 ? std::min(s.query_len, s.N) : s.N;
  if (ImGui::SliderInt("##watched row", &row, 0, static_cast<int>(std::min<std::int64_t>(query_rows - 1, 1 << 20)), "watched query row %d",
                       ImGuiSliderFlags_AlwaysClamp))
    s.watch_row = row;
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  ImGui::PopItemWidth();
  if (changed) rebuild(app);

  // Playback
  ImGui::Spacing();
  ImGui::Separator();
  const std::int64_t n = app.replay[0] ? app.replay[0]->step_count() : 0;
  const float bw = (w - 4 * ImGui::GetStyle().ItemSpacing.x) / 5;
  if (ImGui::Button("|◀", ImVec2(bw, 0))) step_by(app, -n);
  ImGui::SameLine();
  if (ImGui::Button("◀", ImVec2(bw, 0))) step_by(app, -1);
  ImGui::SameLine();
  if (ImGui::Button(app.play.playing ? "Pause" : "Play", ImVec2(bw, 0))) {
    if (!app.play.playing && app.play.pos >= n) jump_to(app, 0);
    app.play.playing = !app.play.playing;
  }
  ImGui::SameLine();
  if (ImGui::Button("▶", ImVec2(bw, 0))) step_by(app, 1);
  ImGui::SameLine();
  if (ImGui::Button("▶|", ImVec2(bw, 0))) step_by(app, n);
  ImGui::SetNextItemWidth(-1);
  ImGui::SliderFloat("##speed", &app.play.speed, 0.5f, 1e6f, "speed %.1f steps/s", ImGuiSliderFlags_Logarithmic);
  long long pos = app.play.pos;
  ImGui::SetNextItemWidth(-1);
  const std::string pos_text = fmt::format("step {} of {}", pos, n);
  const long long pos_min = 0, pos_max = n;
  if (ImGui::SliderScalar("##position", ImGuiDataType_S64, &pos, &pos_min, &pos_max, pos_text.c_str()))
    jump_to(app, pos);
  ImGui::TextDisabled("H: help and keyboard shortcuts");
}

// [SECTION] Lesson

void ShowLessonPanel(AppState& app) {
  const Scenario& sc = app.scenario;
  const std::string title = sc.kind == "lesson" ? fmt::format("Lesson {}: {}", sc.number, sc.title) : sc.title;
  TextWrappedColoured(IM_COL32(255, 217, 77, 255), title.c_str());
  ImGui::Separator();
  if (sc.stages.empty()) {
    TextWrappedAtSpaces(sc.summary);
    return;
  }
  const LessonStage& st = sc.stages[static_cast<std::size_t>(app.stage)];
  const float bw = (ImGui::GetContentRegionAvail().x - ImGui::GetStyle().ItemSpacing.x) / 2;
  ImGui::BeginDisabled(app.stage == 0);
  if (ImGui::Button("◀ Back", ImVec2(bw, 0))) apply_stage(app, app.stage - 1);
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::BeginDisabled(app.stage + 1 >= static_cast<int>(sc.stages.size()));
  if (ImGui::Button("Next ▶", ImVec2(bw, 0))) apply_stage(app, app.stage + 1);
  ImGui::EndDisabled();
  ImGui::TextDisabled("Stage %d of %zu", app.stage + 1, sc.stages.size());
  TextWrappedColoured(IM_COL32(255, 255, 255, 255), st.title.c_str());
  ImGui::Spacing();
  if (app.font_large) ImGui::PopFont();  // the caption in the regular face: long text reads better
  TextWrappedAtSpaces(st.caption);
  if (app.font_large) ImGui::PushFont(app.font_large);
}

// [SECTION] Online softmax

namespace {

// Split-KV decoding: one row per split (its running state while its blocks come in, then its partial
// O_s and LSE_s), then the combine taking them one at a time: e^(LSE_s − LSE) on the synchronised path,
// ℓ_s / ℓ with FlashDecoding++'s unified max, where nothing needs rescaling.
void ShowSplitSoftmax(const view::SoftmaxView& sm, std::int64_t pos) {
  const bool unified = sm.unified && !sm.fell_back;
  ImGui::Spacing();
  if (sm.fell_back) {
    TextWrappedColoured(IM_COL32(255, 150, 110, 255),
                        fmt::format("Fallback: this row's largest score is {:.1f} above φ = {:.2f}, beyond the safe range of "
                                    "+{:.1f} / −{:.1f} for {} (e^(x − φ) would overflow or vanish in {}). FlashDecoding++ ran its "
                                    "splits again on the synchronised path, shown here; the IO panel counts the second pass over "
                                    "the cache.",
                                    sm.m_exact - sm.phi, sm.phi, sm.safe_above, sm.safe_below, sm.dtype, sm.dtype)
                            .c_str());
  } else if (unified) {
    ImGui::TextWrapped("Every split subtracts the same unified max φ = %.3f: its ℓ_s = Σ e^(x − φ) and Σ e^(x − φ)·v need no "
                       "rescale, and the combine simply adds them.", sm.phi);
  } else {
    ImGui::TextWrapped("Each split keeps its own running max m_s and writes its partial O_s with LSE_s = m_s + log ℓ_s; the "
                       "combine rescales each O_s by e^(LSE_s − LSE), LSE = log Σ_s e^(LSE_s).");
  }
  const std::size_t shown = sm.events_before(pos);
  const bool lse_known = sm.lse_step >= 0 && pos > sm.lse_step;
  if (ImGui::BeginTable("splits", 5, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    ImGui::TableSetupColumn("split (K/V blocks)");
    ImGui::TableSetupColumn(unified ? "max" : "m_s (its max)");
    ImGui::TableSetupColumn(unified ? "ℓ_s = Σ e^(x − φ)" : "ℓ_s");
    ImGui::TableSetupColumn("LSE_s");
    ImGui::TableSetupColumn(unified ? "ℓ_s / ℓ" : "e^(LSE_s − LSE)");
    ImGui::TableHeadersRow();
    for (std::size_t s = 0; s < sm.splits.size(); ++s) {
      const view::SplitPartial& part = sm.splits[s];
      const SoftmaxEvent* state = nullptr;  // the split's latest block so far
      for (std::size_t e = 0; e < shown; ++e)
        if (!sm.events[e].combine && sm.events[e].split == static_cast<std::int64_t>(s)) state = &sm.events[e];
      const bool combined = part.combined_step >= 0 && pos > part.combined_step;
      ImGui::TableNextRow();
      // the split the combine just took
      const HighlightedRow row(combined && (s + 1 == sm.splits.size() || pos <= sm.splits[s + 1].combined_step));
      ImGui::TableNextColumn();
      ImGui::TextColored(row(tensor_colour_v(Tensor::K)), "%zu (K_%lld…K_%lld)", s + 1, static_cast<long long>(part.j_first + 1),
                         static_cast<long long>(part.j_last + 1));
      const bool done = part.done_step >= 0 && pos > part.done_step;
      ImGui::TableNextColumn();
      if (part.empty) {
        ImGui::TextDisabled("no key visible");
        for (int c = 0; c < 3; ++c) ImGui::TableNextColumn();
        continue;
      }
      if (!state) {
        NotReachedYet();
        for (int c = 0; c < 3; ++c) {
          ImGui::TableNextColumn();
          NotReachedYet();
        }
        continue;
      }
      if (unified)
        ImGui::Text("φ");
      else
        ImGui::Text("%.4f", state->m_new);
      ImGui::TableNextColumn();
      ImGui::Text(unified ? "%.4g" : "%.4f", state->l_new);
      ImGui::TableNextColumn();
      if (done)
        ImGui::Text("%.4f", part.lse);
      else
        ImGui::TextDisabled("block K_%lld…", static_cast<long long>(state->j + 1));
      ImGui::TableNextColumn();
      if (!lse_known) {
        NotReachedYet();
      } else if (combined) {  // rescaled by its weight; on the unified path only added (the share is ℓ_s / ℓ)
        ImGui::TextColored(row(ImVec4(1.0f, 0.8f, 0.3f, 1.0f)), unified ? "%.4f, added" : "× %.4f", part.weight);
      } else {
        ImGui::Text("%.4f", part.weight);
      }
    }
    ImGui::EndTable();
  }
  ImGui::Spacing();
  if (lse_known)
    ImGui::TextColored(ImVec4(1.0f, 0.85f, 0.3f, 1.0f), unified ? "LSE = φ + log Σ_s ℓ_s = %.6f (exact in fp64: %.6f)"
                                                                : "LSE = log Σ_s e^(LSE_s) = %.6f (exact in fp64: %.6f)",
                       sm.LSE, sm.LSE_exact);
  else
    TextWrappedColoured(ImGui::GetColorU32(ImGuiCol_TextDisabled),
                        fmt::format("The combine's LSE appears when the combine CTA has read every split's LSE_s (line {}).",
                                    sm.fell_back ? 22 : 10)
                            .c_str());
}

// One row per K/V block of the watched row: the running max, the rescale it causes, the running sum.
void ShowBlockSoftmax(const view::SoftmaxView& sm, std::size_t shown, std::int64_t dims) {
  ImGui::Spacing();
  if (ImGui::BeginTable("softmax", 5, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    ImGui::TableSetupColumn("block");
    ImGui::TableSetupColumn("m (running max)");
    ImGui::TableSetupColumn("e^(m_old − m_new)");
    ImGui::TableSetupColumn("ℓ (running sum)");
    ImGui::TableSetupColumn("O[0], O[1]");
    ImGui::TableHeadersRow();
    for (std::size_t e = 0; e < sm.events.size(); ++e) {
      const SoftmaxEvent& ev = sm.events[e];
      const bool done = e < shown;
      const bool latest = done && e + 1 == shown;
      ImGui::TableNextRow();
      const HighlightedRow row(latest);
      ImGui::TableNextColumn();
      ImGui::TextColored(row(tensor_colour_v(Tensor::K)), "K_%lld", static_cast<long long>(ev.j + 1));
      if (!done) {
        for (int c = 0; c < 4; ++c) {
          ImGui::TableNextColumn();
          NotReachedYet();
        }
        continue;
      }
      ImGui::TableNextColumn();
      ImGui::Text("%.4f", ev.m_new);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("m_old = %.6f, m_new = %.6f", ev.m_old, ev.m_new);
      ImGui::TableNextColumn();
      if (std::isinf(ev.m_old)) {
        ImGui::TextDisabled("first block");
      } else if (ev.rescale < 1) {
        ImGui::TextColored(row(ImVec4(1.0f, 0.8f, 0.3f, 1.0f)), "× %.4f", ev.rescale);
      } else {
        ImGui::Text("× %.4f", ev.rescale);
      }
      ImGui::TableNextColumn();
      ImGui::Text("%.4f", ev.l_new);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("ℓ_new = e^(m_old − m_new)·ℓ_old + (this block's sum) = %.6f·%.6f + …", ev.rescale, ev.l_old);
      ImGui::TableNextColumn();
      std::string o;
      for (std::int64_t x = 0; x < dims && x < static_cast<std::int64_t>(ev.O_partial.size()); ++x)
        o += fmt::format("{}{:+.3f}", x ? "  " : "", ev.O_partial[static_cast<std::size_t>(x)]);
      ImGui::TextUnformatted(o.c_str());
    }
    ImGui::EndTable();
  }
  ImGui::Spacing();
  ImGui::TextWrapped("When a block raises the max, everything summed so far was scaled by e^(m_old) instead of "
                     "e^(m_new): multiplying ℓ and O by e^(m_old − m_new) fixes it without reading old blocks again.");
}

}  // namespace

void ShowSoftmaxPanel(AppState& app) {
  PanelTitle("Online softmax of one query row", app.highlight == "softmax");
  if (!app.replay[0]) return;
  const view::ReplayView& r = *app.replay[0];
  const view::SoftmaxView& sm = r.softmax();
  if (!sm.available) {
    ImGui::TextWrapped("Not available: %s.", sm.why_not.c_str());
    return;
  }
  ImGui::TextWrapped("Query row %lld (in block Q_%lld), random inputs, fp32 as a kernel computes it; "
                     "the exact answer in fp64 beside it.",
                     static_cast<long long>(sm.row), static_cast<long long>(sm.row_block + 1));
  const std::int64_t pos = app.play.pos;
  if (const WindowTraits& w = r.algo()->window(); !w.running_softmax) {
    ImGui::Spacing();
    ImGui::TextWrapped("%s", w.softmax_note.data());
    if (sm.exact_step >= 0 && pos > sm.exact_step) {
      ImGui::Text("m = %.5f   ℓ = %.5f   (computed at line %d)", sm.m_exact, sm.l_exact, w.row_softmax_line);
    } else {
      ImGui::TextDisabled("waiting for line %d to reach row block Q_%lld", w.row_softmax_line,
                          static_cast<long long>(sm.row_block + 1));
    }
    return;
  }
  const std::size_t shown = sm.events_before(pos);
  const std::int64_t dims = std::min<std::int64_t>(static_cast<std::int64_t>(sm.O_exact.size()), 2);
  if (!sm.splits.empty()) {
    ShowSplitSoftmax(sm, pos);
  } else {
    ShowBlockSoftmax(sm, shown, dims);
  }
  ImGui::Spacing();
  ImGui::Separator();
  if (shown == sm.events.size() && shown > 0) {
    const SoftmaxEvent& last = sm.events.back();
    if (sm.splits.empty()) {
      ImGui::Text("Final: m = %.6f, ℓ = %.6f", last.m_new, last.l_new);
      ImGui::Text("Exact: m = %.6f, ℓ = %.6f", sm.m_exact, sm.l_exact);
    }
    if (ImGui::BeginTable("exact", 4, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingStretchSame)) {
      ImGui::TableSetupColumn("dim");
      ImGui::TableSetupColumn("online (fp32)");
      ImGui::TableSetupColumn("exact (fp64)");
      ImGui::TableSetupColumn("difference");
      ImGui::TableHeadersRow();
      for (std::int64_t x = 0; x < std::min<std::int64_t>(static_cast<std::int64_t>(sm.O_exact.size()), 8); ++x) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("O[%lld]", static_cast<long long>(x));
        ImGui::TableNextColumn();
        ImGui::Text("%+.6f", sm.O_final[static_cast<std::size_t>(x)]);
        ImGui::TableNextColumn();
        ImGui::Text("%+.6f", sm.O_exact[static_cast<std::size_t>(x)]);
        ImGui::TableNextColumn();
        ImGui::Text("%.1e", std::abs(sm.O_final[static_cast<std::size_t>(x)] - sm.O_exact[static_cast<std::size_t>(x)]));
      }
      ImGui::EndTable();
    }
    ImGui::TextColored(ImVec4(0.5f, 0.9f, 0.5f, 1.0f), "max |online − exact| over all %zu dims = %.1e: the same softmax.",
                       sm.O_exact.size(), sm.max_abs_diff);
  } else {
    ImGui::TextDisabled(sm.splits.empty() ? "The exact softmax appears here when every K/V block has been seen."
                                          : "The row of O appears here when the combine writes it (line 12).");
  }
}

// [SECTION] IO and bounds

namespace {

void StackedBar(const Counts& c, double scale, float width, float height) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  float x = p.x;
  for (Tensor t : kAllTensors) {
    const double elems = double(c[t].read_elems + c[t].write_elems);
    const float w = static_cast<float>(elems * scale) * width;
    if (w <= 0) continue;
    dl->AddRectFilled(ImVec2(x, p.y), ImVec2(x + w, p.y + height), tensor_colour(t));
    if (w > ImGui::CalcTextSize(tensor_symbol(t).data()).x + 6)  // the name where it fits in its segment
      DrawText(dl, ImVec2(x + 3, p.y + (height - ImGui::GetFontSize()) / 2), TextOn(tensor_colour(t)), tensor_symbol(t));
    x += w;
  }
  ImGui::Dummy(ImVec2(width, height));
  NoteDrawingItem();  // the room of what was drawn above
}

}  // namespace

void ShowIoPanel(AppState& app) {
  PanelTitle("HBM traffic and the IO bounds", app.highlight == "io");
  if (!app.replay[0]) return;
  const view::ReplayView& r = *app.replay[0];
  const SimulationResult& res = r.result();
  const Counts now = r.counts_before(app.play.pos);
  const Counts& total = res.per_instance;
  const bool packed = r.algo()->heads_per_instance(res.problem) > 1;  // GQA-packed decoding: one (batch, K/V head)
  ImGui::Text("%s, one %s, after step %lld of %lld", to_string(r.algo()).data(), packed ? "(batch, K/V head) group" : "(batch, head)",
              static_cast<long long>(app.play.pos), static_cast<long long>(r.step_count()));
  if (ImGui::BeginTable("io", 4, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    ImGui::TableSetupColumn("tensor");
    ImGui::TableSetupColumn("read so far / in all");
    ImGui::TableSetupColumn("written so far / in all");
    ImGui::TableSetupColumn("progress");
    ImGui::TableHeadersRow();
    for (Tensor t : kAllTensors) {
      if (!total.touches(t)) continue;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextColored(tensor_colour_v(t), "%s", tensor_symbol(t).data());
      ImGui::TableNextColumn();
      ImGui::Text("%s / %s", format_bytes(double(now[t].read_bytes)).c_str(), format_bytes(double(total[t].read_bytes)).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%s / %s", format_bytes(double(now[t].write_bytes)).c_str(),
                  format_bytes(double(total[t].write_bytes)).c_str());
      ImGui::TableNextColumn();
      const double all = double(total[t].read_bytes + total[t].write_bytes);
      const float frac = all > 0 ? static_cast<float>(double(now[t].read_bytes + now[t].write_bytes) / all) : 0.0f;
      ImGui::PushStyleColor(ImGuiCol_PlotHistogram, tensor_colour(t));
      ImGui::ProgressBar(frac, ImVec2(-1, 0), "");
      ImGui::PopStyleColor();
    }
    ImGui::EndTable();
  }
  if (res.mask) {
    const double dense = double(res.mask->dense_total.hbm_bytes()), masked = double(res.total.hbm_bytes());
    ImGui::TextColored(ImVec4(0.75f, 0.6f, 0.95f, 1.0f), "Block mask %s keeps %lld of %lld pairs (%.0f%%)", res.mask->spec.c_str(),
                       static_cast<long long>(res.mask->kept_pairs), static_cast<long long>(res.mask->pairs),
                       100 * res.mask->density);
    ImGui::TextWrapped("HBM traffic %s against %s without the mask: %.1f× less.", format_bytes(masked).c_str(),
                       format_bytes(dense).c_str(), masked > 0 ? dense / masked : 0.0);
  }
  TextWrappedAtSpaces(fmt::format("All B·H = {} heads: {} read, {} written, {} accesses (elements)", res.problem.instances(),
                                  format_bytes(double(res.total.hbm_read_bytes())),
                                  format_bytes(double(res.total.hbm_write_bytes())), format_count(double(res.total.accesses()))));
  if (res.problem.Nq() < res.problem.seq_len) {  // decoding: the softmax work that sets the rooms apart
    const NonMatmulOps ops = r.algo()->non_matmul_ops(res.problem, r.blocks());
    ImGui::TextWrapped("Softmax work of one %s: %s exponentials, %s elements rescaled, %s running-max updates, %lld kernel%s: %s.",
                       packed ? "group" : "head", format_count(double(ops.exponentials)).c_str(),
                       format_count(double(ops.rescaled_elements)).c_str(), format_count(double(ops.max_updates)).c_str(),
                       static_cast<long long>(ops.kernels), ops.kernels == 1 ? "" : "s", std::string(ops.note).c_str());
  }
  ImGui::Spacing();
  ImGui::TextColored(ImVec4(1.0f, 0.85f, 0.3f, 1.0f), "Bound: %s(%s)", res.bound.kind.c_str(), res.bound.expression.c_str());
  ImGui::TextWrapped("%s = %s with N = %lld, d = %lld, M = %lld elements, × B·H. Counted accesses are %.2f× that.",
                     res.bound.expression.c_str(), format_count(res.bound.value).c_str(),
                     static_cast<long long>(res.problem.seq_len), static_cast<long long>(res.problem.head_dim),
                     static_cast<long long>(res.blocks.M_elements), res.bound.ratio);

  ImGui::Spacing();
  ImGui::Separator();
  ImGui::Text("HBM accesses of the whole problem, by tensor");
  double most = 0;
  for (const view::AlgoBar& b : app.bars)
    if (b.ok) most = std::max(most, double(b.result.total.accesses()));
  // Every bar against the first (standard attention, the registry's first room).
  const double first = !app.bars.empty() && app.bars[0].ok ? double(app.bars[0].result.total.accesses()) : 0;
  float name_w = 0;
  for (const view::AlgoBar& b : app.bars) name_w = std::max(name_w, ImGui::CalcTextSize(to_string(b.algo).data()).x);
  const float label_w = name_w + ImGui::GetStyle().WindowPadding.x + ImGui::GetStyle().ItemSpacing.x * 2;
  for (const view::AlgoBar& b : app.bars) {
    ImGui::PushStyleColor(ImGuiCol_Text, algo_colour(b.algo));
    ImGui::TextUnformatted(to_string(b.algo).data());
    ImGui::PopStyleColor();
    ImGui::SameLine(label_w);
    if (!b.ok) {
      TextWrappedColoured(b.shape_not_taken ? IM_COL32(150, 150, 160, 255) : IM_COL32(255, 110, 100, 255), b.error.c_str());
      continue;
    }
    const double acc = double(b.result.total.accesses());
    StackedBar(b.result.total, most > 0 ? 1.0 / most : 0, ImGui::GetContentRegionAvail().x, ImGui::GetFrameHeight());
    std::string note = fmt::format("{} accesses, Br={} Bc={}, {}({})", format_count(acc), b.result.blocks.blocks.Br,
                                   b.result.blocks.blocks.Bc, b.result.bound.kind, b.result.bound.expression);
    if (!(b.algo == app.bars[0].algo) && first > 0 && acc > 0)
      note += fmt::format("\n{}", view::versus_first(first, acc, to_string(app.bars[0].algo)));  // a line of its own: no number split
    ImGui::SetCursorPosX(label_w);
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    TextWrappedAtSpaces(note);
    ImGui::PopStyleColor();
    if (!b.result.blocks.note.empty()) {
      ImGui::SetCursorPosX(label_w);
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
      ImGui::TextWrapped("(%s)", b.result.blocks.note.c_str());
      ImGui::PopStyleColor();
    }
  }
}

// [SECTION] Help and shortcuts

namespace {

struct Shortcut {
  const char* keys;
  const char* what;
};
constexpr Shortcut kShortcuts[] = {
    {"Space", "play / pause"},
    {"→  /  ←", "one step forward / back"},
    {"Shift + → / ←", "one block pair forward / back (10 steps)"},
    {"Home  /  End", "back to the start / jump to the end"},
    {"+  /  −", "play faster / slower"},
    {"Page Down / Page Up", "next / previous lesson stage"},
    {"B", "side by side with a second algorithm"},
    {"1 … 6", "softmax, IO, explorer, timeline, measured, inside-the-SM tab"},
    {"H or F1", "this help; Esc closes it"},
};

// Keys that switch something on and off do not repeat: a slow frame (a rebuild) while the key is
// still down would otherwise count as a second press.
bool pressed(int glfw_key, bool repeat = true) { return ImGui::IsKeyPressed(glfw_key, repeat); }

}  // namespace

void ShowHelpOverlay(AppState& app) {
  if (!app.show_help) return;
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(vp->Pos.x + vp->Size.x / 2, vp->Pos.y + vp->Size.y / 2), ImGuiCond_Always, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowBgAlpha(0.95f);
  if (ImGui::Begin("Keyboard shortcuts", &app.show_help,
                   ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings)) {
    if (ImGui::BeginTable("keys", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
      for (const Shortcut& s : kShortcuts) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextColored(ImVec4(1.0f, 0.85f, 0.3f, 1.0f), "%s", s.keys);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(s.what);
      }
      ImGui::EndTable();
    }
    ImGui::Spacing();
    ImGui::TextDisabled("One colour per tensor in every panel:");
    for (Tensor t : view::tensors_in_use()) {
      ImGui::SameLine();
      ImGui::TextColored(tensor_colour_v(t), "%s", tensor_symbol(t).data());
    }
  }
  ImGui::End();
}

void HandleShortcuts(AppState& app) {
  const ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput) return;
  const std::int64_t n = app.replay[0] ? app.replay[0]->step_count() : 0;
  if (pressed(GLFW_KEY_SPACE, false)) {
    if (!app.play.playing && app.play.pos >= n) jump_to(app, 0);
    app.play.playing = !app.play.playing;
  }
  if (pressed(GLFW_KEY_RIGHT)) step_by(app, io.KeyShift ? 10 : 1);
  if (pressed(GLFW_KEY_LEFT)) step_by(app, io.KeyShift ? -10 : -1);
  if (pressed(GLFW_KEY_HOME)) step_by(app, -n);
  if (pressed(GLFW_KEY_END)) step_by(app, n);
  if (pressed(GLFW_KEY_EQUAL) || pressed(GLFW_KEY_KP_ADD)) app.play.speed = std::min(app.play.speed * 2, 1e6f);
  if (pressed(GLFW_KEY_MINUS) || pressed(GLFW_KEY_KP_SUBTRACT)) app.play.speed = std::max(app.play.speed / 2, 0.5f);
  if (pressed(GLFW_KEY_PAGE_DOWN)) apply_stage(app, app.stage + 1);
  if (pressed(GLFW_KEY_PAGE_UP)) apply_stage(app, app.stage - 1);
  if (pressed(GLFW_KEY_B, false)) {
    app.settings.side_by_side = !app.settings.side_by_side;
    rebuild(app);
  }
  const Tab tabs[] = {Tab::softmax, Tab::io, Tab::explorer, Tab::timeline, Tab::measured, Tab::onchip};
  for (int k = 0; k < 6; ++k)
    if (pressed(GLFW_KEY_1 + k, false)) {
      app.tab = tabs[k];
      app.select_tab = true;
    }
  if (pressed(GLFW_KEY_H, false) || pressed(GLFW_KEY_F1, false)) app.show_help = !app.show_help;
  if (pressed(GLFW_KEY_ESCAPE)) app.show_help = false;
}

}  // namespace hbmlab::viz
