// The window's layout check (viz/panels.hpp: LayoutCheck), for the screenshot runs of the tests: on
// one frame, every text drawn on a drawing (DrawText) and every Dear ImGui widget is recorded with the
// box it shows in, and End reports text drawn over text, widgets over widgets or over a drawing's text,
// and drawings given less room than their minimum; also a drawing's text over stripes (the shading of
// what does not fit), and text on a highlighted table row under 4.5:1 against it.
//
// Widgets are seen where Dear ImGui registers each one, ImGui::ItemAdd(): on Linux the linker routes
// the calls of Dear ImGui's widget code through NoteWidget below (--wrap, viz/CMakeLists.txt), so
// every button, slider, header, tab, table cell's text and plain text is checked without a call at
// each of them. Elsewhere (the page) only the drawings' text is checked.
#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "viz/panels.hpp"

namespace hbmlab::viz {
namespace {

// A box seen on screen, within the clip rectangle it was drawn in; `what` names it in the report.
struct Seen {
  ImVec2 a, b;
  std::string what;
};

// What a layout check has recorded so far (BeginLayoutCheck); nothing while none runs.
struct Recorder {
  bool on = false;
  std::vector<Seen> texts;    // drawings' text
  std::vector<Seen> widgets;  // Dear ImGui's items, labelled by the first text each renders
  std::vector<Seen> stripes;  // Hatch's stripes
  bool widget_labelled = true;  // the last widget has its label (or none is due)
  LayoutCheck check;
};
Recorder recorder;

// The part of [a, b] inside the clip rectangle [lo, hi]; nothing when none is.
bool Clip(ImVec2 a, ImVec2 b, ImVec2 lo, ImVec2 hi, Seen& out) {
  out.a = ImVec2(std::max(a.x, lo.x), std::max(a.y, lo.y));
  out.b = ImVec2(std::min(b.x, hi.x), std::min(b.y, hi.y));
  return out.a.x < out.b.x && out.a.y < out.b.y;
}

// Whether two boxes share more than a pixel across and a quarter of a line down: text boxes are a
// line tall whatever the glyphs, and lines one under the other, or widgets side by side, touch at most.
bool Overlap(const Seen& p, const Seen& q, float line_h) {
  const float w = std::min(p.b.x, q.b.x) - std::max(p.a.x, q.a.x);
  const float h = std::min(p.b.y, q.b.y) - std::max(p.a.y, q.a.y);
  return w > 1.0f && h > line_h * 0.25f;
}

// Whether two boxes share any area more than a pixel across (a stripe may be one pixel thin).
bool Touch(const Seen& p, const Seen& q) {
  return std::min(p.b.x, q.b.x) - std::max(p.a.x, q.a.x) > 1.0f && std::min(p.b.y, q.b.y) > std::max(p.a.y, q.a.y);
}

std::string Quoted(const std::string& what) { return what.empty() ? std::string("(no text)") : "'" + what + "'"; }

// Widgets of the window's own layout only: tooltips, open combo lists and the help overlay are drawn
// over the rest on purpose.
bool InLayout(const ImGuiWindow* window) {
  if (!window || (window->Flags & (ImGuiWindowFlags_Tooltip | ImGuiWindowFlags_Popup))) return false;
  return window->RootWindow && std::string_view(window->RootWindow->Name) == kLayoutWindow;
}

}  // namespace

void DrawText(ImDrawList* dl, ImVec2 at, ImU32 colour, std::string_view text, float wrap_w, ImFont* font, float size) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  dl->AddText(font, size, at, colour, begin, end, wrap_w);
  if (!recorder.on || text.empty()) return;
  ImFont* f = font ? font : ImGui::GetFont();
  const float sz = size > 0 ? size : ImGui::GetFontSize();
  const ImVec2 extent = f->CalcTextSizeA(sz, FLT_MAX, wrap_w > 0 ? wrap_w : 0, begin, end);
  Seen seen;
  if (Clip(at, ImVec2(at.x + extent.x, at.y + extent.y), dl->GetClipRectMin(), dl->GetClipRectMax(), seen)) {
    seen.what = std::string(text);
    recorder.texts.push_back(std::move(seen));
  }
}

void NoteWidget(ImVec2 a, ImVec2 b) {
  if (!recorder.on) return;
  ImGuiContext& g = *GImGui;
  ImGuiWindow* window = g.CurrentWindow;
  if (!InLayout(window)) return;
  // A table registers its whole box once it ends: a frame around its cells, not a widget over them.
  if (g.CurrentTable && a.x == g.CurrentTable->OuterRect.Min.x && a.y == g.CurrentTable->OuterRect.Min.y &&
      b.x == g.CurrentTable->OuterRect.Max.x && b.y == g.CurrentTable->OuterRect.Max.y)
    return;
  Seen seen;
  if (!Clip(a, b, window->ClipRect.Min, window->ClipRect.Max, seen)) return;
  recorder.widgets.push_back(std::move(seen));
  recorder.widget_labelled = false;
}

