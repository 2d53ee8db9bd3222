// Atomic file writes.
#include "sim/common/files.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "sim/common/error.hpp"

namespace hbmlab {

void write_file_atomically(const std::string& path, std::string_view contents) {
  const std::string temp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) fail_input("{}: cannot write: {}", path, std::strerror(errno));
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    if (!out) {
      std::remove(temp.c_str());
      fail_input("{}: cannot write: {}", path, std::strerror(errno));
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::remove(temp.c_str());
    fail_input("{}: cannot write: {}", path, ec.message());
  }
}

void write_output(std::string_view option, const std::string& path, std::string_view contents) {
  try {
    write_file_atomically(path, contents);
  } catch (const InputError& e) {
    fail_input("{}: {}", option, e.what());
  }
}

void check_output(std::string_view option, const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail_input("{}: {}: cannot write: {}", option, path, std::strerror(EISDIR));
  const std::string temp = fmt::format("{}.tmp.{}", path, ::getpid());
  const bool opened = std::ofstream(temp, std::ios::binary | std::ios::trunc).is_open();
  const int error = errno;
  if (!opened) fail_input("{}: {}: cannot write: {}", option, path, std::strerror(error));
  std::remove(temp.c_str());
}

}  // namespace hbmlab
