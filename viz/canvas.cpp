// Panels drawn with ImDrawList on InvisibleButton canvases: the memory hierarchy (HBM tensors as
// tile grids, one SM's SRAM, the moving tile), the attention-matrix blocks, and the block size ×
// SRAM explorer. Every number drawn comes from sim/view; the drawing never counts.
//
// [SECTION] Drawing helpers
// [SECTION] Memory hierarchy
// [SECTION] Attention matrix
// [SECTION] Block size vs SRAM explorer
// [SECTION] Timeline (the timing engine)
// [SECTION] Measured against predicted
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "sim/common/units.hpp"
#include "viz/panels.hpp"

namespace hbmlab::viz {
namespace {

// [SECTION] Drawing helpers

constexpr ImU32 kPending = IM_COL32(52, 54, 64, 255);
constexpr ImU32 kSkipped = IM_COL32(28, 28, 32, 255);
// Dropped by a block mask: a purple that a projector still tells from the pending grey.
constexpr ImU32 kMasked = IM_COL32(84, 44, 118, 255);
constexpr ImU32 kCurrent = IM_COL32(255, 215, 60, 255);
constexpr ImU32 kFrame = IM_COL32(150, 150, 165, 255);
constexpr ImU32 kText = IM_COL32(235, 235, 240, 255);
constexpr ImU32 kDim = IM_COL32(160, 160, 175, 255);
constexpr ImU32 kMeasured = IM_COL32(255, 110, 200, 255);  // what a real GPU measured
constexpr ImU32 kDoesNotFit = IM_COL32(200, 70, 70, 255);   // blocks whose working set exceeds the SRAM
constexpr ImU32 kSkippedStripe = IM_COL32(90, 90, 100, 255);
constexpr ImU32 kSramBox = IM_COL32(36, 38, 46, 255);

ImU32 mix(ImU32 a, ImU32 b, float t) {
  const ImVec4 x = ImGui::ColorConvertU32ToFloat4(a), y = ImGui::ColorConvertU32ToFloat4(b);
  return ImGui::ColorConvertFloat4ToU32(ImVec4(x.x + (y.x - x.x) * t, x.y + (y.y - x.y) * t, x.z + (y.z - x.z) * t, 1.0f));
}

void Text(ImDrawList* dl, ImVec2 p, ImU32 col, const std::string& s) { DrawText(dl, p, col, s); }

// The first of `choices`, longest first, that fits in `width`; else the last.
std::string Fitting(std::initializer_list<std::string> choices, float width) {
  for (const std::string& s : choices)
    if (ImGui::CalcTextSize(s.c_str()).x <= width) return s;
  return *(choices.end() - 1);
}

void TextCentred(ImDrawList* dl, ImVec2 centre, ImU32 col, const std::string& s) {
  const ImVec2 sz = ImGui::CalcTextSize(s.c_str());
  DrawText(dl, ImVec2(centre.x - sz.x / 2, centre.y - sz.y / 2), col, s);
}

}  // namespace

// Horizontal stripes: a diagonal line costs Mesa's software rasterizer its whole bounding box, a thin
// axis-aligned rectangle only its area.
void Hatch(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 col, float spacing, ImVec2 keep_a, ImVec2 keep_b) {
  const float t = std::max(1.0f, spacing * 0.25f);
  auto stripe = [&](float x0, float x1, float y) {
    if (x1 - x0 < 1.0f) return;
    dl->AddRectFilled(ImVec2(x0, y), ImVec2(x1, y + t), col);
    NoteStripe(dl, ImVec2(x0, y), ImVec2(x1, y + t));
  };
  for (float y = a.y + spacing * 0.5f; y + t <= b.y; y += spacing) {
    if (y + t <= keep_a.y || y >= keep_b.y) {
      stripe(a.x, b.x, y);
    } else {  // beside the label only
      stripe(a.x, std::min(b.x, keep_a.x), y);
      stripe(std::max(a.x, keep_b.x), b.x, y);
    }
  }
}

namespace {

std::string tile_name(const view::Tile& t) {
  const std::string sym(tensor_symbol(t.tensor));
  if (by_column_block(t.tensor)) return fmt::format("{}_{}", sym, t.j + 1);
  if (is_score_block(t.tensor) && t.j >= 0) return fmt::format("{}_{},{}", sym, t.i + 1, t.j + 1);
  if (t.i >= 0) return fmt::format("{}_{}", sym, t.i + 1);
  return sym;
}

// The canvas: an InvisibleButton that claims the rectangle so hovering works, as imgui_demo does.
// It fills the room left in its pane, and never less than `minimum`: a pane with less room scrolls.
// `height`, when given, is how tall the drawing is whatever the room (it goes on below the pane's fold).
struct Canvas {
  ImVec2 p0, p1;
  ImDrawList* dl;
  bool hovered;
};

Canvas BeginCanvas(const char* id, ImVec2 minimum, float height = 0) {
  const ImVec2 room = ImGui::GetContentRegionAvail();
  NoteRoom(id, room, minimum);
  const ImVec2 size(std::floor(std::max(room.x, minimum.x)), std::floor(height > 0 ? height : std::max(room.y, minimum.y)));
  Canvas c;
  c.p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, size);
  NoteDrawingItem();
  c.p1 = ImVec2(c.p0.x + size.x, c.p0.y + size.y);
  c.hovered = ImGui::IsItemHovered();
  c.dl = ImGui::GetWindowDrawList();
  c.dl->PushClipRect(c.p0, c.p1, true);
  return c;
}

void EndCanvas(Canvas& c) { c.dl->PopClipRect(); }

// Clips drawing to [a, b] until the end of the scope.
struct ClipScope {
  ImDrawList* dl;
  ClipScope(ImDrawList* list, ImVec2 a, ImVec2 b) : dl(list) { dl->PushClipRect(a, b, true); }
  ~ClipScope() { dl->PopClipRect(); }
  ClipScope(const ClipScope&) = delete;
  ClipScope& operator=(const ClipScope&) = delete;
};

// [SECTION] Memory hierarchy

struct HbmLayout {
  view::HbmTensor tensor;
  ImVec2 a, b;  // the tensor's rectangle
};

// Where a step's tile lies inside its tensor's rectangle.
std::pair<ImVec2, ImVec2> tile_rect(const HbmLayout& h, std::int64_t row0, std::int64_t rows, std::int64_t col0,
                                    std::int64_t cols) {
  const float H = h.b.y - h.a.y, W = h.b.x - h.a.x;
  const float y0 = h.a.y + H * float(row0) / float(h.tensor.rows), y1 = h.a.y + H * float(row0 + rows) / float(h.tensor.rows);
  float x0 = h.a.x, x1 = h.b.x;
  if (h.tensor.cols > 1 && cols < h.tensor.cols) {
    x0 = h.a.x + W * float(col0) / float(h.tensor.cols);
    x1 = h.a.x + W * float(col0 + cols) / float(h.tensor.cols);
  }
  return {ImVec2(x0, y0), ImVec2(x1, std::max(y1, y0 + 2.0f))};
}

void DrawMemoryView(const AppState& app, const view::ReplayView& r, std::int64_t pos, const Canvas& c, ImVec2 a, ImVec2 b) {
  ImDrawList* dl = c.dl;
  const ClipScope clip(dl, a, b);
  const float fs = ImGui::GetFontSize(), pad = fs * 0.5f;
  const SimulationResult& res = r.result();
  const Counts now = r.counts_before(pos);
  const std::int64_t n = r.step_count();
  const Step* last = pos > 0 ? &r.steps()[static_cast<std::size_t>(pos - 1)] : nullptr;

  // Narration of the step just run, in the paper's words.
  std::string head = fmt::format("{}  ·  step {} of {}", paper_name(r.algo()), pos, n);
  if (ImGui::CalcTextSize(head.c_str()).x > b.x - a.x) head = fmt::format("{}  ·  step {} of {}", to_string(r.algo()), pos, n);
  Text(dl, a, algo_colour(r.algo()), head);
  const std::string said = pos == 0 ? std::string(r.algo()->window().ready_note) : r.narration(pos - 1);
  ImFont* big = app.font_large ? app.font_large : ImGui::GetFont();
  const float big_size = app.font_large ? app.font_large->FontSize : fs;
  // Two lines of the large face fit above the boxes; a longer narration (a narrow pane) takes the regular one.
  const bool long_said = big->CalcTextSizeA(big_size, FLT_MAX, b.x - a.x, said.c_str()).y > big_size * 2.5f;
  DrawText(dl, ImVec2(a.x, a.y + fs * 1.3f), kCurrent, said, b.x - a.x, long_said ? ImGui::GetFont() : big,
           long_said ? fs : big_size);
  const float top = a.y + fs * 1.4f + big_size * 2.6f;

  // HBM on the left, the SMs on the right.
  const float split = a.x + (b.x - a.x) * 0.56f;
  const ImVec2 hbm_a(a.x, top), hbm_b(split - pad * 2, b.y);
  dl->AddRect(hbm_a, hbm_b, kFrame, 6.0f, 0, 1.5f);
  const std::string moved = format_bytes(double(res.per_instance.hbm_bytes()));
  Text(dl, ImVec2(hbm_a.x + pad, hbm_a.y + pad * 0.5f), kText,
       Fitting({fmt::format("HBM · {} moved per head", moved), fmt::format("HBM · {}", moved), "HBM"},
               hbm_b.x - hbm_a.x - pad * 2));
  const std::vector<view::HbmTensor> tensors = r.hbm_tensors();
  // Widths: N×d tensors a column each, S and P squares, statistics a thin strip.
  auto units_of = [](const view::HbmTensor& t) { return is_stat(t.tensor) ? 0.45f : (t.cols == t.rows ? 2.2f : 1.0f); };
  float units = 0;
  for (const view::HbmTensor& t : tensors) units += units_of(t);
  const float inner_w = hbm_b.x - hbm_a.x - pad * 2, gap = pad;
  const float unit = (inner_w - gap * float(tensors.size() - 1)) / units;
  // Running counters sit in a grid under the tensors, two to a row.
  const int counter_cols = hbm_b.x - hbm_a.x >= fs * 26 ? 2 : 1;
  int counter_rows = static_cast<int>((tensors.size() + counter_cols - 1) / counter_cols);
  // The tensors' names sit over their columns; where one is wider than its column (a backward's ten
  // tensors in a narrow pane), every other name goes a line higher.
  bool staggered = false;
  for (const view::HbmTensor& t : tensors)
    staggered |= ImGui::CalcTextSize(tensor_symbol(t.tensor).data()).x > unit * units_of(t) + gap * 0.8f;
  const float col_top = hbm_a.y + fs * (staggered ? 3.8f : 2.7f);
  // A backward moves up to a dozen tensors: in a short pane its counters would cover the tensors, so
  // they are left to the IO panel.
  if (hbm_b.y - fs * 1.25f * float(counter_rows) - pad * 2 - col_top < fs * 4) counter_rows = 0;
  const float col_bottom = hbm_b.y - fs * 1.25f * float(counter_rows) - pad * 2;
  // Heights follow the rows, so that a decode step's few query rows sit beside the long K/V cache
  // (self-attention: every N × d tensor is N rows, all full height).
  std::int64_t most_rows = 1;
  for (const view::HbmTensor& t : tensors) most_rows = std::max(most_rows, t.rows);
  std::vector<HbmLayout> layout;
  float x = hbm_a.x + pad;
  view::MatrixView mv;
  const bool scores_in_hbm = r.algo()->window().scores_in_hbm;
  const auto& scores = r.algo()->window().hbm_scores;  // S and P, or the backward's dP and dS
  if (scores_in_hbm) mv = r.matrix(pos, 48);
  for (const view::HbmTensor& t : tensors) {
    const float w = unit * units_of(t);
    HbmLayout h{t, ImVec2(x, col_top), ImVec2(x + w, col_bottom)};
    if (t.rows < most_rows)
      h.b.y = col_top + std::max((col_bottom - col_top) * float(t.rows) / float(most_rows), std::min(fs * 1.6f, col_bottom - col_top));
    if (t.cols == t.rows) h.b.y = std::min(col_bottom, col_top + w);  // S and P are square
    layout.push_back(h);
    const ImU32 col = tensor_colour(t.tensor);
    dl->AddRectFilled(h.a, h.b, tensor_colour(t.tensor, 0.28f), 3.0f);
    if (scores_in_hbm && (t.tensor == scores[0] || t.tensor == scores[1])) {  // S and P fill HBM, block by block
      const float cw = (h.b.x - h.a.x) / float(mv.cols), ch = (h.b.y - h.a.y) / float(mv.rows);
      for (std::int64_t rr = 0; rr < mv.rows; ++rr)
        for (std::int64_t cc = 0; cc < mv.cols; ++cc) {
          const view::MatrixCell& cell = mv.cells[static_cast<std::size_t>(rr * mv.cols + cc)];
          const float f = t.tensor == scores[0] ? cell.s_in_hbm : cell.p_in_hbm;
          if (f <= 0) continue;
          const ImVec2 ca(h.a.x + cw * float(cc), h.a.y + ch * float(rr));
          dl->AddRectFilled(ca, ImVec2(ca.x + cw, ca.y + ch), mix(tensor_colour(t.tensor, 0.28f), col, f));
        }
    }
    // Tile boundaries, when they are far enough apart to see.
    const float th = (h.b.y - h.a.y) / float(t.row_tiles);
    if (th >= 4)
      for (std::int64_t k = 1; k < t.row_tiles; ++k)
        dl->AddLine(ImVec2(h.a.x, h.a.y + th * float(k)), ImVec2(h.b.x, h.a.y + th * float(k)), IM_COL32(20, 20, 25, 200));
    const float tw = (h.b.x - h.a.x) / float(t.col_tiles);
    if (t.col_tiles > 1 && tw >= 4)
      for (std::int64_t k = 1; k < t.col_tiles; ++k)
        dl->AddLine(ImVec2(h.a.x + tw * float(k), h.a.y), ImVec2(h.a.x + tw * float(k), h.b.y), IM_COL32(20, 20, 25, 200));
    dl->AddRect(h.a, h.b, col, 3.0f, 0, 2.0f);
    const bool higher = staggered && layout.size() % 2 == 0;
    TextCentred(dl, ImVec2((h.a.x + h.b.x) / 2, col_top - fs * (higher ? 1.8f : 0.7f)), col, std::string(tensor_symbol(t.tensor)));
    if (c.hovered && ImGui::IsMouseHoveringRect(h.a, h.b)) {
      ImGui::BeginTooltip();
      ImGui::TextColored(tensor_colour_v(t.tensor), "%s: %lld × %lld, %s per head", tensor_symbol(t.tensor).data(),
                         static_cast<long long>(t.rows), static_cast<long long>(t.cols), format_bytes(double(t.bytes)).c_str());
      ImGui::Text("read so far %s of %s", format_bytes(double(now[t.tensor].read_bytes)).c_str(),
                  format_bytes(double(res.per_instance[t.tensor].read_bytes)).c_str());
      ImGui::Text("written so far %s of %s", format_bytes(double(now[t.tensor].write_bytes)).c_str(),
                  format_bytes(double(res.per_instance[t.tensor].write_bytes)).c_str());
      ImGui::EndTooltip();
    }
    x += w + gap;
  }

  for (std::size_t k = 0; counter_rows > 0 && k < layout.size(); ++k) {
    const Tensor t = layout[k].tensor.tensor;
    const float cx = hbm_a.x + pad + float(k % counter_cols) * (hbm_b.x - hbm_a.x - pad * 2) / float(counter_cols);
    const float cy = col_bottom + pad + fs * 1.25f * float(k / counter_cols);
    dl->AddRectFilled(ImVec2(cx, cy + fs * 0.15f), ImVec2(cx + fs * 0.8f, cy + fs * 0.95f), tensor_colour(t), 2.0f);
    Text(dl, ImVec2(cx + fs * 1.1f, cy), kText,
         fmt::format("{}  R {}  W {}", tensor_symbol(t), format_bytes(double(now[t].read_bytes)),
                     format_bytes(double(now[t].write_bytes))));
  }

  // The SMs: the one running this step in detail, all of them as a strip.
  const ImVec2 sm_a(split + pad, top), sm_b(b.x, b.y);
  const std::int64_t sm_count = res.gpu.sm_count, sm = last ? r.sm_of(pos - 1) : 0;
  const std::int64_t sram_cap = res.sram_bytes_per_block;
  const view::Sram sram = r.sram_after(pos);
  const std::int64_t cta = last ? r.cta_of(pos - 1) : 0;
  // Shorter in a narrow pane, the whole in its tooltip.
  // A persistent kernel's CTAs walk tiles: the head's unit of work is then a tile, not a CTA.
  const char* work_unit = !res.engine.kernels.empty() && res.engine.kernels[0].persistent() ? "tile" : "CTA";
  const std::string sm_head = fmt::format("SM {} of {}  ·  SRAM  ({} {} of {})", sm, sm_count, work_unit, cta, r.cta_count());
  const std::string sm_shown =
      Fitting({sm_head, fmt::format("SM {}/{} · {} {}/{}", sm, sm_count, work_unit, cta, r.cta_count()), fmt::format("SM {}", sm)},
              sm_b.x - sm_a.x);
  const ImVec2 sm_head_at(sm_a.x, sm_a.y + pad * 0.5f);
  Text(dl, sm_head_at, kText, sm_shown);
  if (sm_shown != sm_head && c.hovered &&
      ImGui::IsMouseHoveringRect(sm_head_at, ImVec2(sm_head_at.x + ImGui::CalcTextSize(sm_shown.c_str()).x, sm_head_at.y + fs)))
    ImGui::SetTooltip("%s", sm_head.c_str());
  // Compact (side by side, or a short window): no SM strip and one line of text under the box.
  const bool compact = sm_b.y - sm_a.y < fs * 18;
  // Decoding: a line over the SM strip says how many SMs the CTAs reach.
  const bool sm_line = !compact && res.problem.Nq() < res.problem.seq_len;
  const float box_top = sm_a.y + fs * 2.0f, strip_h = compact ? 0.0f : std::min(fs * 3.2f, (sm_b.y - sm_a.y) * 0.2f);
  // Under the box: its fill and what never reaches SRAM; room for at least three lines of it.
  const double fill = sram_cap > 0 ? double(sram.bytes()) / double(sram_cap) : 0;
  const std::string fill_text = fmt::format("{} of {} in use ({:.0f}%), working set {}", format_bytes(double(sram.bytes())),
                                            format_bytes(double(sram_cap)), fill * 100,
                                            format_bytes(double(r.working_set_bytes())));
  const std::string under_box = compact ? fill_text : fill_text + ". " + std::string(r.algo()->window().sram_note);
  const float under_h = ImGui::CalcTextSize(under_box.c_str(), nullptr, false, sm_b.x - pad - sm_a.x).y;
  const ImVec2 box_a(sm_a.x, box_top),
      box_b(sm_b.x - pad,
            sm_b.y - (compact ? under_h + fs * 0.4f : strip_h + std::max(fs * 4.6f, under_h + fs * 0.8f) + (sm_line ? fs * 1.3f : 0.0f)));
  dl->AddRectFilled(box_a, box_b, kSramBox, 6.0f);
  dl->AddRect(box_a, box_b, kFrame, 6.0f, 0, 1.5f);
  // Fill level against the SRAM one CTA may use (M = that / element size).
  const float bar_w = fs * 1.1f, box_h = box_b.y - box_a.y - pad * 2;
  const ImVec2 bar_a(box_b.x - pad - bar_w, box_a.y + pad), bar_b(box_b.x - pad, box_b.y - pad);
  dl->AddRectFilled(bar_a, bar_b, kPending, 3.0f);
  float fy = bar_b.y;
  std::vector<std::pair<view::Tile, std::pair<ImVec2, ImVec2>>> slots;
  const float slot_x0 = box_a.x + pad, slot_x1 = bar_a.x - pad, slot_gap = pad * 0.4f;
  float sy = box_a.y + pad;
  // A slot is at least a line of text tall. When a column of such slots would run past the box (a
  // backward holds a dozen tiles), the slots take two columns or more, all one line tall.
  const std::size_t tile_count = std::max<std::size_t>(sram.tiles.size(), 1);
  const float line = fs * 1.15f;
  std::size_t columns = 1;
  while (columns < tile_count && float((tile_count + columns - 1) / columns) * (line + slot_gap) > box_h) ++columns;
  const std::size_t per_column = (tile_count + columns - 1) / columns;
  const float column_w = (slot_x1 - slot_x0 - slot_gap * float(columns - 1)) / float(columns);
  const float min_slot =
      columns > 1 ? box_h / float(per_column) - slot_gap : std::min(fs * 1.35f, box_h / float(tile_count) - slot_gap);
  // In one column a slot grows with its tile's share of SRAM beyond min_slot; when the growth would
  // run past the box, every slot's growth shrinks alike.
  float growth = 0;
  for (const view::Tile& t : sram.tiles)
    growth += std::max(0.0f, box_h * (sram_cap > 0 ? float(t.bytes) / float(sram_cap) : 0) * 0.9f - min_slot);
  const float room = box_h - float(sram.tiles.size()) * (min_slot + slot_gap);
  const float grow = columns > 1 ? 0.0f : growth > room && growth > 0 ? std::max(0.0f, room) / growth : 1.0f;
  const view::Tile* hovered_tile = nullptr;
  for (std::size_t k = 0; k < sram.tiles.size(); ++k) {
    const view::Tile& t = sram.tiles[k];
    const float share = sram_cap > 0 ? float(t.bytes) / float(sram_cap) : 0;
    const float fh = box_h * share;
    dl->AddRectFilled(ImVec2(bar_a.x, fy - fh), ImVec2(bar_b.x, fy), tensor_colour(t.tensor));
    fy -= fh;
    const std::size_t column = k / per_column;
    if (k % per_column == 0) sy = box_a.y + pad;
    const float h = min_slot + std::max(0.0f, box_h * share * 0.9f - min_slot) * grow;
    const float sx = slot_x0 + float(column) * (column_w + slot_gap);
    const ImVec2 s0(sx, sy), s1(sx + column_w, std::min(sy + h, box_b.y - pad));
    slots.push_back({t, {s0, s1}});
    const bool moved = last && (last->kind == StepKind::load || last->kind == StepKind::store) && last->tensor == t.tensor;
    const ImU32 slot_fill = mix(kSramBox, tensor_colour(t.tensor), moved ? 0.95f : 0.6f);
    dl->AddRectFilled(s0, s1, slot_fill, 4.0f);
    if (moved) dl->AddRect(s0, s1, kCurrent, 4.0f, 0, 2.5f);
    // The whole name where it fits, on two lines where the slot is tall enough, else shorter forms;
    // the slot's tooltip always has all of it.
    const std::string name = tile_name(t), shape = fmt::format("{}×{}", t.rows, t.cols), bytes = format_bytes(double(t.bytes));
    const std::string whole = fmt::format("{}  {}  {}", name, shape, bytes);
    const bool two_lines = s1.y - s0.y >= fs * 2.1f;
    const std::string label = Fitting({whole, two_lines ? fmt::format("{}\n{}  {}", name, shape, bytes) : whole,
                                       fmt::format("{}  {}", name, shape), two_lines ? fmt::format("{}\n{}", name, shape) : name,
                                       name},
                                      s1.x - s0.x - pad * 0.6f);
    {
      const ClipScope in_slot(dl, s0, s1);
      const float text_h = ImGui::CalcTextSize(label.c_str()).y;
      const float y = text_h > fs * 1.5f ? s0.y + (s1.y - s0.y - text_h) / 2 : s0.y + (std::min(s1.y - s0.y, min_slot) - fs) / 2;
      Text(dl, ImVec2(s0.x + pad * 0.3f, y), TextOn(slot_fill), label);
    }
    if (c.hovered && ImGui::IsMouseHoveringRect(s0, s1)) hovered_tile = &t;
    sy = s1.y + slot_gap;
  }
  if (hovered_tile) {
    const view::Tile& t = *hovered_tile;
    ImGui::BeginTooltip();
    ImGui::TextColored(tensor_colour_v(t.tensor), "%s in SRAM: %lld × %lld, %s", tile_name(t).c_str(),
                       static_cast<long long>(t.rows), static_cast<long long>(t.cols), format_bytes(double(t.bytes)).c_str());
    ImGui::EndTooltip();
  }
  DrawText(dl, ImVec2(box_a.x, box_b.y + pad * 0.4f), kDim, under_box, box_b.x - box_a.x);
  // All SMs as small squares: the one shown is outlined; the rest run other heads alike.
  const float sq = std::clamp((sm_b.x - sm_a.x - pad) / 34.0f, 4.0f, fs * 0.9f);
  const int per_row = std::max(1, static_cast<int>((sm_b.x - sm_a.x - pad) / (sq + 2)));
  const std::int64_t busy = std::min<std::int64_t>(sm_count, res.time.ctas);
  if (sm_line) {
    const std::string text = busy < sm_count ? fmt::format("{}: {} of {} SMs busy, {} idle", format_ctas(res.time.ctas, res.time.tiles), busy, sm_count,
                                                           sm_count - busy)
                                             : fmt::format("{}: all {} SMs busy", format_ctas(res.time.ctas, res.time.tiles), sm_count);
    Text(dl, ImVec2(sm_a.x, sm_b.y - strip_h - fs * 1.25f), busy < sm_count ? IM_COL32(255, 150, 110, 255) : IM_COL32(140, 220, 140, 255),
         text);
  }
  for (std::int64_t s = 0; s < (compact ? 0 : sm_count); ++s) {
    const float qx = sm_a.x + float(s % per_row) * (sq + 2), qy = sm_b.y - strip_h + float(s / per_row) * (sq + 2);
    if (qy + sq > sm_b.y) break;
    const ImU32 busy_colour = sm_line ? algo_colour(r.algo()) : IM_COL32(110, 120, 150, 255);
    dl->AddRectFilled(ImVec2(qx, qy), ImVec2(qx + sq, qy + sq), s < busy ? busy_colour : kPending);
    if (s == sm) dl->AddRect(ImVec2(qx - 1, qy - 1), ImVec2(qx + sq + 1, qy + sq + 1), kCurrent, 0, 0, 2.0f);
  }

  // The tile that just moved, with its byte count. While playing slowly it travels along the arrow.
  if (last && (last->kind == StepKind::load || last->kind == StepKind::store)) {
    const auto hl = std::find_if(layout.begin(), layout.end(), [&](const HbmLayout& h) { return h.tensor.tensor == last->tensor; });
    const auto sl = std::find_if(slots.begin(), slots.end(), [&](const auto& s) { return s.first.tensor == last->tensor; });
    if (hl != layout.end() && sl != slots.end()) {
      const auto [ta, tb] = tile_rect(*hl, last->row0, last->rows, last->col0, last->cols);
      dl->AddRectFilled(ta, tb, tensor_colour(last->tensor));
      dl->AddRect(ImVec2(ta.x - 1, ta.y - 1), ImVec2(tb.x + 1, tb.y + 1), kCurrent, 0, 0, 2.5f);
      const ImVec2 hbm_pt(tb.x + 2, (ta.y + tb.y) / 2), sram_pt(sl->second.first.x - 2, (sl->second.first.y + sl->second.second.y) / 2);
      const bool load = last->kind == StepKind::load;
      const ImVec2 from = load ? hbm_pt : sram_pt, to = load ? sram_pt : hbm_pt;
      dl->AddLine(from, to, kCurrent, 2.5f);
      const float ang = std::atan2(to.y - from.y, to.x - from.x), ah = fs * 0.6f;
      dl->AddTriangleFilled(to, ImVec2(to.x - ah * std::cos(ang - 0.4f), to.y - ah * std::sin(ang - 0.4f)),
                            ImVec2(to.x - ah * std::cos(ang + 0.4f), to.y - ah * std::sin(ang + 0.4f)), kCurrent);
      const bool animate = app.play.playing && app.play.speed <= 12;
      const float t = animate ? std::min(1.0f, static_cast<float>(app.play.phase) * 1.6f) : 1.0f;
      const ImVec2 at(from.x + (to.x - from.x) * t, from.y + (to.y - from.y) * t);
      const float bw = fs * 1.6f, bh = fs * 0.9f;
      if (animate) dl->AddRectFilled(ImVec2(at.x - bw / 2, at.y - bh / 2), ImVec2(at.x + bw / 2, at.y + bh / 2), tensor_colour(last->tensor), 3);
      // By the arrow's middle, over the tensors' columns, where no text is: never over the SRAM tiles'
      // names (when the gap between HBM and SRAM is narrow the label takes two lines and ends where
      // the tiles begin), nor over the tensors' names above the columns or the counters under them.
      const char* what = load ? "load" : "store";
      const char* way = load ? "HBM → SRAM" : "SRAM → HBM";
      const float mid_x = (from.x + to.x) / 2, right = slot_x0 - 6;
      std::string label = fmt::format("{} {}  {}", what, format_bytes(double(last->bytes)), way);
      ImVec2 sz = ImGui::CalcTextSize(label.c_str());
      if (mid_x + sz.x / 2 > right) {
        label = fmt::format("{} {}\n{}", what, format_bytes(double(last->bytes)), way);
        sz = ImGui::CalcTextSize(label.c_str());
      }
      const float mid_y = (from.y + to.y) / 2;
      float y = mid_y - sz.y - fs * 0.3f;  // above the arrow, else under it
      if (y < col_top + 2) y = mid_y + fs * 0.3f;
      y = std::min(y, col_bottom - sz.y - 2);
      ImVec2 top(std::min(mid_x - sz.x / 2, right - sz.x - 4), y);
      // Nor over the text under the SRAM box, where the label reaches across its left edge.
      if (top.x + sz.x + 4 > box_a.x) y = std::min(y, box_b.y - sz.y - 4);
      top.y = y;
      if (y >= col_top + 2) {  // else the columns are shorter than the label: the arrow alone
        dl->AddRectFilled(ImVec2(top.x - 4, top.y - 2), ImVec2(top.x + sz.x + 4, top.y + sz.y + 2), IM_COL32(20, 20, 24, 230), 4);
        Text(dl, top, kCurrent, label);
      }
    }
  }
}

}  // namespace

