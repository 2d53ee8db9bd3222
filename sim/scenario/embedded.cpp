// Lookup over the embedded scenario files, and reading files from disk.
#include "sim/scenario/embedded.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "sim/common/error.hpp"
#include "sim/common/limits.hpp"

namespace hbmlab {

std::optional<std::string_view> find_embedded(std::string_view path) {
  for (const EmbeddedFile& file : embedded_scenarios())
    if (file.path == path) return file.text;
  return std::nullopt;
}

std::vector<std::string_view> embedded_in(std::string_view folder) {
  std::vector<std::string_view> paths;
  for (const EmbeddedFile& file : embedded_scenarios())
    if (file.path.size() > folder.size() && file.path.starts_with(folder) && file.path[folder.size()] == '/')
      paths.push_back(file.path);
  return paths;  // the generator writes them sorted
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_input("{}: cannot read: {}", path, std::strerror(errno));
  // In pieces, so that a huge file (or an endless one, a pipe or a device) stops at the limit.
  std::string text;
  std::vector<char> piece(std::size_t{1} << 16);
  while (in.read(piece.data(), static_cast<std::streamsize>(piece.size())) || in.gcount() > 0) {
    text.append(piece.data(), static_cast<std::size_t>(in.gcount()));
    if (static_cast<std::int64_t>(text.size()) > kMaxInputFileBytes)
      fail_input("{}: more than {} MiB; hbmlab reads scenario, preset, measurement and mask files of at most that size",
                 path, kMaxInputFileBytes >> 20);
  }
  if (in.bad()) fail_input("{}: cannot read: {}", path, std::strerror(errno));
  return text;
}

}  // namespace hbmlab
