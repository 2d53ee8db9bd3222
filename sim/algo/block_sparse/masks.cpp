// The block masks --block-mask takes.
#include "sim/algo/block_sparse/masks.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/common/error.hpp"
#include "sim/common/units.hpp"
#include "sim/scenario/embedded.hpp"

namespace hbmlab {
namespace {

class LocalMask final : public BlockMask {
public:
  explicit LocalMask(std::int64_t W) : W_(W) {}
  bool keeps(const BlockGrid& g, std::int64_t i, std::int64_t j) const override {
    const std::int64_t q0 = g.query_position(g.row_begin(i)), q1 = g.query_position(g.row_begin(i) + g.rows(i) - 1);
    const std::int64_t k0 = g.col_begin(j), k1 = k0 + g.cols(j) - 1;
    const std::int64_t gap = k0 > q1 ? k0 - q1 : q0 > k1 ? q0 - k1 : 0;  // nearest query and key
    return gap < W_;
  }
  std::string spec() const override { return fmt::format("local:{}", W_); }

private:
  std::int64_t W_;
};

class ButterflyMask final : public BlockMask {
public:
  bool keeps(const BlockGrid&, std::int64_t i, std::int64_t j) const override {
    const auto x = static_cast<std::uint64_t>(i ^ j);
    return x == 0 || std::has_single_bit(x);
  }
  std::string spec() const override { return "butterfly"; }
};

class RandomMask final : public BlockMask {
public:
  RandomMask(double density, std::uint64_t seed, std::string spec) : density_(density), seed_(seed), spec_(std::move(spec)) {}
  bool keeps(const BlockGrid&, std::int64_t i, std::int64_t j) const override {
    // splitmix64 of (seed, i, j): the same pairs whatever order they are asked in.
    std::uint64_t z = seed_ * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(i) * 0xbf58476d1ce4e5b9ULL +
                      static_cast<std::uint64_t>(j) * 0x94d049bb133111ebULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53 < density_;
  }
  std::string spec() const override { return spec_; }

private:
  double density_;
  std::uint64_t seed_;
  std::string spec_;
};

class FileMask final : public BlockMask {
public:
  FileMask(std::string path, std::vector<std::string> rows) : path_(std::move(path)), rows_(std::move(rows)) {}
  bool keeps(const BlockGrid&, std::int64_t i, std::int64_t j) const override {
    return rows_[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] == '1';
  }
  std::string spec() const override { return path_; }
  void check(const BlockGrid& g) const override {
    const auto Tr = static_cast<std::int64_t>(rows_.size()), Tc = static_cast<std::int64_t>(rows_.front().size());
    if (Tr != g.Tr || Tc != g.Tc)
      fail_input("{}: {} rows of {} columns, but the blocks make Tr × Tc = {} × {} (NQ = {}, Br = {}; N = {}, Bc = {})",
                 path_, Tr, Tc, g.Tr, g.Tc, g.Nq, g.Br, g.N, g.Bc);
  }

private:
  std::string path_;
  std::vector<std::string> rows_;
};

}  // namespace

std::shared_ptr<const BlockMask> parse_mask_text(std::string_view text, std::string_view origin) {
  const std::string path(origin);
  std::vector<std::string> rows;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto stray = line.find_first_not_of("01");
    if (stray != std::string::npos)
      fail_input("{}:{}: stray character '{}' in column {} (a mask file holds 0 and 1 only)", path, n, line[stray],
                 stray + 1);
    if (!rows.empty() && line.size() != rows.front().size())
      fail_input("{}:{}: {} columns, but the first row has {}", path, n, line.size(), rows.front().size());
    rows.push_back(line);
  }
  if (rows.empty()) fail_input("{}:1: no rows (expected Tr lines of Tc characters 0 or 1)", path);
  return std::make_shared<FileMask>(path, std::move(rows));
}

namespace {

double parse_number(std::string_view text, std::string_view what) {
  const std::optional<double> v = parse_decimal(text);
  if (!v) fail_input("--block-mask: {} '{}' is not a number", what, text);
  return *v;
}

std::int64_t parse_count(std::string_view text, std::string_view what) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v <= 0)
    fail_input("--block-mask: {} '{}' is not a positive integer", what, text);
  return v;
}

}  // namespace

std::shared_ptr<const BlockMask> parse_block_mask(std::string_view spec) {
  const std::string text(spec);
  if (text == "butterfly") return std::make_shared<ButterflyMask>();
  if (text.starts_with("local:")) return std::make_shared<LocalMask>(parse_count(spec.substr(6), "local:W window"));
  if (text.starts_with("random:")) {
    const std::string_view rest = spec.substr(7);
    const auto colon = rest.find(':');
    const double d = parse_number(rest.substr(0, colon), "random:DENSITY density");
    if (!(d > 0 && d <= 1)) fail_input("--block-mask: random density {} is outside (0, 1]", d);
    const std::uint64_t seed =
        colon == std::string_view::npos ? 1 : static_cast<std::uint64_t>(parse_count(rest.substr(colon + 1), "random seed"));
    return std::make_shared<RandomMask>(d, seed, text);
  }
  if (is_file(std::string(text))) return parse_mask_text(read_text_file(text), text);  // InputError naming the path when unreadable
  if (exists_on_disk(std::string(text))) (void)read_text_file(text);  // a folder: "PATH: cannot read: Is a directory"
  fail_input("--block-mask: '{}' is not local:W, butterfly, random:DENSITY[:SEED] or a mask file", text);
}

std::int64_t kept_pairs(const BlockGrid& g) {
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < g.Tr; ++i)
    for (std::int64_t j = 0; j < g.Tc; ++j) kept += g.skipped(i, j) ? 0 : 1;
  return kept;
}

double density(const BlockGrid& g) { return double(kept_pairs(g)) / double(g.Tr * g.Tc); }

}  // namespace hbmlab