void ShowMemoryPanel(AppState& app) {
  PanelTitle("Memory hierarchy: tiles between HBM and SRAM", app.highlight == "memory");
  if (!app.replay[0]) {
    TextWrappedColoured(IM_COL32(255, 110, 100, 255), app.replay_error.c_str());
    ImGui::TextWrapped("Change the settings on the left; nothing else has changed.");
    return;
  }
  Canvas c = BeginCanvas("memory", MinimumSize(Drawing::memory));
  const float gap = ImGui::GetFontSize();
  if (app.replay[1]) {  // one above the other: each keeps the pane's full width for its labels
    const float mid = (c.p0.y + c.p1.y) / 2;
    DrawMemoryView(app, *app.replay[0], app.play.pos, c, c.p0, ImVec2(c.p1.x, mid - gap / 2));
    c.dl->AddLine(ImVec2(c.p0.x, mid), ImVec2(c.p1.x, mid), kFrame, 1.0f);
    DrawMemoryView(app, *app.replay[1], pos_b(app), c, ImVec2(c.p0.x, mid + gap / 2), c.p1);
  } else {
    DrawMemoryView(app, *app.replay[0], app.play.pos, c, c.p0, c.p1);
  }
  EndCanvas(c);
}

// [SECTION] Attention matrix

