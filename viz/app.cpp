// The window's main loop, shaped like Dear ImGui's example_glfw_opengl3: setup, loop, render,
// cleanup. Plus fonts (DejaVu with the narration's Unicode), the one-screen layout, screenshots
// and a scripted mode for tests and README pictures. The same code runs the page in a browser
// (`make web`); viz/platform.hpp says where the two differ.
//
// Scripted mode: HBMLAB_GUI_SCRIPT="key=value,..." with
//   stage=K (1-based lesson stage), walk (every stage in turn over --frames), lessons (every stage of
//   every lesson in turn over --frames; a walk's layout is checked on each stage), at=F (position as a
//   fraction of the replay), play, algo=NAME, pass=backward (with algo), side,
//   tab=softmax|io|explorer|timeline|measured|onchip,
//   open=PATH (load a scenario file from the window), resize (resize and minimise the window),
//   extremes (push every control to its limits), mouse=X:Y (pointer at fractions of the window),
//   help (show the help overlay), panel=NAME (point at a pane as a stage's `panel` key does: a
//   small window's column scrolls to it), measured=all (a screenshot of the Measured tab waits for every
//   record's prediction, not only the lesson's own, which are all a scripted run predicts without
//   it), overlap (two buttons over each other and over a drawing's text, which the layout check must
//   report), delay=MS (each frame takes MS milliseconds longer, as on a busy machine: what a scripted
//   run shows must not move with it).
//
// A scripted run (--frames, which --screenshot implies) advances the clock by a fixed 1/60 s a frame,
// what a user sees on a 60 Hz display, whatever each frame took: N frames are N/60 s of play on any
// machine, under any load, so its pictures and the play position it prints are repeatable. An
// interactive window (and the page, which has no scripted mode) keeps the wall clock.
//
// [SECTION] Fonts and style
// [SECTION] Layout
// [SECTION] Script
// [SECTION] The page's address
// [SECTION] Main loop
#include "viz/app.hpp"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "sim/common/error.hpp"
#include "viz/panels.hpp"
#include "viz/platform.hpp"
#include "viz/state.hpp"

