// hbmlab: the program. Run `hbmlab --help`; with no arguments it opens the default lesson.
// The composition root: it wires the optional front ends (viz/, gpu/) into the CLI of sim/cli, so
// that no arrow runs from sim/ up to them.
#include <cstdlib>
#include <iostream>

#include "sim/cli/cli.hpp"

#if HBMLAB_HAVE_GUI
#include "viz/app.hpp"
#endif
#if HBMLAB_HAVE_CUDA
#include "gpu/frontend.hpp"
#endif

int main(int argc, char** argv) {
  hbmlab::Frontends frontends;
  frontends.display_available = std::getenv("DISPLAY") != nullptr || std::getenv("WAYLAND_DISPLAY") != nullptr;
#if HBMLAB_HAVE_GUI
  frontends.gui = hbmlab::viz::run_gui;
#endif
#if HBMLAB_HAVE_CUDA
  frontends.measure = hbmlab::gpu::run_measure;
#endif
  return hbmlab::run_cli({argv + 1, argv + argc}, std::cout, std::cerr, frontends);
}
