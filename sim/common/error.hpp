// Errors that hbmlab reports to its user. An InputError is a bad option, scenario or preset:
// the CLI prints its one-line message and exits with code 2.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace hbmlab {

class InputError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Throws an InputError whose message names what was wrong and what would be valid.
template <class... Args>
[[noreturn]] void fail_input(fmt::format_string<Args...> format, Args&&... args) {
  throw InputError(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace hbmlab