namespace hbmlab::viz {
namespace {

// [SECTION] Fonts and style

// Ranges the narration and captions use: Latin-1 (× · ²), Greek (Θ Ω), combining tilde (m̃ P̃),
// phonetic superscript ᵀ, general punctuation (– — …), superscripts (⁻ ¹), letterlike ℓ,
// arrows (← →), maths (− ∞ √ ≤ ⌈ ⌉), geometric shapes (◀ ▶).
constexpr ImWchar kGlyphRanges[] = {
    0x0020, 0x00FF, 0x0370, 0x03FF, 0x0300, 0x036F, 0x1D00, 0x1D7F, 0x2000, 0x206F, 0x2070, 0x209F,
    0x2100, 0x214F, 0x2190, 0x21FF, 0x2200, 0x22FF, 0x2300, 0x23FF, 0x25A0, 0x25FF, 0,
};

constexpr const char* kFontPath = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
constexpr const char* kFontBoldPath = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf";

void setup_fonts(AppState& app) {
  ImGuiIO& io = ImGui::GetIO();
  const float size = std::round(16.0f * app.ui_scale);
  ImFontConfig cfg;
  cfg.OversampleH = 2;
  if (std::filesystem::exists(kFontPath)) {
    io.Fonts->AddFontFromFileTTF(kFontPath, size, &cfg, kGlyphRanges);
    app.font_large = std::filesystem::exists(kFontBoldPath)
                         ? io.Fonts->AddFontFromFileTTF(kFontBoldPath, std::round(size * 1.3f), &cfg, kGlyphRanges)
                         : io.Fonts->AddFontFromFileTTF(kFontPath, std::round(size * 1.3f), &cfg, kGlyphRanges);
  } else {  // ImGui's own font: ASCII only, but readable
    ImFontConfig fallback;
    fallback.SizePixels = size;
    io.Fonts->AddFontDefault(&fallback);
    fallback.SizePixels = std::round(size * 1.3f);
    app.font_large = io.Fonts->AddFontDefault(&fallback);
  }
}

void setup_style(float scale) {
  ImGui::StyleColorsDark();
  ImGuiStyle& style = ImGui::GetStyle();
  style.WindowRounding = 0;
  style.ChildRounding = 4;
  style.FrameRounding = 3;
  style.WindowPadding = ImVec2(8, 8);
  style.ItemSpacing = ImVec2(8, 5);
  style.Colors[ImGuiCol_WindowBg] = ImVec4(0.09f, 0.09f, 0.11f, 1.0f);
  // Under Mesa's software renderer every covered pixel costs: glClear paints the background once
  // and the full-window and child windows draw none of their own (borders only).
  style.Colors[ImGuiCol_ChildBg] = ImVec4(0, 0, 0, 0);
  style.Colors[ImGuiCol_Text] = ImVec4(0.93f, 0.93f, 0.95f, 1.0f);
  style.Colors[ImGuiCol_TextDisabled] = ImVec4(0.62f, 0.62f, 0.68f, 1.0f);
  // A progress bar's fill in a green that its white label reads on at 5:1 (Dear ImGui's is a light
  // yellow); a slider's grab in a blue that its value, written across it, reads on at 4.5:1.
  style.Colors[ImGuiCol_PlotHistogram] = ImVec4(0.13f, 0.44f, 0.31f, 1.0f);
  style.Colors[ImGuiCol_SliderGrab] = ImVec4(0.18f, 0.40f, 0.78f, 1.0f);
  style.Colors[ImGuiCol_SliderGrabActive] = ImVec4(0.18f, 0.40f, 0.78f, 1.0f);
  style.ScaleAllSizes(scale);
}

// [SECTION] Layout

// Points (pixels over --ui-scale) for the panes side by side (ShowLayout), and the least the window
// lays out at all.
struct Points {
  float x, y;
};
constexpr Points kSideBySide{1280, 720}, kLeast{640, 360};

// Every pane scrolls what does not fit it. A drawing fills its pane and takes at least its minimum
// (MinimumSize, viz/panels.hpp), so that a pane too small for it scrolls, across too, rather than
// drawing labels over each other; widgets span their pane and scroll down only. False when the pane
// is out of sight (scrolled away): its panel need not be drawn. EndChild() either way.
bool BeginPane(const char* id, ImVec2 pos, ImVec2 size, bool highlighted, bool drawing = true) {
  ImGui::SetCursorScreenPos(pos);
  if (highlighted) ImGui::PushStyleColor(ImGuiCol_Border, IM_COL32(255, 215, 60, 255));
  const bool shown = ImGui::BeginChild(id, size, true, drawing ? ImGuiWindowFlags_HorizontalScrollbar : 0);
  if (highlighted) ImGui::PopStyleColor();
  return shown;
}

void ShowTabs(AppState& app) {
  struct Item {
    const char* name;
    const char* short_name;  // where the pane is too narrow for every name (a large --ui-scale)
    Tab tab;
    void (*show)(AppState&);
  };
  const Item items[] = {{"Online softmax", "Softmax", Tab::softmax, ShowSoftmaxPanel},
                        {"IO and bounds", "IO", Tab::io, ShowIoPanel},
                        {"Block size vs SRAM", "Blocks", Tab::explorer, ShowExplorerPanel},
                        {"Timeline", "Timeline", Tab::timeline, ShowTimelinePanel},
                        {"Measured", "Measured", Tab::measured, ShowMeasuredPanel},
                        {"Inside the SM", "Inside SM", Tab::onchip, ShowOnChipPanel}};
  // Names are never cut short: the short ones when the long ones do not fit, and arrows to scroll the
  // bar when even those do not.
  const ImGuiStyle& style = ImGui::GetStyle();
  auto bar_width = [&](bool short_names) {
    float w = 0;
    for (const Item& it : items)
      w += ImGui::CalcTextSize(short_names ? it.short_name : it.name).x + style.FramePadding.x * 2 + style.ItemInnerSpacing.x;
    return w;
  };
  const bool short_names = bar_width(false) > ImGui::GetContentRegionAvail().x;
  if (!ImGui::BeginTabBar("tabs", ImGuiTabBarFlags_FittingPolicyScroll)) return;
  for (const Item& it : items) {
    const ImGuiTabItemFlags flags = app.select_tab && app.tab == it.tab ? ImGuiTabItemFlags_SetSelected : 0;
    // The same ID whichever name shows, so that the selected tab stays selected.
    const std::string label = fmt::format("{}###{}", short_names ? it.short_name : it.name, it.name);
    const bool open = ImGui::BeginTabItem(label.c_str(), nullptr, flags);
    if (short_names && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", it.name);
    if (open) {
      if (!app.select_tab) app.tab = it.tab;
      // Under the bar, the tab scrolls down what does not fit (a tall table, or a drawing at its minimum).
      ImGui::BeginChild("content", ImVec2(0, 0), false);
      it.show(app);
      ImGui::EndChild();
      ImGui::EndTabItem();
    }
  }
  app.select_tab = false;
  ImGui::EndTabBar();
}

// Where the lesson's title is drawn (the page's test looks there).
ImVec2 lesson_title_pos, lesson_title_size;

// How the last frame was laid out, for the screenshot runs' report.
struct LayoutShown {
  bool stacked = false;
  ImVec2 view, column;  // the window's room and, stacked, the scrolling column's content, in pixels
} layout_shown;

void ShowLeftColumn(AppState& app, ImVec2 o, float left_w, float controls_h, float H, float gap) {
  BeginPane("controls", o, ImVec2(left_w, controls_h), false, false);
  ShowControlsPanel(app);
  ImGui::EndChild();
  BeginPane("lesson", ImVec2(o.x, o.y + controls_h + gap), ImVec2(left_w, H - controls_h - gap), false, false);
  lesson_title_pos = ImGui::GetCursorScreenPos();
  lesson_title_size = ImVec2(ImGui::GetContentRegionAvail().x, (app.font_large ? app.font_large->FontSize : ImGui::GetFontSize()) * 2);
  if (app.font_large) ImGui::PushFont(app.font_large);
  ShowLessonPanel(app);
  if (app.font_large) ImGui::PopFont();
  ImGui::EndChild();
}

bool tab_highlighted(const AppState& app) { return tab_named(app.highlight).has_value(); }

// Controls and lesson on the left; memory hierarchy over the matrix in the middle; tabs on the
// right. Sizes follow the window from 1280×720 points (the window's size over --ui-scale) to 4K.
void ShowSideBySide(AppState& app, ImVec2 o, float W, float H) {
  const float fs = ImGui::GetFontSize(), gap = ImGui::GetStyle().ItemSpacing.x;
  const float left_w = std::clamp(fs * 21.0f, W * 0.2f, W * 0.3f);
  const float right_w = std::clamp(W * 0.36f, fs * 20.0f, W * 0.45f);
  const float mid_w = std::max(W - left_w - right_w - 2 * gap, 100.0f);
  ShowLeftColumn(app, o, left_w, std::min(H * 0.66f, fs * 40.0f), H, gap);

  const float mx = o.x + left_w + gap, memory_h = H * 0.6f;
  if (BeginPane("memory", ImVec2(mx, o.y), ImVec2(mid_w, memory_h), app.highlight == "memory")) ShowMemoryPanel(app);
  ImGui::EndChild();
  if (BeginPane("matrix", ImVec2(mx, o.y + memory_h + gap), ImVec2(mid_w, H - memory_h - gap), app.highlight == "matrix"))
    ShowMatrixPanel(app);
  ImGui::EndChild();
  if (BeginPane("tabs", ImVec2(mx + mid_w + gap, o.y), ImVec2(W - left_w - mid_w - 2 * gap, H), tab_highlighted(app)))
    ShowTabs(app);
  ImGui::EndChild();
}

// Fewer points than that (a large --ui-scale on a projector, a small browser window): controls and
// lesson stay on the left, and the drawings stack in a column that scrolls beside them, each pane at
// least its drawing's minimum: memory over matrix, then the tabs a screen further down. A lesson
// stage scrolls the column to the pane it points at, as a tab's key does to the tabs.
void ShowStacked(AppState& app, ImVec2 o, float W, float H) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const float fs = ImGui::GetFontSize(), gap = style.ItemSpacing.x;
  // A pane's frame and title around its drawing; the tab bar and a few lines of text over a tab's.
  const float frame_w = style.WindowPadding.x * 2 + 2, frame_h = style.WindowPadding.y * 2 + fs + style.ItemSpacing.y * 2 + 3;
  const float tab_extra = fs + style.FramePadding.y * 2 + style.ItemSpacing.y + fs * 8;
  const float drawing_w = std::max({MinimumSize(Drawing::memory).x, MinimumSize(Drawing::matrix).x, MinimumSize(Drawing::tab).x});
  const float column_min = drawing_w + frame_w + style.ScrollbarSize;
  const float left_w = std::clamp(W * 0.3f, fs * 16.0f, fs * 22.0f);
  const float column_w = std::max(W - left_w - gap, column_min);
  H = std::max(H, fs * 20.0f);  // below that, the window scrolls
  ShowLeftColumn(app, o, left_w, H * 0.45f, H, gap);

  ImGui::SetCursorScreenPos(ImVec2(o.x + left_w + gap, o.y));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(0, 0));
  ImGui::BeginChild("column", ImVec2(column_w, H), false, ImGuiWindowFlags_AlwaysVerticalScrollbar);
  ImGui::PopStyleVar();
  const ImVec2 c = ImGui::GetCursorScreenPos();
  const float w = ImGui::GetContentRegionAvail().x, view_h = ImGui::GetWindowHeight();
  // Side by side, two memory drawings one above the other: each keeps its SM strip and notes.
  const float memory_min = app.replay[1] ? fs * 36 : MinimumSize(Drawing::memory).y;
  const float memory_h = std::max(view_h * 0.6f, memory_min + frame_h);
  // The matrix shares the first screen with the memory drawing where both fit, else has a screen of its
  // own: scrolled to, it fills the view, so that a 64 × 64 grid is as large as a projector allows.
  const float matrix_min = MinimumSize(Drawing::matrix).y + frame_h;
  const float matrix_h = memory_h + gap + matrix_min <= view_h ? view_h - memory_h - gap : std::max(matrix_min, view_h);
  const float tabs_y = memory_h + matrix_h + gap * 2;
  const float tabs_h = std::max(view_h, MinimumSize(Drawing::tab).y + frame_h + tab_extra);
  // The pane a new stage points at comes into view, and the tabs when another tab is brought forward.
  const std::string stage = fmt::format("{} {} {}", app.scenario.origin, app.stage, app.highlight);
  if (stage != app.scrolled_for) {
    if (app.highlight == "memory") ImGui::SetScrollY(0);
    if (app.highlight == "matrix") ImGui::SetScrollY(memory_h + matrix_h + gap <= view_h ? 0 : memory_h + gap);
    if (tab_highlighted(app)) ImGui::SetScrollY(tabs_y);
  } else if (app.tab != app.scrolled_tab) {
    ImGui::SetScrollY(tabs_y);
  }
  app.scrolled_for = stage;
  app.scrolled_tab = app.tab;
  if (BeginPane("memory", c, ImVec2(w, memory_h), app.highlight == "memory")) ShowMemoryPanel(app);
  ImGui::EndChild();
  if (BeginPane("matrix", ImVec2(c.x, c.y + memory_h + gap), ImVec2(w, matrix_h), app.highlight == "matrix")) ShowMatrixPanel(app);
  ImGui::EndChild();
  if (BeginPane("tabs", ImVec2(c.x, c.y + tabs_y), ImVec2(w, tabs_h), tab_highlighted(app))) ShowTabs(app);
  ImGui::EndChild();
  layout_shown.column = ImVec2(w, tabs_y + tabs_h);
  ImGui::EndChild();
}

// The script's overlap probe: two texts on a drawing and two buttons, each over the one before; a text
// across stripes; a dim text on a highlighted table row.
bool show_overlap_probe = false;
void ShowOverlapProbe(ImVec2 o) {
  const float fs = ImGui::GetFontSize();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  DrawText(dl, o, IM_COL32(255, 255, 255, 255), "overlap probe text 1");
  DrawText(dl, ImVec2(o.x + fs, o.y + fs * 0.5f), IM_COL32(255, 255, 255, 255), "overlap probe text 2");
  ImGui::SetCursorScreenPos(o);
  ImGui::Button("overlap probe button A");
  ImGui::SetCursorScreenPos(ImVec2(o.x + fs, o.y + fs * 0.5f));
  ImGui::Button("overlap probe button B");
  const ImVec2 s(o.x, o.y + fs * 3);
  Hatch(dl, s, ImVec2(s.x + fs * 12, s.y + fs * 2), IM_COL32(200, 70, 70, 255), fs * 0.6f);
  DrawText(dl, ImVec2(s.x, s.y + fs * 0.5f), IM_COL32(255, 255, 255, 255), "overlap probe striped");
  ImGui::SetCursorScreenPos(ImVec2(o.x, o.y + fs * 6));
  if (ImGui::BeginTable("overlap probe table", 1, ImGuiTableFlags_SizingFixedFit)) {
    ImGui::TableNextRow();
    ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg0, kRowHighlight);
    ImGui::TableNextColumn();
    ImGui::TextDisabled("overlap probe dim row");
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextDisabled("·");
    ImGui::EndTable();
  }
}

