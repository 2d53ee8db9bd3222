// What every benchmark takes: nothing (the full sizes its header names), or --smoke (tiny sizes and
// one repetition, so CTest runs each benchmark on every build: `ctest -L bench`); and how each times.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace hbmlab::bench {

struct Args {
  bool smoke = false;
  int reps(int full) const { return smoke ? 1 : full; }
};

inline Args parse_args(int argc, char** argv) {
  Args args;
  for (int k = 1; k < argc; ++k) {
    const std::string_view a = argv[k];
    if (a == "--smoke") {
      args.smoke = true;
    } else {
      std::fprintf(stderr, "%s: unknown option '%s' (expected --smoke, or nothing for the full sizes)\n", argv[0], argv[k]);
      std::exit(2);
    }
  }
  return args;
}

// The fastest of `reps` runs of work(), in seconds of wall-clock time.
template <class F>
double best_seconds(int reps, F&& work) {
  double best = 1e9;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    work();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace hbmlab::bench