void NoteWidgetText(const char* begin, const char* end) {
  if (!recorder.on || recorder.widget_labelled || recorder.widgets.empty() || !begin) return;
  if (!end) end = begin + std::strlen(begin);
  const std::string_view text(begin, static_cast<std::size_t>(end - begin));
  recorder.widgets.back().what = text.substr(0, text.find("##"));  // "label##id" shows "label"
  recorder.widget_labelled = true;
}

void NoteDrawingItem() {
  if (!recorder.on || recorder.widgets.empty()) return;
  recorder.widgets.pop_back();  // the canvas: its texts are checked one by one
  recorder.widget_labelled = true;
}

void NoteStripe(ImDrawList* dl, ImVec2 a, ImVec2 b) {
  Seen seen;
  if (recorder.on && Clip(a, b, dl->GetClipRectMin(), dl->GetClipRectMax(), seen)) recorder.stripes.push_back(seen);
}

#if defined(HBMLAB_LAYOUT_SEES_WIDGETS)
namespace {

// `top` over `under`, by its alpha.
ImU32 Over(ImU32 under, ImU32 top) {
  const ImVec4 u = ImGui::ColorConvertU32ToFloat4(under), t = ImGui::ColorConvertU32ToFloat4(top);
  return ImGui::ColorConvertFloat4ToU32(
      ImVec4(u.x + (t.x - u.x) * t.w, u.y + (t.y - u.y) * t.w, u.z + (t.z - u.z) * t.w, 1.0f));
}

// Dear ImGui draws a text of the window's layout in a table: a dot alone, too small to see; on a row
// with a background of its own (a highlighted row), the text's colour against that background.
void NoteRowText(const char* begin, const char* end) {
  if (!recorder.on || !begin) return;
  ImGuiContext& g = *GImGui;
  const ImGuiTable* table = g.CurrentTable;
  if (!table || !InLayout(g.CurrentWindow) || table->InnerWindow != g.CurrentWindow) return;
  if (!end) end = begin + std::strlen(begin);
  const char* hash = std::search(begin, end, "##", "##" + 2);
  const std::string text(begin, hash);
  if (text.find_first_not_of(' ') == std::string::npos) return;
  // A cell that is a dot alone (a placeholder) is a speck on a projector.
  if (text == "·" || text == "." || text == "•") recorder.check.specks.push_back(fmt::format("'{}' alone in a table cell", text));
  if (table->RowBgColor[0] == IM_COL32_DISABLE && table->RowBgColor[1] == IM_COL32_DISABLE) return;
  ImU32 bg = ImGui::GetColorU32(ImGuiCol_WindowBg);
  for (ImU32 row : table->RowBgColor)
    if (row != IM_COL32_DISABLE) bg = Over(bg, row);
  const ImU32 fg = Over(bg, ImGui::GetColorU32(ImGuiCol_Text));
  if (const float ratio = ContrastRatio(fg, bg); ratio < kReadable)
    recorder.check.low_contrast.push_back(fmt::format("'{}' {:.1f}:1 on a highlighted row", text, ratio));
}

}  // namespace
#endif

void BeginLayoutCheck() {
  recorder = Recorder{};
  recorder.on = true;
}

void NoteRoom(const char* drawing, ImVec2 room, ImVec2 minimum) {
  if (!recorder.on) return;
  const float pt = ImGui::GetFontSize() / 16.0f;  // pixels per point: the font is 16 points
  auto points = [pt](float px) { return static_cast<int>(std::lround(px / pt)); };
  recorder.check.drawings.push_back(fmt::format("{} {}×{}", drawing, points(room.x), points(room.y)));
  // Half a point of slack: the layout's sums of rounded sizes.
  if (room.x + 0.5f < minimum.x)
    recorder.check.narrow.push_back(fmt::format("{}: {} of {} points wide", drawing, points(room.x), points(minimum.x)));
  if (room.y + 0.5f < minimum.y)
    recorder.check.short_ones.push_back(fmt::format("{}: {} of {} points tall", drawing, points(room.y), points(minimum.y)));
}

LayoutCheck EndLayoutCheck() {
  LayoutCheck check = std::move(recorder.check);
  const float fs = ImGui::GetFontSize();
  const std::vector<Seen>& t = recorder.texts;
  const std::vector<Seen>& w = recorder.widgets;
  for (std::size_t i = 0; i < t.size(); ++i)
    for (std::size_t j = i + 1; j < t.size(); ++j)
      if (Overlap(t[i], t[j], fs)) check.overlaps.push_back(fmt::format("'{}' over '{}'", t[j].what, t[i].what));
  for (const Seen& text : t)
    if (std::any_of(recorder.stripes.begin(), recorder.stripes.end(), [&](const Seen& s) { return Touch(text, s); }))
      check.over_stripes.push_back(fmt::format("'{}' over stripes", text.what));
  for (std::size_t i = 0; i < w.size(); ++i) {
    for (std::size_t j = i + 1; j < w.size(); ++j)
      if (Overlap(w[i], w[j], fs)) check.widget_overlaps.push_back(fmt::format("{} over {}", Quoted(w[j].what), Quoted(w[i].what)));
    for (const Seen& text : t)
      if (Overlap(w[i], text, fs)) check.widget_overlaps.push_back(fmt::format("{} over the drawing's '{}'", Quoted(w[i].what), text.what));
  }
  check.widgets_seen = w.size();
  recorder = Recorder{};
  return check;
}

}  // namespace hbmlab::viz