// One window over the whole viewport: side by side from 1280×720 points, else stacked.
void ShowLayout(AppState& app) {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  const ImVec2 view = vp->WorkSize;
  const bool side_by_side =
      vp->WorkSize.x + 0.5f >= kSideBySide.x * app.ui_scale && vp->WorkSize.y + 0.5f >= kSideBySide.y * app.ui_scale;
  ImGui::SetNextWindowPos(vp->WorkPos);
  ImGui::SetNextWindowSize(vp->WorkSize);
  ImGui::Begin(kLayoutWindow, nullptr,
               ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoCollapse |
                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoBackground |
                   (side_by_side ? ImGuiWindowFlags_NoScrollbar : ImGuiWindowFlags_HorizontalScrollbar));
  const ImVec2 o = ImGui::GetCursorScreenPos(), all = ImGui::GetContentRegionAvail();
  layout_shown = LayoutShown{!side_by_side, view, ImVec2(0, 0)};
  if (side_by_side) {
    ShowSideBySide(app, o, all.x, all.y);
  } else {
    ShowStacked(app, o, std::max(all.x, 1.0f), std::max(all.y, 1.0f));
  }
  if (show_overlap_probe) ShowOverlapProbe(o);
  ImGui::End();
  ShowHelpOverlay(app);
}

