// The panels of the window, one function each, and the colours they share: one colour per tensor
// in every panel (HBM grid, SRAM tiles, matrix, bars), so Q is the same blue everywhere.
#pragma once

#include <imgui.h>

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

// Text helpers shared by the panels.
void TextWrappedColoured(ImU32 colour, const char* text);
void PanelTitle(const char* title, bool highlighted);

}  // namespace hbmlab::viz
