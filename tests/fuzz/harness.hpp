// What every fuzz harness shares. A loader answers bad input with an InputError (its documented
// error: one line, exit code 2 in the CLI); that is a normal outcome here. Anything else, a crash, a
// sanitizer finding, a leak, another exception escaping, is a failure that libFuzzer reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/common/error.hpp"

namespace hbmlab::fuzz {

inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `body`, letting only InputError end it early.
template <class Body>
void only_input_errors(Body&& body) {
  try {
    body();
  } catch (const InputError&) {
  }
}

}  // namespace hbmlab::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