// [SECTION] Script

struct Script {
  int stage = -1;
  bool walk = false, lessons = false, play = false, side = false, resize = false, extremes = false, help = false,
       measured_all = false, overlap = false;
  double at = -1;
  std::string algo, pass, tab, open, panel;
  double mouse_x = -1, mouse_y = -1;
  int delay_ms = 0;
  bool scripted = false;
};

Script parse_script(const char* text) {
  Script s;
  if (!text) return s;
  s.scripted = true;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "stage") s.stage = std::atoi(value.c_str()) - 1;
    if (key == "walk") s.walk = true;
    if (key == "lessons") s.lessons = true;
    if (key == "overlap") s.overlap = true;
    if (key == "play") s.play = true;
    if (key == "side") s.side = true;
    if (key == "resize") s.resize = true;
    if (key == "extremes") s.extremes = true;
    if (key == "help") s.help = true;
    if (key == "measured" && value == "all") s.measured_all = true;
    if (key == "at") s.at = std::atof(value.c_str());
    if (key == "algo") s.algo = value;
    if (key == "pass") s.pass = value;
    if (key == "tab") s.tab = value;
    if (key == "open") s.open = value;
    if (key == "panel") s.panel = value;
    if (key == "delay") s.delay_ms = std::max(0, std::atoi(value.c_str()));
    if (key == "mouse" && value.find(':') != std::string::npos) {
      s.mouse_x = std::atof(value.substr(0, value.find(':')).c_str());
      s.mouse_y = std::atof(value.substr(value.find(':') + 1).c_str());
    }
  }
  return s;
}

void jump_fraction(AppState& app, double f) {
  if (app.replay[0]) jump_to(app, static_cast<std::int64_t>(f * double(app.replay[0]->step_count())));
}

