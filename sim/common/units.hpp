// Human-readable numbers for reports and narration: 8 KiB, 40.3 GB, 1.2 ms, 3.4 GFLOP.
#pragma once

#include <cstdint>
#include <string>

namespace hbmlab {

std::string format_bytes(double bytes);      // binary units below 1 MiB, decimal GB/TB above
std::string format_count(double count);      // 1,234,567
std::string format_si(double value, const char* unit);  // 3.4 GFLOP, 1.5 TB/s
std::string format_seconds(double seconds);  // 12.3 µs, 4.56 ms, 1.23 s

}  // namespace hbmlab