namespace {

void DrawMatrixGrid(const view::MatrixView& m, Algo algo, Tensor fill_tensor, int which, const Canvas& c, ImVec2 a, ImVec2 b,
                    const char* title, float aspect) {
  ImDrawList* dl = c.dl;
  const float fs = ImGui::GetFontSize();
  Text(dl, a, kText, title);
  const float top = a.y + fs * 1.4f, left = a.x + fs * 2.2f;
  const float side_w = b.x - left, side_h = b.y - top - fs * 0.2f;
  // S is N × N: the grid is square overall and each cell a Br × Bc rectangle (aspect = Bc/Br
  // times the cells' share of blocks), drawn as large as the pane allows.
  const float grid_w = float(m.cols) * aspect, grid_h = float(m.rows);
  const float k = std::min(side_w / grid_w, side_h / grid_h);
  float cw = k * aspect, ch = k;
  // Decoding: NQ × N is a sliver drawn to scale; it becomes a band across the pane, rows not to scale.
  const bool band = ch * float(m.rows) < fs * 2.0f && side_h > fs * 2.0f;
  if (band) {
    cw = side_w / float(m.cols);
    ch = std::min(side_h, fs * 3.0f) / float(m.rows);
  }
  const ImVec2 g0(left, top);
  Text(dl, ImVec2(a.x, top), kDim, "i↓");
  const bool numbers = cw > fs * 1.6f && ch > fs * 1.1f;
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t col = 0; col < m.cols; ++col) {
      const view::MatrixCell& cell = m.cells[static_cast<std::size_t>(r * m.cols + col)];
      const ImVec2 p(g0.x + cw * float(col), g0.y + ch * float(r)), q(p.x + cw - 1, p.y + ch - 1);
      float f = cell.done;
      if (which == 1) f = cell.s_in_hbm;
      if (which == 2) f = cell.p_in_hbm;
      ImU32 col_fill = mix(kPending, tensor_colour(fill_tensor), f * 0.85f);
      if (cell.skipped >= 1.0f) col_fill = cell.masked >= 1.0f ? kMasked : kSkipped;
      dl->AddRectFilled(p, q, col_fill);
      const bool numbered = numbers && cell.visit > 0 && cell.skipped < 1.0f;
      const std::string visit = std::to_string(cell.visit);
      const ImVec2 centre((p.x + q.x) / 2, (p.y + q.y) / 2), half(ImGui::CalcTextSize(visit.c_str()).x / 2 + 2, fs / 2);
      if (cell.skipped > 0 && cw >= 6)  // a diagonal block: stripes beside its number, not through it
        Hatch(dl, p, q, kSkippedStripe, std::max(4.0f, cw / 4), numbered ? ImVec2(centre.x - half.x, centre.y - half.y) : ImVec2(0, 0),
              numbered ? ImVec2(centre.x + half.x, centre.y + half.y) : ImVec2(0, 0));
      if (numbered) TextCentred(dl, centre, TextOn(col_fill), visit);
    }
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t col = 0; col < m.cols; ++col)
      if (m.cells[static_cast<std::size_t>(r * m.cols + col)].current) {
        const ImVec2 p(g0.x + cw * float(col), g0.y + ch * float(r));
        dl->AddRect(ImVec2(p.x - 1, p.y - 1), ImVec2(p.x + cw, p.y + ch), kCurrent, 0, 0, 3.0f);
        // Cells a few pixels wide (N in the thousands): a ring around the current one, seen across a room.
        if (std::min(cw, ch) < fs * 0.5f)
          dl->AddCircle(ImVec2(p.x + cw / 2, p.y + ch / 2), fs * 0.6f, kCurrent, 0, std::max(2.0f, fs * 0.12f));
      }
  // Loop order, as the room says it (flash1 walks down a column, flash2 along a row).
  const ImVec2 g1(g0.x + cw * float(m.cols), g0.y + ch * float(m.rows));
  // Split-KV: where each split's K/V blocks begin, one CTA per split and row block.
  float below = g1.y + fs * 0.3f;
  if (!m.split_begin.empty()) {
    const auto S = static_cast<std::int64_t>(m.split_begin.size());
    auto split_x = [&](std::int64_t s) {
      return g0.x + (g1.x - g0.x) * float(s < S ? m.split_begin[static_cast<std::size_t>(s)] : m.Tc) / float(m.Tc);
    };
    const std::string widest = fmt::format("{}", S);
    const bool labels = split_x(1) - split_x(0) > ImGui::CalcTextSize(widest.c_str()).x + 4;
    for (std::int64_t s = 0; s < S; ++s) {
      if (s > 0) dl->AddLine(ImVec2(split_x(s), g0.y - fs * 0.25f), ImVec2(split_x(s), g1.y + fs * 0.25f), IM_COL32(250, 200, 70, 255), 2.0f);
      if (labels) TextCentred(dl, ImVec2((split_x(s) + split_x(s + 1)) / 2, below + fs * 0.5f), kDim, std::to_string(s + 1));
    }
    const std::string text = fmt::format("S = {} splits of the K/V blocks (yellow lines): one CTA each, in parallel, then a combine", S);
    const float y = below + fs * (labels ? 1.1f : 0.1f);
    DrawText(dl, ImVec2(g0.x, y), IM_COL32(250, 200, 70, 255), text, b.x - g0.x);
    below = y + ImGui::CalcTextSize(text.c_str(), nullptr, false, b.x - g0.x).y + fs * 0.3f;
  }
  const std::string_view order = algo->window().visit_order;
  if (!order.empty() && which == 0) {
    if (g1.x + fs * 12 < b.x) {
      DrawText(dl, ImVec2(g1.x + fs, g0.y), kDim, order, b.x - g1.x - fs);
    } else if (band && below + fs * 2 < b.y) {
      DrawText(dl, ImVec2(g0.x, below), kDim, order, b.x - g0.x);
    }
  }
  if (c.hovered && ImGui::IsMouseHoveringRect(g0, g1)) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const auto col = static_cast<std::int64_t>((mp.x - g0.x) / cw), r = static_cast<std::int64_t>((mp.y - g0.y) / ch);
    if (r >= 0 && r < m.rows && col >= 0 && col < m.cols) {
      const view::MatrixCell& cell = m.cells[static_cast<std::size_t>(r * m.cols + col)];
      ImGui::BeginTooltip();
      if (cell.i1 - cell.i0 == 1 && cell.j1 - cell.j0 == 1) {
        ImGui::Text("S_%lld,%lld = Q_%lld K_%lldᵀ", static_cast<long long>(cell.i0 + 1), static_cast<long long>(cell.j0 + 1),
                    static_cast<long long>(cell.i0 + 1), static_cast<long long>(cell.j0 + 1));
        if (cell.visit > 0) ImGui::Text("visited %lld-th", static_cast<long long>(cell.visit));
      } else {
        ImGui::Text("blocks i = %lld..%lld, j = %lld..%lld", static_cast<long long>(cell.i0 + 1), static_cast<long long>(cell.i1),
                    static_cast<long long>(cell.j0 + 1), static_cast<long long>(cell.j1));
      }
      if (cell.masked > 0)
        ImGui::Text("%.0f%% done, %.0f%% skipped by the block mask, %.0f%% by causality", cell.done * 100,
                    cell.masked * 100, (cell.skipped - cell.masked) * 100);
      else
        ImGui::Text("%.0f%% done, %.0f%% skipped (causal)", cell.done * 100, cell.skipped * 100);
      ImGui::EndTooltip();
    }
  }
}

