// The SRAM buffers of one SM.
#include "sim/algo/on_chip.hpp"

#include <algorithm>

namespace hbmlab {

std::int64_t Sram::bytes() const {
  std::int64_t total = 0;
  for (const Tile& t : tiles) total += t.bytes;
  return total;
}

const Tile* Sram::find(Tensor t) const {
  for (const Tile& tile : tiles)
    if (tile.tensor == t) return &tile;
  return nullptr;
}

void Sram::put(const Tile& tile) {
  auto it = std::find_if(tiles.begin(), tiles.end(), [&](const Tile& t) { return t.tensor == tile.tensor; });
  if (it != tiles.end()) {
    *it = tile;
    return;
  }
  tiles.push_back(tile);
  std::sort(tiles.begin(), tiles.end(),
            [](const Tile& a, const Tile& b) { return static_cast<int>(a.tensor) < static_cast<int>(b.tensor); });
}

void Sram::drop(Tensor t) {
  std::erase_if(tiles, [&](const Tile& tile) { return tile.tensor == t; });
}

}  // namespace hbmlab
