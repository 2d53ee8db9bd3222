// Writing output files whole or not at all: a temporary file beside the target, then rename.
#pragma once

#include <string>
#include <string_view>

namespace hbmlab {

// Throws InputError naming the path when it cannot be written; never leaves a partial file.
void write_file_atomically(const std::string& path, std::string_view contents);

// The same for the file an option asked for; the error names the option first:
// "--out: PATH: cannot write: No such file or directory".
void write_output(std::string_view option, const std::string& path, std::string_view contents);

// Before long work whose result goes to `path` (`hbmlab measure --out`): refuses as write_output would,
// at once, a path that cannot be written (a missing or read-only folder, a directory). Leaves nothing.
void check_output(std::string_view option, const std::string& path);

}  // namespace hbmlab
