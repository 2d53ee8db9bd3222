// Sum of one field over a range of records, e.g. the DRAM read bytes of every tensor.
#pragma once

#include <cstdint>

namespace hbmlab {

template <class Range, class Record>
std::int64_t sum_field(const Range& records, std::int64_t Record::*field) {
  std::int64_t total = 0;
  for (const Record& r : records) total += r.*field;
  return total;
}

}  // namespace hbmlab
