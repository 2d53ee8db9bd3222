// hbmlab's window (Dear ImGui + GLFW + OpenGL 3.3). Run: `hbmlab gui [--scenario F] [--ui-scale S]`;
// headless: `xvfb-run -a -s "-screen 0 1600x1000x24" hbmlab gui --screenshot out.png --frames 60`.
#pragma once

#include "sim/cli/cli.hpp"

namespace hbmlab::viz {

// Opens the window and runs until it closes (or for options.frames frames, then saves
// options.screenshot). Returns 0, or 2 with one line on stderr when there is no display.
int run_gui(const hbmlab::GuiOptions& options);

}  // namespace hbmlab::viz