void DrawMatrixView(const view::ReplayView& r, std::int64_t pos, const Canvas& c, ImVec2 a, ImVec2 b) {
  ImDrawList* dl = c.dl;
  const ClipScope clip(dl, a, b);
  const float fs = ImGui::GetFontSize();
  const view::MatrixView m = r.matrix(pos, 64);
  const SimulationResult& res = r.result();
  // The blocks of S = QKᵀ, or of the N × N matrices a room stores instead (standard's backward: dP, dS).
  const WindowTraits& w = r.algo()->window();
  const std::string what = w.scores_in_hbm && w.hbm_scores[0] != Tensor::S
                               ? fmt::format("{} and {}", tensor_symbol(w.hbm_scores[0]), tensor_symbol(w.hbm_scores[1]))
                               : std::string("S = QKᵀ");
  std::string head = fmt::format("{}: {} in Tr × Tc = {} × {} blocks of Br × Bc = {} × {}", to_string(r.algo()), what, m.Tr,
                                 m.Tc, r.blocks().Br, r.blocks().Bc);
  if (m.rows < m.Tr || m.cols < m.Tc) head += fmt::format(" (shown as {} × {} cells)", m.rows, m.cols);
  // The heading wraps (a decode room's name is long, a side-by-side pane narrow); what follows moves down.
  DrawText(dl, a, algo_colour(r.algo()), head, b.x - a.x);
  a.y += ImGui::CalcTextSize(head.c_str(), nullptr, false, b.x - a.x).y - ImGui::GetTextLineHeight();
  if (m.query_rows < m.keys) {  // decoding: S of one instance is NQ × N (g·NQ × N with the group packed)
    const std::int64_t Nq = res.problem.Nq();
    const std::string rows = m.group > 1 ? fmt::format("g·NQ × N = {}·{} × {}: the {} query heads sharing a K/V head, NQ = {} row{} each,",
                                                       m.group, Nq, m.keys, m.group, Nq, Nq == 1 ? "" : "s")
                                         : fmt::format("NQ × N = {} × {}: NQ = {} query row{}", Nq, m.keys, Nq,
                                                       Nq == 1 ? "" : "s");
    const std::string text = fmt::format("S of one instance is {} against the whole cache", rows);
    DrawText(dl, ImVec2(a.x, a.y + fs * 1.3f), kDim, text, b.x - a.x);
    a.y += ImGui::CalcTextSize(text.c_str(), nullptr, false, b.x - a.x).y + fs * 0.1f;
  }
  // Legend, and with a block mask what it keeps.
  float lx = a.x, ly = a.y + fs * 1.3f;
  std::vector<std::pair<ImU32, std::string>> legend = {{mix(kPending, tensor_colour(Tensor::S), 0.85f), "done"},
                                                       {kCurrent, "current"},
                                                       {kPending, "pending"},
                                                       {kSkipped, "skipped (causal)"}};
  if (const auto& mask = res.problem.block_mask) {
    legend.push_back({kMasked, fmt::format("skipped ({})", mask->spec())});
  }
  for (const auto& [col, text] : legend) {
    const char* name = text.c_str();
    if (lx > a.x && lx + fs * 1.2f + ImGui::CalcTextSize(name).x > b.x) {  // a narrow pane: the legend wraps
      lx = a.x;
      ly += fs * 1.3f;
      a.y += fs * 1.3f;
    }
    // Framed, and striped as the grid's skipped cells are: a swatch as dark as the pane still shows.
    const ImVec2 sw_a(lx, ly + 2), sw_b(lx + fs * 0.9f, ly + fs * 0.9f + 2);
    dl->AddRectFilled(sw_a, sw_b, col);
    if (col == kSkipped || col == kMasked) Hatch(dl, sw_a, sw_b, kSkippedStripe, std::max(4.0f, fs * 0.3f));
    dl->AddRect(sw_a, sw_b, kFrame);
    Text(dl, ImVec2(lx + fs * 1.2f, ly), kDim, name);
    lx += fs * 1.6f + ImGui::CalcTextSize(name).x;
  }
  ImVec2 ga(a.x, a.y + fs * 2.8f);
  if (res.problem.block_mask) {  // what the mask keeps, on a line of its own
    Text(dl, ImVec2(a.x, ga.y - fs * 0.2f), kDim,
         fmt::format("kept {} of {} block pairs ({:.0f}%): {} dropped by the mask, {} by causality",
                     format_count(double(m.kept_pairs)), format_count(double(m.Tr * m.Tc)),
                     100.0 * double(m.kept_pairs) / double(m.Tr * m.Tc), format_count(double(m.mask_skipped)),
                     format_count(double(m.causal_skipped))));
    ga.y += fs * 1.3f;
  }
  // Cell aspect: a cell spans (Tc/cols)·Bc columns of S and (Tr/rows)·Br rows.
  const float aspect = float(double(m.Tc) / double(m.cols) * double(r.blocks().Bc)) /
                       float(double(m.Tr) / double(m.rows) * double(r.blocks().Br));
  if (const WindowTraits& w = r.algo()->window(); w.scores_in_hbm) {
    const float mid = (a.x + b.x) / 2;
    const std::int64_t N = res.problem.seq_len;
    const auto& [first, second] = w.hbm_scores;  // S and P, or the backward's dP and dS
    DrawMatrixGrid(m, r.algo(), first, 1, c, ga, ImVec2(mid - fs, b.y - fs * 1.4f), w.hbm_scores_titles[0].data(), aspect);
    DrawMatrixGrid(m, r.algo(), second, 2, c, ImVec2(mid + fs, ga.y), ImVec2(b.x, b.y - fs * 1.4f),
                   w.hbm_scores_titles[1].data(), aspect);
    const std::string values = format_count(double(N * N)), bytes = format_bytes(double(N * N * res.problem.elem_bytes()));
    const auto S = tensor_symbol(first), P = tensor_symbol(second);
    // The longest form the pane holds, so that nothing is cut off in a narrow pane.
    std::string line;
    for (const std::string& form :
         {fmt::format("{} and {} are N × N = {} values each: {} per head, written to HBM and read back", S, P, values, bytes),
          fmt::format("{} and {} are N × N: {} per head, written to HBM and read back", S, P, bytes),
          fmt::format("{}, {}: N × N, {} per head, through HBM", S, P, bytes)}) {
      line = form;
      if (ImGui::CalcTextSize(line.c_str()).x <= b.x - a.x) break;
    }
    Text(dl, ImVec2(a.x, b.y - fs * 1.25f), tensor_colour(first), line);
  } else {
    DrawMatrixGrid(m, r.algo(), Tensor::S, 0, c, ga, b, "columns: K_j, V_j  →", aspect);
  }
}

}  // namespace

