// Writing output files whole or not at all: a temporary file beside the target, then rename.
#pragma once

#include <string>
#include <string_view>

namespace hbmlab {

// Throws InputError naming the path when it cannot be written; never leaves a partial file.
void write_file_atomically(const std::string& path, std::string_view contents);

}  // namespace hbmlab
