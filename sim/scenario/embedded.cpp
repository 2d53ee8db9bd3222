// Lookup over the embedded scenario files, and reading files from disk.
#include "sim/scenario/embedded.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "sim/common/error.hpp"

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
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace hbmlab