void ShowMatrixPanel(AppState& app) {
  PanelTitle("Attention matrix: which blocks of S are done", app.highlight == "matrix");
  if (!app.replay[0]) return;
  Canvas c = BeginCanvas("matrix", MinimumSize(Drawing::matrix));
  if (app.replay[1]) {
    const float mid = (c.p0.x + c.p1.x) / 2, gap = ImGui::GetFontSize();
    DrawMatrixView(*app.replay[0], app.play.pos, c, c.p0, ImVec2(mid - gap / 2, c.p1.y));
    c.dl->AddLine(ImVec2(mid, c.p0.y), ImVec2(mid, c.p1.y), kFrame, 1.0f);
    DrawMatrixView(*app.replay[1], pos_b(app), c, ImVec2(mid + gap / 2, c.p0.y), c.p1);
  } else {
    DrawMatrixView(*app.replay[0], app.play.pos, c, c.p0, c.p1);
  }
  EndCanvas(c);
}

// [SECTION] Block size vs SRAM explorer

namespace {

// Dark blue (many accesses) to yellow (few), readable on a projector.
ImU32 ramp(float t) {
  t = std::clamp(t, 0.0f, 1.0f);
  const ImVec4 stops[] = {{0.15f, 0.12f, 0.35f, 1}, {0.13f, 0.45f, 0.56f, 1}, {0.20f, 0.70f, 0.45f, 1}, {0.99f, 0.90f, 0.15f, 1}};
  const float x = t * 3;
  const int k = std::min(2, static_cast<int>(x));
  const float f = x - float(k);
  const ImVec4 &p = stops[k], &q = stops[k + 1];
  return ImGui::ColorConvertFloat4ToU32(ImVec4(p.x + (q.x - p.x) * f, p.y + (q.y - p.y) * f, p.z + (q.z - p.z) * f, 1));
}

std::string compact(double v) { return format_si(v, ""); }
// Shorter forms for a narrow cell: "104M", "7.2M"; "1.23ms".
std::string two_digits(double v) {
  static const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
  int k = 0;
  while (v >= 999.5 && k < 5) {
    v /= 1000;
    ++k;
  }
  return fmt::format("{:.{}f}{}", v, v < 9.95 && k > 0 ? 1 : 0, prefixes[k]);
}
std::string without_spaces(std::string s) {
  std::erase(s, ' ');
  return s;
}

// What a GPU measured at each recorded (Br, Bc) beside what the engine predicts, one line per cell,
// the fastest on the GPU in the measured colour: which block size really wins, and whether the model
// ranks it first too.
void DrawMeasuredTable(ImDrawList* dl, const std::vector<view::MeasuredCell>& runs, ImVec2 at, float width, float fs) {
  auto fastest = [&](auto time) {
    std::size_t best = 0;
    for (std::size_t k = 1; k < runs.size(); ++k)
      if (time(runs[k].row) < time(runs[best].row)) best = k;
    return best;
  };
  const std::size_t by_gpu = fastest([](const ValidationRow& m) { return m.measured_time_s; });
  const std::size_t by_model = fastest([](const ValidationRow& m) { return m.predicted_time_s; });
  auto blocks = [&](std::size_t k) { return fmt::format("{} × {}", runs[k].row.blocks.Br, runs[k].row.blocks.Bc); };
  dl->AddCircleFilled(ImVec2(at.x + fs * 0.4f, at.y + fs * 0.55f), fs * 0.3f, kMeasured);
  Text(dl, ImVec2(at.x + fs, at.y), kText,
       fmt::format("Measured on {} against predicted (hover a dotted cell for its file)", runs.front().row.gpu));
  Text(dl, ImVec2(at.x + fs, at.y + fs * 1.25f), by_gpu == by_model ? kText : kCurrent,
       by_gpu == by_model ? fmt::format("fastest on the GPU: {}, and the model ranks it first too", blocks(by_gpu))
                          : fmt::format("fastest on the GPU: {}; the model ranks {} first", blocks(by_gpu), blocks(by_model)));
  const float x[] = {0.02f, 0.17f, 0.32f, 0.47f, 0.60f, 0.76f, 0.91f};
  const char* heads[] = {"Br × Bc", "time", "predicted", "error", "DRAM reads", "predicted", "error"};
  float y = at.y + fs * 2.6f;
  for (int c = 0; c < 7; ++c) Text(dl, ImVec2(at.x + width * x[c], y), kDim, heads[c]);
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const ValidationRow& m = runs[k].row;
    y += fs * 1.25f;
    const std::string cells[] = {blocks(k), format_seconds(m.measured_time_s), format_seconds(m.predicted_time_s),
                                 fmt::format("{:+.1f}%", 100 * m.time_error()), format_bytes(m.measured_dram_read),
                                 format_bytes(m.predicted_dram_read), fmt::format("{:+.1f}%", 100 * m.dram_read_error())};
    for (int c = 0; c < 7; ++c)
      Text(dl, ImVec2(at.x + width * x[c], y), k == by_gpu && c < 2 ? kMeasured : kText, cells[c]);
  }
}

}  // namespace

