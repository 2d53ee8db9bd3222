// The scenario files (scenarios/**/*.toml) compiled into the binary by scenarios/embed.cmake.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hbmlab {

struct EmbeddedFile {
  std::string_view path;  // relative to scenarios/, e.g. "gpus/toy.toml"
  std::string_view text;
};

std::span<const EmbeddedFile> embedded_scenarios();

// The embedded file at `path` (relative to scenarios/), if any.
std::optional<std::string_view> find_embedded(std::string_view path);

// Paths of embedded files under `folder` ("gpus", "lessons", "workloads"), sorted.
std::vector<std::string_view> embedded_in(std::string_view folder);

// Whether `path` names a regular file (exists(): anything at all) on disk. A name the file system
// refuses (too long, say) is simply not a file: these never throw.
bool is_file(const std::string& path);
bool exists_on_disk(const std::string& path);

// The contents of a file on disk; throws InputError naming the path when it cannot be read.
std::string read_text_file(const std::string& path);

}  // namespace hbmlab
