// Human-readable numbers for reports and narration: 8 KiB, 40.3 GB, 1.2 ms, 3.4 GFLOP.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hbmlab {

std::string format_bytes(double bytes);      // binary units below 1 MiB, decimal GB/TB above
std::string format_count(double count);      // 1,234,567
std::string format_si(double value, const char* unit);  // 3.4 GFLOP, 1.5 TB/s
std::string format_seconds(double seconds);  // 12.3 µs, 4.56 ms, 1.23 s
// A kernel's grid: "2,048 CTAs", or "132 persistent CTAs walking 2,048 tiles" where fewer CTAs than
// tiles were launched (KernelTiming::ctas and tiles).
std::string format_ctas(std::int64_t ctas, std::int64_t tiles);

// The whole of `text` as a decimal number, as std::from_chars reads one ("0.25", "1e-3"; no sign
// '+', no spaces), or nothing. (The libc++ that Emscripten ships has no from_chars for double.)
std::optional<double> parse_decimal(std::string_view text);

}  // namespace hbmlab