void ShowExplorerPanel(AppState& app) {
  PanelTitle("Block size against SRAM", app.highlight == "explorer");
  if (!app.replay[0]) return;
  if (!app.explorer) {
    if (!app.explorer_error.empty()) {
      TextWrappedColoured(IM_COL32(255, 110, 100, 255), app.explorer_error.c_str());
    } else {
      ImGui::TextDisabled("sweeping the (Br, Bc) grid over eight SRAM sizes…");
    }
    return;
  }
  const view::ExplorerView& x = *app.explorer;
  const view::ReplayView& r = *app.replay[0];
  ImGui::TextWrapped("%s, N = %lld, d = %lld: HBM accesses of the whole problem for each (Br, Bc), SRAM per CTA %s. "
                     "Darkened cells framed and striped in red do not fit; the white frame is the current choice.",
                     to_string(r.algo()).data(), static_cast<long long>(r.result().problem.seq_len),
                     static_cast<long long>(r.result().problem.head_dim), format_bytes(double(x.sram_bytes)).c_str());
  ImGui::RadioButton("colour: HBM accesses", &app.explorer_colour, 0);
  ImGui::SameLine();
  ImGui::RadioButton("predicted time (timing engine)", &app.explorer_colour, 1);
  const bool by_time = app.explorer_colour == 1 && app.times_ready;
  if (app.explorer_colour == 1 && !app.times_ready) {
    request_times(app);
    ImGui::SameLine();
    if (!app.times_error.empty()) {
      ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "%s", app.times_error.c_str());
    } else {
      const std::size_t done = app.times_progress ? app.times_progress->done.load() : 0;
      const std::size_t total = app.times_progress ? app.times_progress->total.load() : 0;
      ImGui::TextDisabled("timing engine running over the grid… %zu of %zu cells", done, total);
    }
  }
  Canvas c = BeginCanvas("explorer", MinimumSize(Drawing::tab));
  ImDrawList* dl = c.dl;
  const float fs = ImGui::GetFontSize();
  const std::size_t R = x.block_rows.size(), C = x.block_cols.size();
  // Cells a GPU ran (assets/measurements), by index; their table sits between the map and the curve.
  std::vector<const view::MeasuredCell*> measured(R * C, nullptr);
  for (const view::MeasuredCell& m : app.explorer_runs)
    measured[static_cast<std::size_t>(m.r) * C + static_cast<std::size_t>(m.c)] = &m;
  const float table_h = app.explorer_runs.empty() ? 0.0f : fs * (1.25f * float(app.explorer_runs.size() + 3) + 1.0f);
  // Heat map: upper 55% (less the measured table).
  const float hm_h = (c.p1.y - c.p0.y) * 0.55f - table_h * 0.5f;
  const float left = c.p0.x + fs * 4.0f, top = c.p0.y + fs * 1.4f;
  const float cw = (c.p1.x - left - fs * 0.5f) / float(C), ch = (hm_h - fs * 2.8f) / float(R);
  Text(dl, ImVec2(left, c.p0.y), kDim, "Bc (keys per K/V block) →");
  double lo = 0, hi = 0;
  auto value = [&](const SweepPoint& pt) {
    return !by_time ? std::log(double(std::max<std::int64_t>(pt.total.accesses(), 1)))
                    : std::log(std::isfinite(pt.predicted_s) ? std::max(pt.predicted_s, 1e-12) : 1e3);
  };
  bool first = true;
  for (const SweepPoint& pt : x.cells) {
    if (by_time && !std::isfinite(pt.predicted_s)) continue;
    const double v = value(pt);
    lo = first ? v : std::min(lo, v);
    hi = first ? v : std::max(hi, v);
    first = false;
  }
  for (std::size_t i = 0; i < R; ++i) {
    Text(dl, ImVec2(c.p0.x, top + ch * float(i) + (ch - fs) / 2), kDim, fmt::format("Br {}", x.block_rows[i]));
    for (std::size_t j = 0; j < C; ++j) {
      const SweepPoint& pt = x.cells[i * C + j];
      const ImVec2 p(left + cw * float(j), top + ch * float(i)), q(p.x + cw - 2, p.y + ch - 2);
      const float t = hi > lo ? static_cast<float>(1.0 - (value(pt) - lo) / (hi - lo)) : 1.0f;
      const ImU32 fill = pt.fits ? ramp(t) : mix(ramp(t), IM_COL32(20, 20, 24, 255), 0.75f);
      dl->AddRectFilled(p, q, fill, 3.0f);
      // The figure as it fits the cell: "103.6 M", else two or three digits ("104M"), as a large ui scale needs.
      const std::string label =
          !by_time ? Fitting({compact(double(pt.total.accesses())), two_digits(double(pt.total.accesses()))}, cw - 4)
          : std::isfinite(pt.predicted_s) ? Fitting({format_seconds(pt.predicted_s), without_spaces(format_seconds(pt.predicted_s))}, cw - 4)
                                          : "—";
      const ImVec2 label_size = ImGui::CalcTextSize(label.c_str()), centre((p.x + q.x) / 2, (p.y + q.y) / 2);
      const bool labelled = label_size.x < cw - 4;
      if (!pt.fits) {  // darkened, framed in red, striped where the figure leaves room
        // The frame no thicker than the margin the figure leaves (short cells when the measured table is shown).
        const float pad = fs * 0.2f, frame = std::clamp((ch - 2 - label_size.y) / 2, 1.5f, std::max(1.5f, fs * 0.1f));
        const ImVec2 half(label_size.x / 2 + pad, label_size.y / 2 + pad * 0.5f);
        Hatch(dl, p, q, kDoesNotFit, fs * 0.6f, labelled ? ImVec2(centre.x - half.x, centre.y - half.y) : ImVec2(0, 0),
              labelled ? ImVec2(centre.x + half.x, centre.y + half.y) : ImVec2(0, 0));
        dl->AddRect(ImVec2(p.x + frame / 2, p.y + frame / 2), ImVec2(q.x - frame / 2, q.y - frame / 2), kDoesNotFit, 3.0f, 0, frame);
      }
      if (labelled) TextCentred(dl, centre, TextOn(fill), label);
      if (static_cast<std::int64_t>(i) == x.current_r && static_cast<std::int64_t>(j) == x.current_c)
        dl->AddRect(ImVec2(p.x - 2, p.y - 2), ImVec2(q.x + 2, q.y + 2), IM_COL32_WHITE, 3.0f, 0, 3.5f);
      const view::MeasuredCell* run = measured[i * C + j];
      if (run) {  // a GPU ran these blocks: a dot in the corner
        const ImVec2 dot(q.x - fs * 0.45f, p.y + fs * 0.45f);
        dl->AddCircleFilled(dot, fs * 0.3f, kMeasured);
        dl->AddCircle(dot, fs * 0.3f, IM_COL32(15, 15, 20, 255), 0, 1.5f);
      }
      if (c.hovered && ImGui::IsMouseHoveringRect(p, q)) {
        ImGui::BeginTooltip();
        ImGui::Text("Br = %lld, Bc = %lld: Tr × Tc = %lld × %lld", static_cast<long long>(pt.blocks.Br),
                    static_cast<long long>(pt.blocks.Bc), static_cast<long long>(pt.Tr), static_cast<long long>(pt.Tc));
        ImGui::Text("HBM accesses %s (%.2f× the bound)", format_count(double(pt.total.accesses())).c_str(), pt.bound_ratio);
        if (std::isfinite(pt.predicted_s)) ImGui::Text("predicted by the timing engine: %s", format_seconds(pt.predicted_s).c_str());
        if (run) {
          const ValidationRow& m = run->row;
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kMeasured), "measured on %s (%s):", m.gpu.c_str(),
                             std::filesystem::path(m.file).filename().c_str());
          ImGui::Text("  kernel time %s, predicted %s (%+.1f%%)", format_seconds(m.measured_time_s).c_str(),
                      format_seconds(m.predicted_time_s).c_str(), 100 * m.time_error());
          ImGui::Text("  DRAM reads %s, predicted %s (%+.1f%%)", format_bytes(m.measured_dram_read).c_str(),
                      format_bytes(m.predicted_dram_read).c_str(), 100 * m.dram_read_error());
        }
        if (pt.fits) {
          ImGui::Text("working set %s fits in %s", format_bytes(double(pt.working_set_bytes)).c_str(),
                      format_bytes(double(pt.sram_bytes)).c_str());
        } else {
          ImGui::TextColored(ImVec4(1, 0.5f, 0.45f, 1), "does not fit: Q_i, O_i (Br×d), K_j, V_j (Bc×d), ℓ_i, m_i need %s,",
                             format_bytes(double(pt.working_set_bytes)).c_str());
          ImGui::TextColored(ImVec4(1, 0.5f, 0.45f, 1), "one CTA may use %s: %s too much",
                             format_bytes(double(pt.sram_bytes)).c_str(),
                             format_bytes(double(pt.working_set_bytes - pt.sram_bytes)).c_str());
        }
        ImGui::EndTooltip();
      }
    }
  }
  for (std::size_t j = 0; j < C; ++j)
    TextCentred(dl, ImVec2(left + cw * (float(j) + 0.5f), top + ch * float(R) + fs * 0.6f), kDim, std::to_string(x.block_cols[j]));
  if (!app.explorer_runs.empty()) DrawMeasuredTable(dl, app.explorer_runs, ImVec2(c.p0.x, c.p0.y + hm_h + fs * 0.4f), c.p1.x - c.p0.x, fs);

  // HBM accesses against SRAM size, as in Figure 2 (middle) of the paper: lower 45%.
  const float py0 = c.p0.y + hm_h + table_h + fs * 1.2f, py1 = c.p1.y - fs * 2.6f, px0 = left, px1 = c.p1.x - fs;
  Text(dl, ImVec2(c.p0.x, py0 - fs * 1.2f), kText, "HBM accesses at the best fitting blocks against SRAM size M");
  dl->AddRect(ImVec2(px0, py0), ImVec2(px1, py1), kFrame);
  double ylo = 1e300, yhi = 0;
  for (const view::SramPoint& s : x.curve)
    if (s.any_fits) {
      ylo = std::min({ylo, double(s.best_accesses), s.bound_value});
      yhi = std::max({yhi, double(s.best_accesses), s.bound_value});
    }
  if (yhi <= 0) {
    EndCanvas(c);
    return;
  }
  ylo = std::log10(std::max(ylo, 1.0)) - 0.1;
  yhi = std::log10(yhi) + 0.1;
  const std::size_t P = x.curve.size();
  auto px = [&](std::size_t k) { return px0 + (px1 - px0) * (float(k) + 0.5f) / float(P); };
  auto py = [&](double v) { return py1 - (py1 - py0) * static_cast<float>((std::log10(std::max(v, 1.0)) - ylo) / (yhi - ylo)); };
  Text(dl, ImVec2(c.p0.x, py0), kDim, compact(std::pow(10.0, yhi)));
  Text(dl, ImVec2(c.p0.x, py1 - fs), kDim, compact(std::pow(10.0, ylo)));
  // SRAM sizes under the curve: every one where they fit, else every second (or third…) counting from
  // the current one.
  float size_w = 0;
  for (const view::SramPoint& s : x.curve)
    size_w = std::max(size_w, ImGui::CalcTextSize(format_bytes(double(s.sram_bytes)).c_str()).x);
  const auto every = static_cast<std::int64_t>(std::ceil((size_w + fs * 0.5f) / std::max((px1 - px0) / float(P), 1.0f)));
  ImVec2 prev_a, prev_b;
  bool have_prev = false;
  float none_fit_end = -FLT_MAX;  // where the last "none fit" ends: one label for a run of sizes, none over another
  for (std::size_t k = 0; k < P; ++k) {
    const view::SramPoint& s = x.curve[k];
    if ((static_cast<std::int64_t>(k) - std::max<std::int64_t>(x.curve_current, 0)) % every == 0)
      TextCentred(dl, ImVec2(px(k), py1 + fs * 0.7f), static_cast<std::int64_t>(k) == x.curve_current ? kCurrent : kDim,
                  format_bytes(double(s.sram_bytes)));
    if (static_cast<std::int64_t>(k) == x.curve_current)
      dl->AddLine(ImVec2(px(k), py0), ImVec2(px(k), py1), IM_COL32(255, 215, 60, 120), 2.0f);
    if (!s.any_fits) {
      std::size_t last = k;  // the run of sizes where nothing fits, labelled once at its middle
      while (last + 1 < P && !x.curve[last + 1].any_fits) ++last;
      const float mid = (px(k) + px(last)) / 2, half = ImGui::CalcTextSize("none fit").x / 2;
      const bool run_starts = k == 0 || x.curve[k - 1].any_fits;
      if (run_starts && mid - half > none_fit_end) {
        TextCentred(dl, ImVec2(mid, py1 - fs), kDim, "none fit");
        none_fit_end = mid + half + fs * 0.5f;
      }
      have_prev = false;
      continue;
    }
    const ImVec2 a(px(k), py(double(s.best_accesses))), b(px(k), py(s.bound_value));
    if (have_prev) {
      dl->AddLine(prev_a, a, algo_colour(r.algo()), 3.0f);
      dl->AddLine(prev_b, b, IM_COL32(200, 200, 210, 160), 1.5f);
    }
    dl->AddCircleFilled(a, fs * 0.3f, algo_colour(r.algo()));
    dl->AddCircle(b, fs * 0.22f, IM_COL32(200, 200, 210, 200));
    if (c.hovered && ImGui::IsMouseHoveringRect(ImVec2(a.x - fs, py0), ImVec2(a.x + fs, py1))) {
      ImGui::BeginTooltip();
      ImGui::Text("SRAM %s (M = %lld elements)", format_bytes(double(s.sram_bytes)).c_str(), static_cast<long long>(s.M_elements));
      ImGui::Text("best fitting Br = %lld, Bc = %lld: %s accesses", static_cast<long long>(s.best.Br),
                  static_cast<long long>(s.best.Bc), format_count(double(s.best_accesses)).c_str());
      ImGui::Text("bound expression: %s", format_count(s.bound_value).c_str());
      ImGui::EndTooltip();
    }
    prev_a = a;
    prev_b = b;
    have_prev = true;
  }
  const float ly = c.p1.y - fs * 1.2f;
  dl->AddCircleFilled(ImVec2(px0 + fs * 0.4f, ly + fs * 0.5f), fs * 0.3f, algo_colour(r.algo()));
  Text(dl, ImVec2(px0 + fs, ly), kDim, "counted (best fitting blocks)");
  const float l2 = px0 + fs * 2 + ImGui::CalcTextSize("counted (best fitting blocks)").x;
  dl->AddCircle(ImVec2(l2, ly + fs * 0.5f), fs * 0.22f, IM_COL32(200, 200, 210, 200));
  Text(dl, ImVec2(l2 + fs * 0.6f, ly), kDim, fmt::format("bound {}", r.result().bound.expression));
  EndCanvas(c);
}

// [SECTION] Timeline (the timing engine)

namespace {

ImU32 kernel_colour(std::int32_t k) {
  constexpr ImU32 palette[] = {IM_COL32(90, 170, 250, 255), IM_COL32(240, 120, 90, 255), IM_COL32(120, 220, 130, 255),
                               IM_COL32(230, 190, 80, 255), IM_COL32(190, 130, 230, 255)};
  return palette[static_cast<std::size_t>(k) % 5];
}

// A warp-specialised room (FlashAttention-3's pingpong): one CTA of its longest kernel over its first
// K/V blocks, a row per warpgroup. The producer's TMA keeps the ring `stages` blocks ahead; in each
// block's time the consumer warpgroups take turns, one on the tensor cores (S = Q_i K_jᵀ, P̃ V_j)
// while the other exponentiates its previous S. Widths from the kernel's predicted time per CTA.
void ShowWarpgroupRoles(const SimulationResult& res, const Pipeline& pipe) {
  const KernelTiming* main = nullptr;
  for (const KernelTiming& k : res.engine.kernels)
    if (!main || k.time_s > main->time_s) main = &k;
  if (!main || res.Tc <= 0 || pipe.consumer_warpgroups <= 0) return;
  const double cta_s = main->time_s / double(std::max<std::int64_t>(main->waves, 1)), step_s = cta_s / double(res.Tc);
  const std::int64_t shown = std::min<std::int64_t>(res.Tc, 4), G = pipe.consumer_warpgroups;
  ImGui::TextWrapped("Warpgroups of one %s CTA (pingpong), its first %lld of %lld K/V blocks, about %s each:",
                     main->name.c_str(), static_cast<long long>(shown), static_cast<long long>(res.Tc),
                     format_seconds(step_s).c_str());
  const float fs = ImGui::GetFontSize(), row_h = fs * 1.35f, gap = 2;
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const ImVec2 size(ImGui::GetContentRegionAvail().x, row_h * float(G + 1) + fs * 0.3f);
  ImGui::InvisibleButton("warpgroups", size);
  NoteDrawingItem();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float left = p0.x + ImGui::CalcTextSize("consumer 2 ").x, slot = (p0.x + size.x - left) / float(shown);
  auto box = [&](float x0, float x1, int row, ImU32 fill, const std::string& text) {
    const ImVec2 a(x0 + gap, p0.y + row_h * float(row)), b(x1 - gap, p0.y + row_h * float(row + 1) - gap);
    dl->AddRectFilled(a, b, fill, 3.0f);
    dl->PushClipRect(a, b, true);
    DrawText(dl, ImVec2(a.x + 3, a.y + (row_h - gap - fs) / 2), TextOn(fill), text);
    dl->PopClipRect();
  };
  Text(dl, ImVec2(p0.x, p0.y + (row_h - fs) / 2), kDim, "producer");
  for (std::int64_t g = 0; g < G; ++g)
    Text(dl, ImVec2(p0.x, p0.y + row_h * float(g + 1) + (row_h - fs) / 2), kDim, fmt::format("consumer {}", g + 1));
  for (std::int64_t j = 0; j < shown; ++j) {
    const float x = left + slot * float(j);
    // The producer refills the stage freed at block j with block j + stages (a TMA, then it waits).
    const std::int64_t next = j + pipe.stages;
    if (next < res.Tc)
      box(x, x + slot * 0.5f, 0, IM_COL32(150, 150, 165, 255), fmt::format("TMA K_{}", next));
    for (std::int64_t g = 0; g < G; ++g)
      for (int half = 0; half < 2; ++half) {
        const bool gemm = (half + g) % 2 == 0;
        box(x + slot * 0.5f * float(half), x + slot * 0.5f * float(half + 1), int(g + 1),
            gemm ? IM_COL32(90, 170, 110, 255) : IM_COL32(200, 120, 200, 255),
            gemm ? fmt::format("mma K_{}", j) : half == 0 && j == 0 ? std::string("waits") : fmt::format("exp S_{}", half == 0 ? j - 1 : j));
      }
  }
}

}  // namespace

