// Formatting of quantities for people; JSON and CSV keep raw numbers.
#include "sim/common/units.hpp"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace hbmlab {

std::string format_count(double count) {
  std::string digits = fmt::format("{:.0f}", std::fabs(count));
  std::string out;
  for (std::size_t k = 0; k < digits.size(); ++k) {
    if (k > 0 && (digits.size() - k) % 3 == 0) out += ',';
    out += digits[k];
  }
  return (count < 0 ? "-" : "") + out;
}

std::string format_ctas(std::int64_t ctas, std::int64_t tiles) {
  if (tiles <= ctas) return format_count(double(ctas)) + " CTAs";
  return fmt::format("{} persistent CTA{} walking {} tiles", format_count(double(ctas)), ctas == 1 ? "" : "s",
                     format_count(double(tiles)));
}

std::string format_si(double value, const char* unit) {
  static const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int k = 0;
  while (std::fabs(value) >= 1000 && k < 6) {
    value /= 1000;
    ++k;
  }
  return fmt::format("{:.{}f} {}{}", value, k == 0 ? 0 : (std::fabs(value) < 10 ? 2 : 1), prefixes[k], unit);
}

std::string format_bytes(double bytes) {
  if (bytes < 1024) return fmt::format("{:.0f} B", bytes);
  if (bytes < 1024 * 1024) return fmt::format("{:.{}f} KiB", bytes / 1024, std::fmod(bytes, 1024) == 0 ? 0 : 1);
  return format_si(bytes, "B");
}

std::string format_seconds(double s) {
  if (s < 1e-6) return fmt::format("{:.1f} ns", s * 1e9);
  if (s < 1e-3) return fmt::format("{:.2f} µs", s * 1e6);
  if (s < 1) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

std::optional<double> parse_decimal(std::string_view text) {
  // strtod reads more than from_chars (spaces, '+', hexadecimal): those are refused first.
  if (text.empty() || text.find_first_of(" \t\n+xX") != std::string_view::npos) return std::nullopt;
  const std::string copy(text);
  char* end = nullptr;
  const double v = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size()) return std::nullopt;
  return v;
}

}  // namespace hbmlab