// Settings at their limits, one per frame: each must give a picture or a message, never a crash.
void apply_extreme(AppState& app, int k) {
  Settings& s = app.settings;
  switch (k) {
    case 0: s.N = 65536; s.d = 256; s.auto_blocks = false; s.Br = 1; s.Bc = 1; break;  // refused: too many pairs
    case 1: s.N = 16; s.d = 256; s.auto_blocks = true; break;
    case 2: s.gpu_sram = false; s.sram_bytes = 64; s.N = 1024; s.d = 64; break;      // nothing fits
    case 3: s.gpu_sram = true; s.N = 16; s.d = 4; s.auto_blocks = false; s.Br = 1024; s.Bc = 1024; break;
    case 4: s.auto_blocks = false; s.Br = 1; s.Bc = 1; s.N = 16; s.causal = true; s.side_by_side = true; break;
    case 5: s.batch = 4096; s.heads = 256; s.auto_blocks = true; s.N = 65536; s.d = 4; s.watch_row = 1 << 20; break;
    case 6: s.batch = 1; s.heads = 1; s.N = 4096; s.d = 64; s.side_by_side = false; s.causal = false; break;
    default: return;
  }
  std::cout << "extreme settings " << k + 1 << ": N = " << s.N << ", d = " << s.d << ", Br = " << s.Br << ", Bc = " << s.Bc
            << ", SRAM " << (s.gpu_sram ? std::string("of the GPU") : std::to_string(s.sram_bytes) + " B") << std::endl;
  rebuild(app);
  std::cout << "  " << (app.replay_error.empty() ? "replayed" : "shown in the window: " + app.replay_error) << std::endl;
  jump_fraction(app, 0.5);
}

// A walk's stop at a frame: the lesson (an index into the lessons' names; -1 for the scenario open)
// and its stage. A walk spends --frames evenly over its lessons, and each lesson's share over its stages.
struct Stop {
  int lesson = -1, stage = 0;
  bool operator==(const Stop&) const = default;
};

std::vector<std::string> lesson_names(const AppState& app) {
  std::vector<std::string> names;
  for (const std::string& n : app.scenario_names)
    if (n.starts_with("lessons/")) names.push_back(n);
  return names;
}

// The stage of a lesson of `stages` stages at `frame` of the `frames` it has.
int stage_at(int frame, int frames, int stages) { return std::min(stages - 1, frame * stages / std::max(frames, 1)); }

// Where a walk is at `frame`; for `lessons`, `stages_of` gives each lesson's number of stages.
Stop walk_stop(const Script& s, int frame, int frames, const std::vector<int>& stages_of, int stages_here) {
  if (!s.lessons) return Stop{-1, stage_at(frame, frames, stages_here)};
  const int n = static_cast<int>(stages_of.size());
  const int lesson = std::min(n - 1, frame * n / std::max(frames, 1));
  const int first = (lesson * frames + n - 1) / n, next = ((lesson + 1) * frames + n - 1) / n;  // its frames
  return Stop{lesson, stage_at(frame - first, next - first, stages_of[static_cast<std::size_t>(lesson)])};
}

// Each lesson's number of stages, for a walk over every lesson (read once).
std::vector<int> lessons_stages;

