// The panels of the window, one function each, and the colours they share: one colour per tensor
// in every panel (HBM grid, SRAM tiles, matrix, bars), so Q is the same blue everywhere.
#pragma once

#include <imgui.h>

#include <string>
#include <string_view>
#include <vector>

#include "viz/state.hpp"

namespace hbmlab::viz {

// Q blue, K green, V purple, O orange, S red, P pink, ℓ cyan, m brown, L grey-blue; the gradients
// and partial outputs in lighter shades of their forward tensors.
ImU32 tensor_colour(Tensor t, float alpha = 1.0f);
ImVec4 tensor_colour_v(Tensor t);
ImU32 algo_colour(Algo a);  // the room's WindowTraits::colour

// Layout: controls on the left; memory hierarchy over the attention matrix in the middle; the
// tabbed panels (softmax, IO and bounds, explorer, timeline, measured, inside the SM) on the right.
void ShowControlsPanel(AppState& app);
void ShowLessonPanel(AppState& app);
void ShowMemoryPanel(AppState& app);
void ShowMatrixPanel(AppState& app);
void ShowSoftmaxPanel(AppState& app);
void ShowIoPanel(AppState& app);
void ShowExplorerPanel(AppState& app);
void ShowTimelinePanel(AppState& app);
void ShowMeasuredPanel(AppState& app);
void ShowOnChipPanel(AppState& app);
void ShowHelpOverlay(AppState& app);
void HandleShortcuts(AppState& app);

// Whether a record carries on-chip counters of this room and problem (h100-onchip.json); the
// recorded runs that do, once read (every file's records, or only this problem's).
bool IsMeasuredOnChipOf(const ValidationRow& row, Algo algo, const AttentionProblem& problem);
std::vector<const ValidationRow*> MeasuredOnChipRows(const AppState& app, const SimulationResult& res);

// Colours a class can read from the back of a room. ContrastRatio: WCAG's ratio of two colours'
// relative luminance, 1 (the same) to 21 (black on white). ReadableOn: `colour`, or it moved towards
// white or black (whichever the background leaves more room to) until it is `ratio` against
// `background`; text takes 4.5 (WCAG AA for body text).
inline constexpr float kReadable = 4.5f;
float ContrastRatio(ImU32 a, ImU32 b);
ImU32 ReadableOn(ImU32 background, ImU32 colour, float ratio = kReadable);
// Text on a filled shape (a tile, a bar, a cell): near-black or near-white, whichever reads better on `fill`.
ImU32 TextOn(ImU32 fill);

// A highlighted table row (the latest block, the split just combined): its background, and every text
// of the row readable on it. While it lives, plain and disabled text are lifted to 4.5:1 against the
// highlight; a coloured text takes its colour through operator().
inline constexpr ImU32 kRowHighlight = IM_COL32(90, 80, 20, 255);
class HighlightedRow {
 public:
  explicit HighlightedRow(bool on);
  ~HighlightedRow();
  HighlightedRow(const HighlightedRow&) = delete;
  HighlightedRow& operator=(const HighlightedRow&) = delete;
  ImVec4 operator()(ImVec4 colour) const;

 private:
  bool on_;
};

// Stripes over [a, b] mark what is shaded (blocks that do not fit, masked blocks). They stop short of
// [keep_a, keep_b], where a label sits on the plain fill: a stripe through a figure makes it unreadable
// from the back of a room (the layout check reports a drawing's text over a stripe).
void Hatch(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 col, float spacing, ImVec2 keep_a = ImVec2(0, 0),
           ImVec2 keep_b = ImVec2(0, 0));

// Text helpers shared by the panels.
void TextWrappedColoured(ImU32 colour, const char* text);
void PanelTitle(const char* title, bool highlighted);
// Text on a drawing (ImDrawList): at `at`, wrapped at wrap_w when above 0, in `font` at `size` when
// given. Every drawing's text goes through here, so that a layout check sees it.
void DrawText(ImDrawList* dl, ImVec2 at, ImU32 colour, std::string_view text, float wrap_w = 0, ImFont* font = nullptr,
              float size = 0);

// The least room each drawing needs, in pixels (font heights times the font size), for its labels
// not to run into each other: what the window's smallest side-by-side layout, 1280×720 points, gives
// it. A pane that gives a drawing less scrolls rather than squeezing it. The tab pane's drawings
// (explorer, timeline, measured) share the last.
enum class Drawing { memory, matrix, tab };
ImVec2 MinimumSize(Drawing drawing);

// A layout check, for the screenshot runs of the tests (viz/layout_check.cpp): on the frame between
// Begin and End, every text drawn on a drawing, every widget of the window's layout and the room each
// drawing was given are recorded; End says which texts were drawn over others, which widgets over
// other widgets or over a drawing's text, and which drawings had less room than their minimum (they
// scrolled).
struct LayoutCheck {
  std::vector<std::string> overlaps;         // "'a' over 'b'"
  std::vector<std::string> widget_overlaps;  // "'Open' over 'path'", "'N = 64' over the drawing's 'HBM'"
  std::vector<std::string> narrow;           // "memory: 300 of 432 points wide"
  std::vector<std::string> short_ones;       // "measured: 180 of 256 points tall"
  std::vector<std::string> drawings;         // every drawing shown, with its room: "memory 643×520"
  std::vector<std::string> over_stripes;     // a drawing's text over stripes (Hatch): "'2.40 M' over stripes"
  std::vector<std::string> low_contrast;     // text on a highlighted table row under 4.5:1: "'first block' 3.1:1"
  std::vector<std::string> specks;           // a table cell that is only a dot, a speck from the back of a room: "'·' alone in a table cell"
  std::size_t widgets_seen = 0;              // none where widgets are not checked (the page)
};
// The window that holds the layout: widgets of other windows (tooltips, lists, help) are not checked.
inline constexpr const char* kLayoutWindow = "hbmlab";
void BeginLayoutCheck();
LayoutCheck EndLayoutCheck();
// Called by each drawing as it takes its room.
void NoteRoom(const char* drawing, ImVec2 room, ImVec2 minimum);
// Called where Dear ImGui registers a widget and draws its label (viz/layout_check.cpp).
void NoteWidget(ImVec2 a, ImVec2 b);
void NoteWidgetText(const char* begin, const char* end);
// The widget just submitted (an InvisibleButton) is a drawing's canvas, whose texts are checked one by one.
void NoteDrawingItem();
// Called for each stripe that marks a shaded area (canvas.cpp: Hatch): no drawing's text may cross one.
void NoteStripe(ImDrawList* dl, ImVec2 a, ImVec2 b);

}  // namespace hbmlab::viz