void ShowTimelinePanel(AppState& app) {
  PanelTitle("Timeline: CTAs on the SMs and HBM bandwidth (timing engine)", app.highlight == "timeline");
  if (!app.replay[0] || !app.timeline) return;
  const view::TimelineView& t = *app.timeline;
  const SimulationResult& res = app.replay[0]->result();
  ImGui::TextWrapped("%s: predicted %s for all B·H = %lld heads (at the whole GPU's rates: HBM %s, compute %s)",
                     to_string(res.algo).data(), format_seconds(res.time.predicted_s).c_str(),
                     static_cast<long long>(res.problem.instances()), format_seconds(res.time.hbm_s).c_str(),
                     format_seconds(res.time.compute_s).c_str());
  if (!t.available) {
    ImGui::TextDisabled("%s", t.why_not.c_str());
    return;
  }
  for (std::size_t k = 0; k < res.engine.kernels.size(); ++k) {
    const KernelTiming& kt = res.engine.kernels[k];
    ImGui::PushStyleColor(ImGuiCol_Text, kernel_colour(static_cast<std::int32_t>(k)));
    ImGui::Bullet();
    ImGui::PopStyleColor();
    ImGui::SameLine();
    ImGui::TextWrapped("%s: %s, %s, %lld per SM (limit: %s), %lld wave%s", kt.name.c_str(), format_seconds(kt.time_s).c_str(),
                       format_ctas(kt.ctas, kt.tiles).c_str(), static_cast<long long>(kt.ctas_per_sm), kt.occupancy_limit.c_str(),
                       static_cast<long long>(kt.waves), kt.waves == 1 ? "" : "s");
  }
  for (const auto& side : app.replay)  // either side's warp-specialised room
    if (side)
      if (const std::optional<Pipeline> pipe = side->algo()->pipeline(side->result().problem, side->blocks()))
        ShowWarpgroupRoles(side->result(), *pipe);
  // The roofline in one line: where the problem sits against the ridge point, and the time its DRAM
  // bytes take at full bandwidth.
  if (t.dram_bytes > 0) {
    const bool memory_bound = t.flop_per_dram_byte < t.ridge_flop_per_byte;
    ImGui::PushStyleColor(ImGuiCol_Text, kCurrent);
    // 2,590 rather than 2.59e+03: a class reads digits, not exponents.
    const std::string intensity = t.flop_per_dram_byte >= 1000 ? format_count(std::round(t.flop_per_dram_byte))
                                                               : fmt::format("{:.3g}", t.flop_per_dram_byte);
    ImGui::TextWrapped("Roofline: %s FLOP per DRAM byte against the GPU's ridge point of %.0f (tensor FLOP/s ÷ HBM bytes/s): %s. "
                       "Its %s at full bandwidth take %s; predicted %s.",
                       intensity.c_str(), t.ridge_flop_per_byte,
                       memory_bound ? "memory-bound, time ≈ bytes ÷ bandwidth" : "compute-bound: arithmetic sets the time",
                       format_bytes(t.dram_bytes).c_str(), format_seconds(t.bandwidth_floor_s).c_str(),
                       format_seconds(res.time.predicted_s).c_str());
    ImGui::PopStyleColor();
  }
  Canvas c = BeginCanvas("timeline", MinimumSize(Drawing::tab));
  ImDrawList* dl = c.dl;
  const float fs = ImGui::GetFontSize();
  const float left = c.p0.x + fs * 3.2f, right = c.p1.x - fs * 0.5f;
  const float lanes_h = (c.p1.y - c.p0.y) * 0.55f, lane_h = std::min(fs * 1.2f, (lanes_h - fs * 1.5f) / float(std::max<std::size_t>(t.lanes.size(), 1)));
  auto tx = [&](double s) { return left + (right - left) * static_cast<float>(s / t.end_s); };
  Text(dl, c.p0, kDim, fmt::format("first {} of {} SMs", t.lanes.size(), t.sm_count));
  for (std::size_t l = 0; l < t.lanes.size(); ++l) {
    const float y = c.p0.y + fs * 1.4f + lane_h * float(l);
    if (lane_h >= fs * 0.9f) Text(dl, ImVec2(c.p0.x, y), kDim, fmt::format("SM {}", l));
    dl->AddRectFilled(ImVec2(left, y), ImVec2(right, y + lane_h - 2), kPending);
    for (const view::LaneRun& r : t.lanes[l])
      dl->AddRectFilled(ImVec2(tx(r.start_s), y), ImVec2(std::max(tx(r.end_s), tx(r.start_s) + 1), y + lane_h - 2), kernel_colour(r.kernel));
  }
  // Lanes thinner than a line: the first and the last named, where the lanes leave room for both.
  const float lanes_bottom = c.p0.y + fs * 1.4f + lane_h * float(t.lanes.size());
  if (lane_h < fs * 0.9f && t.lanes.size() > 1 && lanes_bottom - (c.p0.y + fs * 1.4f) >= fs * 2.2f) {
    Text(dl, ImVec2(c.p0.x, c.p0.y + fs * 1.4f), kDim, "SM 0");
    Text(dl, ImVec2(c.p0.x, lanes_bottom - fs - 2), kDim, fmt::format("SM {}", t.lanes.size() - 1));
  }
  // HBM bandwidth against the GPU's peak.
  const float by0 = c.p0.y + lanes_h + fs * 1.6f, by1 = c.p1.y - fs * 1.4f;
  double most = t.peak_gbps * 1.15;  // headroom, so the peak line and its label sit inside the plot
  for (double g : t.hbm_gbps) most = std::max(most, g);
  Text(dl, ImVec2(c.p0.x, by0 - fs * 1.3f), kText, "HBM bandwidth in use");
  dl->AddRect(ImVec2(left, by0), ImVec2(right, by1), kFrame);
  const float bw = (right - left) / float(std::max<std::size_t>(t.hbm_gbps.size(), 1));
  for (std::size_t b = 0; b < t.hbm_gbps.size(); ++b) {
    const float h = (by1 - by0) * static_cast<float>(t.hbm_gbps[b] / most);
    if (h > 0.5f) dl->AddRectFilled(ImVec2(left + bw * float(b), by1 - h), ImVec2(left + bw * float(b + 1), by1), IM_COL32(230, 90, 80, 220));
  }
  const float peak_y = by1 - (by1 - by0) * static_cast<float>(t.peak_gbps / most);
  dl->AddLine(ImVec2(left, peak_y), ImVec2(right, peak_y), kCurrent, 1.5f);
  Text(dl, ImVec2(left + 4, peak_y - fs * 1.1f), kCurrent, fmt::format("peak {:.0f} GB/s", t.peak_gbps));
  const std::string end = format_seconds(t.end_s);
  const std::size_t unit = end.rfind(' ');  // "0 µs": the time axis's unit at both ends
  Text(dl, ImVec2(left, by1 + fs * 0.2f), kDim, unit == std::string::npos ? std::string("0") : fmt::format("0{}", end.substr(unit)));
  Text(dl, ImVec2(right - ImGui::CalcTextSize(end.c_str()).x, by1 + fs * 0.2f), kDim, end);
  EndCanvas(c);
}

// [SECTION] Measured against predicted

// A record's marker: a disc for a forward pass, a square for a backward one, in its room's colour.
void DrawMarker(ImDrawList* dl, ImVec2 at, float radius, Algo algo) {
  if (algo->pass() == Pass::backward)
    dl->AddRectFilled(ImVec2(at.x - radius, at.y - radius), ImVec2(at.x + radius, at.y + radius), algo_colour(algo));
  else
    dl->AddCircleFilled(at, radius, algo_colour(algo));
}

