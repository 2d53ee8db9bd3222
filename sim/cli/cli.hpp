// The hbmlab command line: simulate, bounds, sweep, presets, and the front ends (gui, measure,
// validate) that viz/ and gpu/ provide when they are built. Tests call run_cli in-process.
#pragma once

#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace hbmlab {

struct GuiOptions {
  std::string scenario;    // empty: the default lesson
  int stage = 0;           // the lesson's stage to open, from 1; 0: the first
  std::string screenshot;  // save a PNG after `frames` frames and exit
  int frames = 0;          // 0: run until the window closes
  double ui_scale = 0;     // 0: from the monitor's content scale
  bool report_fps = false;
  int width = 1600, height = 1000;
};

// Entry points that live outside sim/: set by main() when viz/ or gpu/ were built.
struct Frontends {
  std::function<int(const GuiOptions&)> gui;
  std::function<int(const std::vector<std::string>& args, std::ostream& out, std::ostream& err)> measure;
  bool display_available = false;  // $DISPLAY or $WAYLAND_DISPLAY is set
};

// args excludes the program name. Returns the exit code: 0 ok, 2 bad input, 1 internal error.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, const Frontends& frontends = {});

}  // namespace hbmlab