// Runs the script's part for this frame. Returns where a walk stands when its layout is to be checked
// on this frame (the last of a stage), else nothing.
std::string run_script(AppState& app, const Script& s, GLFWwindow* window, int frame, int frames) {
  std::string check_here;
  if (frame == 0) {
    if (!s.open.empty()) load_scenario_into(app, s.open);
    if (!s.algo.empty()) {
      if (auto a = parse_algo(s.algo, parse_pass(s.pass).value_or(Pass::forward))) app.settings.algo = *a;
    }
    if (s.side) app.settings.side_by_side = true;
    if (!s.algo.empty() || s.side) rebuild(app);
    if (s.stage >= 0) apply_stage(app, s.stage);
    if (s.at >= 0) {
      jump_fraction(app, s.at);
      app.play.playing = s.play;
    }
    if (s.play) app.play.playing = true;
    if (const std::optional<Tab> tab = tab_named(s.tab)) {
      app.tab = *tab;
      app.select_tab = true;
    }
    if (!s.panel.empty()) app.highlight = s.panel;
    app.show_help = s.help;
    app.wait_for_all_measured = s.measured_all;
    show_overlap_probe = s.overlap;
    if (s.lessons && lessons_stages.empty())
      for (const std::string& name : lesson_names(app)) {
        int stages = 1;
        try {
          stages = std::max(1, static_cast<int>(load_scenario(name).stages.size()));
        } catch (const InputError&) {  // shown in the window when the walk gets there
        }
        lessons_stages.push_back(stages);
      }
  }
  const bool walking = (s.walk && !app.scenario.stages.empty()) || (s.lessons && !lessons_stages.empty());
  if (walking && frames > 0) {  // every stage, a slice of frames each
    const int here = static_cast<int>(app.scenario.stages.size());
    const Stop stop = walk_stop(s, frame, frames, lessons_stages, here);
    const Stop previous = frame > 0 ? walk_stop(s, frame - 1, frames, lessons_stages, here) : Stop{-2, -1};
    if (stop != previous) {
      if (stop.lesson >= 0 && stop.lesson != previous.lesson)
        load_scenario_into(app, lesson_names(app)[static_cast<std::size_t>(stop.lesson)]);
      const int n = static_cast<int>(app.scenario.stages.size());
      if (stop.stage < n) {
        apply_stage(app, stop.stage);
        jump_fraction(app, 0.6);
        app.play.playing = true;
        std::cout << (stop.lesson >= 0 ? fmt::format("lesson {}, ", app.scenario.number) : "") << "stage " << stop.stage + 1
                  << " of " << n << ": " << app.scenario.stages[static_cast<std::size_t>(stop.stage)].title << "\n";
      }
    }
    if (frame + 1 >= frames || walk_stop(s, frame + 1, frames, lessons_stages, here) != stop)
      check_here = fmt::format("lesson {}, stage {}", app.scenario.number, app.stage + 1);
  }
  if (s.resize) {
    int w = 0, h = 0;
    glfwGetWindowSize(window, &w, &h);
    if (frame == 3) glfwSetWindowSize(window, 640, 400);
    if (frame == 6) glfwSetWindowSize(window, 320, 240);
    if (frame == 9) glfwIconifyWindow(window);
    if (frame == 12) glfwRestoreWindow(window);
    if (frame == 15) glfwSetWindowSize(window, 3000, 1800);
    if (frame == 18) glfwSetWindowSize(window, app.options.width, app.options.height);
  }
  if (s.extremes && frame % 3 == 1) apply_extreme(app, frame / 3);
  if (s.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(s.delay_ms));
  if (s.scripted) {  // the pointer where the script says, else out of the way of the pictures
    int w = 0, h = 0;
    glfwGetWindowSize(window, &w, &h);
    glfwSetCursorPos(window, (s.mouse_x >= 0 ? s.mouse_x : 0.999) * w, (s.mouse_x >= 0 ? s.mouse_y : 0.999) * h);
  }
  return check_here;
}

// [SECTION] The page's address

// #lesson=3&stage=2: the lesson numbered 3 (lessons/03-…) at its second stage; #scenario=NAME: an
// embedded scenario by name.
void open_lesson(AppState& app, const platform::LessonRequest& request) {
  if (!request.scenario.empty()) {
    load_scenario_into(app, request.scenario);
    return;
  }
  const std::string prefix = fmt::format("lessons/{:02d}-", request.lesson);
  for (const std::string& name : app.scenario_names)
    if (name.starts_with(prefix)) {
      if (app.scenario.origin.find(name) == std::string::npos) load_scenario_into(app, name);
      if (!app.scenario.stages.empty())
        apply_stage(app, std::clamp(request.stage, 1, static_cast<int>(app.scenario.stages.size())) - 1);
      return;
    }
  app.scenario_error = fmt::format("#lesson={}: no such lesson", request.lesson);
}

int lesson_count(const AppState& app) {
  return static_cast<int>(std::count_if(app.scenario_names.begin(), app.scenario_names.end(),
                                        [](const std::string& n) { return n.starts_with("lessons/"); }));
}

// Any drawing narrower or shorter than its minimum, text drawn over other text and widgets over
// widgets or over a drawing's text (the tests look for these lines), each line after `where`.
void print_problems(const LayoutCheck& check, const std::string& where) {
  for (const std::string& n : check.narrow) std::cout << "layout: " << where << "drawing narrower than its minimum, " << n << "\n";
  for (const std::string& n : check.short_ones)
    std::cout << "layout: " << where << "drawing shorter than its minimum (it scrolls), " << n << "\n";
  for (const std::string& o : check.overlaps) std::cout << "layout: " << where << "text drawn over text: " << o << "\n";
  for (const std::string& o : check.widget_overlaps) std::cout << "layout: " << where << "widget drawn over: " << o << "\n";
  for (const std::string& o : check.over_stripes) std::cout << "layout: " << where << "text drawn over stripes: " << o << "\n";
  for (const std::string& o : check.low_contrast) std::cout << "layout: " << where << "text hard to read: " << o << "\n";
  for (const std::string& o : check.specks) std::cout << "layout: " << where << "text too small to see: " << o << "\n";
}

// What the screenshot's frame showed: the scale, the layout, each drawing's room in points; then its
// problems (print_problems), or that it has none.
void print_layout(const LayoutCheck& check, float scale) {
  const LayoutShown& shown = layout_shown;
  std::cout << fmt::format("layout at ui scale {:g}: {}×{} points, ", scale, std::lround(shown.view.x / scale),
                           std::lround(shown.view.y / scale));
  if (shown.stacked)
    std::cout << fmt::format("stacked: the drawings scroll in a column of {}×{} points beside the lesson",
                             std::lround(shown.column.x / scale), std::lround(shown.column.y / scale));
  else
    std::cout << "side by side";
  std::string rooms;
  for (const std::string& d : check.drawings) rooms += (rooms.empty() ? "" : ", ") + d;
  std::cout << "; drawings (points): " << (rooms.empty() ? "none" : rooms) << "; " << check.widgets_seen << " widgets\n";
  print_problems(check, "");
  if (check.narrow.empty() && check.overlaps.empty() && check.widget_overlaps.empty() && check.over_stripes.empty() &&
      check.low_contrast.empty() && check.specks.empty())
    std::cout << "layout: every drawing at least its minimum width, no text drawn over other text, no widget over another "
                 "or over a drawing's text, no text over stripes, every highlighted row's text at least 4.5:1, no "
                 "table cell a dot alone\n";
}