#if defined(HBMLAB_LAYOUT_SEES_WIDGETS)
// The linker's --wrap names (viz/CMakeLists.txt): __real_X is Dear ImGui's X, __wrap_X is called in
// its place. X are the mangled names of ImGui::ItemAdd, where every widget registers its box, and of
// the functions that draw a widget's text (its label, for the report).
extern "C" {
bool __real__ZN5ImGui7ItemAddERK6ImRectjPS1_i(const ImRect& bb, ImGuiID id, const ImRect* nav_bb, ImGuiItemFlags flags);
bool __wrap__ZN5ImGui7ItemAddERK6ImRectjPS1_i(const ImRect& bb, ImGuiID id, const ImRect* nav_bb, ImGuiItemFlags flags) {
  hbmlab::viz::NoteWidget(bb.Min, bb.Max);
  return __real__ZN5ImGui7ItemAddERK6ImRectjPS1_i(bb, id, nav_bb, flags);
}
void __real__ZN5ImGui10RenderTextE6ImVec2PKcS2_b(ImVec2 pos, const char* text, const char* text_end, bool hide_after_hash);
void __wrap__ZN5ImGui10RenderTextE6ImVec2PKcS2_b(ImVec2 pos, const char* text, const char* text_end, bool hide_after_hash) {
  hbmlab::viz::NoteWidgetText(text, text_end);
  hbmlab::viz::NoteRowText(text, text_end);
  __real__ZN5ImGui10RenderTextE6ImVec2PKcS2_b(pos, text, text_end, hide_after_hash);
}
void __real__ZN5ImGui17RenderTextWrappedE6ImVec2PKcS2_f(ImVec2 pos, const char* text, const char* text_end, float wrap_width);
void __wrap__ZN5ImGui17RenderTextWrappedE6ImVec2PKcS2_f(ImVec2 pos, const char* text, const char* text_end, float wrap_width) {
  hbmlab::viz::NoteWidgetText(text, text_end);
  hbmlab::viz::NoteRowText(text, text_end);
  __real__ZN5ImGui17RenderTextWrappedE6ImVec2PKcS2_f(pos, text, text_end, wrap_width);
}
void __real__ZN5ImGui17RenderTextClippedERK6ImVec2S2_PKcS4_PS1_S2_PK6ImRect(const ImVec2& pos_min, const ImVec2& pos_max,
                                                                            const char* text, const char* text_end,
                                                                            const ImVec2* text_size, const ImVec2& align,
                                                                            const ImRect* clip_rect);
void __wrap__ZN5ImGui17RenderTextClippedERK6ImVec2S2_PKcS4_PS1_S2_PK6ImRect(const ImVec2& pos_min, const ImVec2& pos_max,
                                                                            const char* text, const char* text_end,
                                                                            const ImVec2* text_size, const ImVec2& align,
                                                                            const ImRect* clip_rect) {
  hbmlab::viz::NoteWidgetText(text, text_end);
  hbmlab::viz::NoteRowText(text, text_end);
  __real__ZN5ImGui17RenderTextClippedERK6ImVec2S2_PKcS4_PS1_S2_PK6ImRect(pos_min, pos_max, text, text_end, text_size, align,
                                                                         clip_rect);
}
void __real__ZN5ImGui18RenderTextEllipsisEP10ImDrawListRK6ImVec2S4_ffPKcS6_PS3_(ImDrawList* dl, const ImVec2& pos_min,
                                                                               const ImVec2& pos_max, float clip_max_x,
                                                                               float ellipsis_max_x, const char* text,
                                                                               const char* text_end, const ImVec2* text_size);
void __wrap__ZN5ImGui18RenderTextEllipsisEP10ImDrawListRK6ImVec2S4_ffPKcS6_PS3_(ImDrawList* dl, const ImVec2& pos_min,
                                                                               const ImVec2& pos_max, float clip_max_x,
                                                                               float ellipsis_max_x, const char* text,
                                                                               const char* text_end, const ImVec2* text_size) {
  hbmlab::viz::NoteWidgetText(text, text_end);
  hbmlab::viz::NoteRowText(text, text_end);
  __real__ZN5ImGui18RenderTextEllipsisEP10ImDrawListRK6ImVec2S4_ffPKcS6_PS3_(dl, pos_min, pos_max, clip_max_x, ellipsis_max_x,
                                                                            text, text_end, text_size);
}
}
#endif
