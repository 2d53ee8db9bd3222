// Progress of long work (a sweep, a validation): called after each finished item with how many
// are done and how many there are in all, one call at a time.
#pragma once

#include <cstddef>
#include <functional>

namespace hbmlab {

using Progress = std::function<void(std::size_t done, std::size_t total)>;

}  // namespace hbmlab
