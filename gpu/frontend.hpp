// `hbmlab measure`: runs hbmlab's CUDA kernels over a sweep, checks each against the fp64 CPU
// reference, times it, and writes a measurement file (docs/design.md#measurement-files).
// Run: hbmlab measure --help
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace hbmlab::gpu {

int run_measure(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace hbmlab::gpu
