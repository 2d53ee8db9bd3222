// What one SM's SRAM holds after a step, as an algorithm's kernel allocates it: one buffer per
// tensor, each holding one tile. Each room says how its steps fill and free these buffers
// (Algorithm::on_chip); the window's memory view draws them (sim/view/replay_view.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/algo/step.hpp"

namespace hbmlab {

// A tile of a tensor of one (batch, head): rows [row0, row0 + rows) × cols [col0, col0 + cols).
struct Tile {
  Tensor tensor = Tensor::Q;
  std::int32_t i = -1, j = -1;
  std::int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;
  std::int64_t bytes = 0;
  bool operator==(const Tile&) const = default;

  static Tile of(const Step& s) { return {s.tensor, s.i, s.j, s.row0, s.rows, s.col0, s.cols, s.bytes}; }
};

class Sram {
public:
  std::vector<Tile> tiles;  // in kAllTensors order

  std::int64_t bytes() const;
  const Tile* find(Tensor t) const;
  void put(const Tile& tile);  // into its tensor's buffer, replacing what was there
  void drop(Tensor t);
  void clear() { tiles.clear(); }
};

}  // namespace hbmlab
