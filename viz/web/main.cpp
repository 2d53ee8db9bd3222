// hbmlab's page: the window of viz/ in a browser (WebAssembly, WebGL 2). Built by `make web` into
// build-web/; serve that folder (`python3 -m http.server -d build-web`) and open it. The page's
// address chooses a lesson and stage: index.html#lesson=3&stage=2.
#include <iostream>

#include "sim/cli/cli.hpp"
#include "viz/app.hpp"

int main() {
  std::cout << "hbmlab in the browser: every lesson, the explorer and the recorded measurements; "
               "measuring kernels (hbmlab measure) needs a CUDA GPU and the desktop program\n";
  hbmlab::GuiOptions options;
  return hbmlab::viz::run_gui(options);
}