void ShowMeasuredPanel(AppState& app) {
  PanelTitle("Measured on a GPU against predicted by the timing engine", app.highlight == "measured");
  if (platform::kBrowser)
    ImGui::TextDisabled("In the browser: the recorded files below come with the page; measuring new ones "
                        "(hbmlab measure) needs a CUDA GPU and the desktop program.");
  request_measured(app);
  // Until every record is predicted, those predicted so far: this problem's first, then its room's.
  std::shared_ptr<const ValidationReport> so_far;
  if (!app.measured && app.measured_error.empty() && app.measured_so_far) {
    const std::lock_guard<std::mutex> lock(app.measured_so_far->mutex);
    so_far = app.measured_so_far->report;
  }
  const std::size_t done = app.measured_progress ? app.measured_progress->done.load() : 0;
  const std::size_t total = app.measured_progress ? app.measured_progress->total.load() : 0;
  if (!app.measured && !(so_far && !so_far->rows.empty())) {
    if (!app.measured_error.empty()) {
      TextWrappedColoured(IM_COL32(255, 110, 100, 255), app.measured_error.c_str());
    } else {
      ImGui::TextWrapped("Reading %s/*.json and running the timing engine on every recorded configuration "
                         "(the same as hbmlab validate), this problem's first…", app.measurements_dir.c_str());
      if (total > 0) {
        const std::string label = fmt::format("{} of {} configurations", done, total);
        ImGui::ProgressBar(float(done) / float(total), ImVec2(-1, 0), label.c_str());
      }
    }
    return;
  }
  const ValidationReport& rep = app.measured ? *app.measured : *so_far;
  if (rep.rows.empty()) {
    ImGui::TextDisabled("No measurement files in %s yet: record some with hbmlab measure on a GPU.", app.measurements_dir.c_str());
    return;
  }
  if (!app.measured) {  // one line while the rest come: the plot keeps the pane
    const std::string label = Fitting({fmt::format("the timing engine is predicting every recorded configuration: {} of {}", done, total),
                                       fmt::format("{} of {} recorded configurations predicted", done, total),
                                       fmt::format("{} of {}", done, total)},
                                      ImGui::GetContentRegionAvail().x - ImGui::GetStyle().FramePadding.x * 2);
    ImGui::ProgressBar(total > 0 ? float(done) / float(total) : 0.0f, ImVec2(-1, 0), label.c_str());
  }
  ImGui::TextWrapped("%zu records%s. Kernel time: mean |error| %.0f%%, worst %+.0f%%, %zu within %.0f%%. DRAM read bytes: "
                     "mean |error| %.0f%%, worst %+.0f%%, %zu within %.0f%%.",
                     rep.rows.size(), app.measured ? " from recorded files" : " so far", rep.time.mean_abs * 100, rep.time.worst * 100,
                     rep.time.within, rep.time.tolerance * 100, rep.dram_read.mean_abs * 100, rep.dram_read.worst * 100,
                     rep.dram_read.within, rep.dram_read.tolerance * 100);
  const AttentionProblem& p = app.replay[0] ? app.replay[0]->result().problem : AttentionProblem{};
  const Algo algo = app.settings.algo;
  const float fs = ImGui::GetFontSize();
  // Log-log scatter of time: measured across, predicted up, on the same decades.
  double lo = 1e300, hi = 0;
  for (const ValidationRow& r : rep.rows)
    if (r.measured_time_s > 0 && r.predicted_time_s > 0) {
      lo = std::min({lo, r.measured_time_s, r.predicted_time_s});
      hi = std::max({hi, r.measured_time_s, r.predicted_time_s});
    }
  if (hi <= 0) return;
  const double l0 = std::log10(lo) - 0.1, l1 = std::log10(hi) + 0.1;
  // Ticks at every decade, or at 1, 2 and 5 of each where the records span less than two.
  auto tick_label = [](double v) {
    return v < 1e-3 ? fmt::format("{:g} µs", v * 1e6) : v < 1 ? fmt::format("{:g} ms", v * 1e3) : fmt::format("{:g} s", v);
  };
  std::vector<double> ticks;  // log10 of each
  for (int pass = 0; pass < 2 && ticks.size() < 2; ++pass) {
    ticks.clear();
    for (double e = std::floor(l0); e <= l1; e += 1)
      for (double m : pass == 0 ? std::vector<double>{1} : std::vector<double>{1, 2, 5})
        if (const double t = e + std::log10(m); t >= l0 && t <= l1) ticks.push_back(t);
  }
  float tick_w = 0;
  for (double t : ticks) tick_w = std::max(tick_w, ImGui::CalcTextSize(tick_label(std::pow(10.0, t)).c_str()).x);
  // The rooms the records are of, for the legend: the forward rooms in the registry's order, then the
  // others (backward) as they come.
  std::vector<Algo> shown;
  auto recorded = [&](Algo al) {
    return std::any_of(rep.rows.begin(), rep.rows.end(), [&](const ValidationRow& r) { return r.algo == al; });
  };
  for (Algo al : algorithms())
    if (recorded(al)) shown.push_back(al);
  for (const ValidationRow& r : rep.rows)
    if (std::find(shown.begin(), shown.end(), r.algo) == shown.end()) shown.push_back(r.algo);
  float legend_w = 0;
  for (Algo al : shown) legend_w = std::max(legend_w, fs * 1.3f + ImGui::CalcTextSize(std::string(to_string(al)).c_str()).x);
  const float legend_h = fs * 1.2f * float(shown.size());
  // The plot is a square as large as the pane's visible room allows: the y axis's ticks on its left,
  // its title over it, the x axis's ticks and title under it. The legend goes beside it, or inside its
  // upper left where that stays clear of the diagonal the points follow and the square is larger so.
  const ImVec2 room = ImGui::GetContentRegionAvail(), minimum = MinimumSize(Drawing::tab);
  const float canvas_w = std::floor(std::max(room.x, minimum.x));
  const float left = tick_w + fs * 0.6f, top = fs * 1.4f, under = fs * 2.6f;
  const float h_avail = std::max(room.y, minimum.y) - top - under, w_avail = canvas_w - left - fs * 0.5f;
  const float side_beside = std::min(h_avail, w_avail - legend_w - fs);
  const float side_inside = std::min(h_avail, w_avail);
  const bool legend_inside = legend_w + legend_h + fs < 0.8f * side_inside && side_inside > side_beside;
  const float side = std::max(legend_inside ? side_inside : side_beside, fs * 6);
  // Under the plot, each GPU, room and kernel's errors: the canvas goes on below the fold for them.
  std::vector<RoomSummary> groups = summarise_by_room(rep);
  std::stable_partition(groups.begin(), groups.end(), [&](const RoomSummary& g) { return g.algo == algo; });
  auto mean = [](const ValidationSummary& sm) {
    return std::isfinite(sm.mean_abs) ? fmt::format("{:.1f} % ({} of {})", 100 * sm.mean_abs, sm.within, sm.count)
                                      : std::string("—");
  };
  // A room's two lines, wrapped where the pane is narrow.
  const float summary_wrap = canvas_w - fs * 1.5f;
  auto summary_lines = [&](const RoomSummary& g) {
    return std::pair{g.label(), "DRAM reads " + mean(g.dram_read) + ", time " + mean(g.time)};
  };
  auto text_h = [&](const std::string& t) { return ImGui::CalcTextSize(t.c_str(), nullptr, false, summary_wrap).y; };
  const float summary_y = top + side + under + fs * 0.6f;
  float summary_h = fs * 1.5f;
  for (const RoomSummary& g : groups) {
    const auto [name, errors] = summary_lines(g);
    summary_h += text_h(name) + text_h(errors) + fs * 0.4f;
  }
  const float height = std::max(std::max(room.y, minimum.y), summary_y + summary_h);
  Canvas c = BeginCanvas("measured", minimum, std::floor(height));
  ImDrawList* dl = c.dl;
  const ImVec2 a(c.p0.x + left, c.p0.y + top), b(a.x + side, a.y + side);
  auto px = [&](double lg) { return a.x + side * static_cast<float>((lg - l0) / (l1 - l0)); };
  auto py = [&](double lg) { return b.y - side * static_cast<float>((lg - l0) / (l1 - l0)); };
  const ImU32 grid = IM_COL32(60, 60, 72, 255);
  float last_x_label = -FLT_MAX;
  for (double t : ticks) {
    dl->AddLine(ImVec2(px(t), a.y), ImVec2(px(t), b.y), grid);
    dl->AddLine(ImVec2(a.x, py(t)), ImVec2(b.x, py(t)), grid);
    const std::string label = tick_label(std::pow(10.0, t));
    const float w = ImGui::CalcTextSize(label.c_str()).x;
    Text(dl, ImVec2(a.x - fs * 0.3f - w, py(t) - fs * 0.5f), kDim, label);
    const float x = std::clamp(px(t) - w / 2, a.x - fs * 0.3f, c.p1.x - w);
    if (x > last_x_label) {  // across, a label only where it clears the one before
      Text(dl, ImVec2(x, b.y + fs * 0.2f), kDim, label);
      last_x_label = x + w + fs * 0.6f;
    }
  }
  dl->AddRect(a, b, kFrame);
  dl->AddLine(ImVec2(a.x, b.y), ImVec2(b.x, a.y), IM_COL32(200, 200, 210, 140), 1.5f);
  Text(dl, ImVec2(c.p0.x, c.p0.y), kText, "↑ predicted kernel time");
  TextCentred(dl, ImVec2((a.x + b.x) / 2, b.y + fs * 1.9f), kText, "measured kernel time →");
  const float radius = std::clamp(side / 70, fs * 0.22f, fs * 0.34f);
  const ValidationRow* hovered = nullptr;
  for (int pass = 0; pass < 2; ++pass)
    for (const ValidationRow& r : rep.rows) {
      if (!(r.measured_time_s > 0 && r.predicted_time_s > 0)) continue;
      const bool mine = IsMeasuredOfProblem(r, p, algo);
      if (mine != (pass == 1)) continue;
      const ImVec2 q(px(std::log10(r.measured_time_s)), py(std::log10(r.predicted_time_s)));
      DrawMarker(dl, q, mine ? radius * 1.4f : radius, r.algo);
      if (mine) dl->AddCircle(q, radius * 2.2f, kCurrent, 0, 2.0f);
      if (c.hovered && std::abs(ImGui::GetIO().MousePos.x - q.x) < fs * 0.3f && std::abs(ImGui::GetIO().MousePos.y - q.y) < fs * 0.3f)
        hovered = &r;
    }
  {
    const float lx = legend_inside ? a.x + fs * 0.5f : b.x + fs;
    float ly = a.y + fs * 0.3f;
    if (legend_inside)  // over the grid lines
      dl->AddRectFilled(ImVec2(lx, ly), ImVec2(lx + legend_w, ly + legend_h), IM_COL32(23, 23, 28, 255));
    for (Algo al : shown) {
      DrawMarker(dl, ImVec2(lx + fs * 0.3f, ly + fs * 0.55f), fs * 0.28f, al);
      Text(dl, ImVec2(lx + fs * 0.9f, ly), kText, std::string(to_string(al)));
      ly += fs * 1.2f;
    }
  }
  // Each GPU, room and kernel's mean |error| and how many of its records are within the targets,
  // this problem's room first and in the highlight colour.
  {
    const float tx = c.p0.x;
    float ty = c.p0.y + summary_y;
    Text(dl, ImVec2(tx, ty), kText, "mean |error| (records within 10 % DRAM, 15 % time)");
    ty += fs * 1.5f;
    for (const RoomSummary& g : groups) {
      const auto [name, errors] = summary_lines(g);
      DrawMarker(dl, ImVec2(tx + fs * 0.3f, ty + fs * 0.55f), fs * 0.25f, g.algo);
      DrawText(dl, ImVec2(tx + fs, ty), g.algo == algo ? kCurrent : kText, name, summary_wrap);
      ty += text_h(name);
      DrawText(dl, ImVec2(tx + fs, ty), kDim, errors, summary_wrap);
      ty += text_h(errors) + fs * 0.4f;
    }
  }
  if (hovered) {
    ImGui::BeginTooltip();
    ImGui::Text("%s (%s): N = %lld, d = %lld, B·H = %lld, Br × Bc = %lld × %lld", hovered->source.c_str(), to_string(hovered->algo).data(),
                static_cast<long long>(hovered->problem.seq_len), static_cast<long long>(hovered->problem.head_dim),
                static_cast<long long>(hovered->problem.instances()), static_cast<long long>(hovered->blocks.Br),
                static_cast<long long>(hovered->blocks.Bc));
    ImGui::Text("measured %s, predicted %s (%+.0f%%)", format_seconds(hovered->measured_time_s).c_str(),
                format_seconds(hovered->predicted_time_s).c_str(), hovered->time_error() * 100);
    ImGui::Text("from %s on %s", hovered->file.c_str(), hovered->gpu.c_str());
    ImGui::EndTooltip();
  }
  EndCanvas(c);
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped("Points on the diagonal are exact; ringed points are this problem (same N, d and algorithm); squares "
                     "are backward passes.%s",
                     app.measured ? "" : " This problem's records and the rest of their files come first, the others as the "
                                         "timing engine predicts them (the same as hbmlab validate).");
  if (!rep.skipped_files.empty()) {
    ImGui::TextWrapped("%zu files left out: they hold no attention records hbmlab models (hover for why).", rep.skipped_files.size());
    if (ImGui::IsItemHovered()) {
      std::string why;
      const std::string dir = app.measurements_dir + "/";
      for (const std::string& f : rep.skipped_files) why += (f.rfind(dir, 0) == 0 ? f.substr(dir.size()) : f) + "\n";
      ImGui::SetTooltip("%s", why.c_str());
    }
  }
  ImGui::PopStyleColor();
}

}  // namespace hbmlab::viz