std::string glfw_error;
void on_glfw_error(int, const char* text) { glfw_error = text; }

// A scripted frame's step of the clock (the file's head says why).
constexpr float kScriptedFrameSeconds = 1.0f / 60.0f;

constexpr const char* kHowToGetWindow =
    "run it on a desktop, or headless: xvfb-run -a -s \"-screen 0 1600x1000x24\" hbmlab gui --screenshot out.png --frames 60";

}  // namespace

// [SECTION] Main loop

int run_gui(const hbmlab::GuiOptions& options) {
  if (const std::string why = platform::cannot_open_reason(); !why.empty()) {
    std::cerr << "hbmlab gui: " << why << "; " << kHowToGetWindow << "\n";
    return 2;
  }
  glfwSetErrorCallback(on_glfw_error);
  if (!glfwInit()) {
    std::cerr << "hbmlab gui: cannot open the display (" << glfw_error << "); " << kHowToGetWindow << "\n";
    return 2;
  }
  platform::window_hints();
  GLFWwindow* window = glfwCreateWindow(options.width, options.height, "hbmlab: GPU memory hierarchy and attention", nullptr, nullptr);
  if (!window) {
    std::cerr << "hbmlab gui: cannot create an OpenGL window for " << platform::glsl_version() << " (" << glfw_error << "); "
              << kHowToGetWindow << "\n";
    glfwTerminate();
    return 2;
  }
  glfwMakeContextCurrent(window);
  const bool headless = options.frames > 0;
  glfwSwapInterval(headless ? 0 : 1);  // a benchmark or screenshot run does not wait for vsync

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the layout is fixed; nothing to remember

  // Everything a frame uses lives here: in the page, run_frames does not return.
  struct Session {
    AppState app;
    Script script;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    int frame = 0;
    bool saved = false;
    std::optional<LayoutCheck> layout;  // of the frame a screenshot keeps
    int stages_checked = 0;             // a walk's stages whose layout was checked
  };
  auto session = std::make_shared<Session>();
  AppState& app = session->app;
  float scale = static_cast<float>(options.ui_scale);
  if (scale <= 0) {  // from the monitor: content scale, or 2 on a 4K-sized window
    scale = std::max(1.0f, platform::content_scale(window));
    if (options.height >= 1800) scale = std::max(scale, 2.0f);
    // On the desktop, no more than leaves the panes side by side (the page's scale is its devicePixelRatio).
    if (!platform::kBrowser)
      scale = std::max(1.0f, std::min({scale, float(options.width) / kSideBySide.x, float(options.height) / kSideBySide.y}));
  }
  // The scale asked for is kept: panes that do not fit scroll (ShowStacked). Below 640×360 points
  // even one pane would not fit beside the lesson, so the window takes the largest scale that leaves
  // that much. The page's canvas follows the browser window and is laid out anew each frame.
  if (!platform::kBrowser) {
    const float fits = std::max(1.0f, std::min(float(options.width) / kLeast.x, float(options.height) / kLeast.y));
    if (scale > fits) {
      std::cout << fmt::format("hbmlab gui: --ui-scale {:g} would leave {}×{} points, less than the {}×{} the window needs "
                               "for a drawing beside the lesson; using {:.2f}\n",
                               scale, int(float(options.width) / scale), int(float(options.height) / scale), int(kLeast.x),
                               int(kLeast.y), fits);
      scale = fits;
    }
  }
  app.ui_scale = scale;
  app.measurements_dir = platform::measurements_dir();
  setup_style(scale);
  setup_fonts(app);
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init(platform::glsl_version());

  init_state(app, options);
  session->script = parse_script(std::getenv("HBMLAB_GUI_SCRIPT"));
  if (!app.scenario_error.empty()) std::cout << "scenario error shown in the window: " << app.scenario_error << "\n";

  session->saved = options.screenshot.empty();
  platform::run_frames([session, window, headless] {
    if (glfwWindowShouldClose(window)) return false;
    AppState& app = session->app;
    const Script& script = session->script;
    const GuiOptions& options = app.options;
    int& frame = session->frame;
    glfwPollEvents();
    platform::begin_frame(window);
    if (const auto request = platform::take_lesson_request()) open_lesson(app, *request);
    const std::string walk_check = run_script(app, script, window, frame, options.frames);
    if (frame == 0 && !script.open.empty() && !app.scenario_error.empty())
      std::cout << "scenario error shown in the window: " << app.scenario_error << "\n";
    const bool last = headless && frame + 1 >= options.frames;
    poll_jobs(app, last && !options.screenshot.empty());  // the picture shows the explorer finished
    if (!headless && !platform::kBrowser) prefetch_measured(app);  // the page has no spare core for it

    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (headless) ImGui::GetIO().DeltaTime = kScriptedFrameSeconds;  // ImGui's own animations too
    ImGui::NewFrame();
    HandleShortcuts(app);
    advance(app, ImGui::GetIO().DeltaTime);
    const bool check = (last && !options.screenshot.empty()) || !walk_check.empty();
    if (check) BeginLayoutCheck();
    ShowLayout(app);
    if (check) {
      LayoutCheck layout = EndLayoutCheck();
      if (!walk_check.empty()) {
        ++session->stages_checked;
        if (!last) print_problems(layout, walk_check + ": ");
      }
      if (last) session->layout = std::move(layout);
    }
    ImGui::Render();

    int w = 0, h = 0;
    glfwGetFramebufferSize(window, &w, &h);
    if (w > 0 && h > 0) {  // zero while minimised
      glViewport(0, 0, w, h);
      glClearColor(0.09f, 0.09f, 0.11f, 1.0f);
      glClear(GL_COLOR_BUFFER_BIT);
      ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
      if (last && !session->saved) {
        session->saved = platform::save_screenshot(options.screenshot, w, h);
        if (!session->saved) std::cerr << "hbmlab gui: --screenshot: cannot write " << options.screenshot << "\n";
      }
      glfwSwapBuffers(window);
    }
    const Scenario& sc = app.scenario;
    platform::FrameInfo info;
    info.lesson = sc.kind == "lesson" ? sc.number : 0;
    info.stage = app.stage + 1;
    info.stages = static_cast<int>(sc.stages.size());
    info.lessons = lesson_count(app);
    info.title = sc.title;
    if (app.stage < info.stages) info.stage_title = sc.stages[static_cast<std::size_t>(app.stage)].title;
    info.title_x = lesson_title_pos.x;
    info.title_y = lesson_title_pos.y;
    info.title_w = lesson_title_size.x;
    info.title_h = lesson_title_size.y;
    info.error = app.scenario_error;
    info.working = app.explorer_job.running() || app.times_job.running() || app.measured_job.running() ||
                   app.explorer_runs_job.running();
    info.tab = static_cast<int>(app.tab) + 1;
    info.help = app.show_help;
    info.side_by_side = app.replay[1] != nullptr;
    info.measured_cells = static_cast<int>(app.explorer_runs.size());
    info.mouse_x = ImGui::GetIO().MousePos.x;
    info.mouse_y = ImGui::GetIO().MousePos.y;
    platform::end_frame(info);
    ++frame;
    return !last;
  });

  const int frame = session->frame;
  const bool saved = session->saved;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - session->start).count();
  if (options.report_fps && frame > 0) {
    int w = 0, h = 0;
    glfwGetFramebufferSize(window, &w, &h);
    const char* renderer = reinterpret_cast<const char*>(glGetString(GL_RENDERER));
    std::cout << fmt::format("hbmlab gui: {} frames in {:.2f} s: {:.1f} fps at {}×{} ({}; {} steps, N = {}, d = {}, {})\n", frame,
                             seconds, frame / seconds, w, h, renderer ? renderer : "unknown renderer",
                             app.replay[0] ? app.replay[0]->step_count() : 0, app.settings.N, app.settings.d,
                             to_string(app.settings.algo));
  }
  if (!options.screenshot.empty() && saved) std::cout << "saved " << options.screenshot << "\n";
  if (!options.screenshot.empty() && saved && session->layout) print_layout(*session->layout, app.ui_scale);
  if (session->stages_checked > 0)
    std::cout << fmt::format("layout checked on {} stages at ui scale {:g} (each stage's last frame)\n", session->stages_checked,
                             app.ui_scale);
  if (!options.screenshot.empty() && saved && !app.scenario.stages.empty())  // what the picture shows
    std::cout << "lesson " << app.scenario.number << ", stage " << app.stage + 1 << " of " << app.scenario.stages.size()
              << ": " << app.scenario.stages[static_cast<std::size_t>(app.stage)].title << "\n";
  if (!options.screenshot.empty() && saved && app.replay[0])  // where play stands in the picture
    std::cout << fmt::format("replay at step {} of {}{}\n", app.play.pos, app.replay[0]->step_count(),
                             app.play.playing ? ", playing" : "");
  if (!options.screenshot.empty() && app.tab == Tab::explorer && !app.explorer_runs.empty())
    std::cout << "explorer: " << app.explorer_runs.size() << " cells measured on " << app.explorer_runs.front().row.gpu << "\n";
  if (!options.screenshot.empty() && app.tab == Tab::onchip && app.replay[0])
    std::cout << "inside the SM: " << MeasuredOnChipRows(app, app.replay[0]->result()).size()
              << " recorded runs with on-chip counters for this problem\n";

  // Background jobs still running own their state (viz/platform.hpp: Job) and are left to finish.
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  const int code = saved ? 0 : 1;
  if (app.explorer_job.running() || app.times_job.running() || app.measured_job.running() ||
      app.explorer_runs_job.running()) {
    // A sweep or validation still running on its thread would race the static destructors of a
    // normal exit; nothing is left to save, so leave at once.
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(code);
  }
  return code;
}

}  // namespace hbmlab::viz
