// Catch2's runner for the GPU tests (test_kernels.cpp): without a CUDA device it prints "no CUDA
// device: skipped" and exits 4, which CTest reports as skipped. No test here, so it is compiled
// unoptimised, as tests/catch_main.cpp is.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "gpu/runner.hpp"

int main(int argc, char* argv[]) {
  if (hbmlab::gpu::device_count() == 0) {
    std::printf("no CUDA device: skipped\n");
    return 4;
  }
  return Catch::Session().run(argc, argv);
}
