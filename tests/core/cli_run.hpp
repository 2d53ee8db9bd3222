// The hbmlab command line run in-process for the tests: its exit code and what it printed.
// Use: const Run r = run({"simulate", "--seq-len", "0"}); CHECK(r.code == 2);
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "sim/cli/cli.hpp"

namespace hbmlab::testing {

struct Run {
  int code;
  std::string out, err;
};

inline Run run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

}  // namespace hbmlab::testing
