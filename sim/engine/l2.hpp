// TileL2: the L2 cache at tile granularity. An LRU over whole tiles (K_j, Q_i, S_ij, ...) of
// variable size in bytes, with partial residency, write-allocate and write-back of dirty bytes.
// Used by the timing engine (timing.hpp); tests/core/test_timing.cpp checks it on small cases.
//
// Why tiles and not 32-byte sectors: attention kernels always move whole tiles, so every sector
// of a tile gets the same recency. A fully associative LRU over sectors then evicts the tiles'
// sectors oldest tile first, which is exactly an LRU over tiles whose oldest tile may be partly
// resident. This costs one hash lookup per tile instead of one per sector (a 32 KiB
// tile is 1,024 sectors), which is what makes GPT-2-sized and 64K-token problems fast.
// Approximated: set associativity and hashing of addresses onto slices (real L2s are not fully
// associative), and the order of sectors inside a tile.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sim/algo/step.hpp"

namespace hbmlab {

// A tile's identity: the (batch, head) instance, the tensor and the tile's index in it.
inline std::uint64_t tile_key(std::int64_t instance, Tensor tensor, std::int64_t tile) {
  return (static_cast<std::uint64_t>(instance) << 40) | (static_cast<std::uint64_t>(tensor) << 36) |
         static_cast<std::uint64_t>(tile);
}
inline Tensor tile_key_tensor(std::uint64_t key) { return static_cast<Tensor>((key >> 36) & 0xF); }

class TileL2 {
public:
  explicit TileL2(std::int64_t capacity_bytes);

  struct ReadOutcome {
    std::int64_t hit_bytes = 0, miss_bytes = 0;
  };
  // A load of the whole tile: resident bytes hit, the rest is fetched from DRAM and allocated.
  ReadOutcome read(std::uint64_t key, std::int64_t bytes);
  // A store of the whole tile: allocated dirty without a DRAM read (whole sectors are written).
  void write(std::uint64_t key, std::int64_t bytes);

  // Dirty bytes written back to DRAM by evictions since the last call, per tensor.
  std::array<std::int64_t, kTensorCount> take_writebacks();
  std::int64_t dirty_bytes() const;  // still dirty in the cache (not yet written to DRAM)
  std::int64_t used_bytes() const { return used_; }
  std::int64_t capacity_bytes() const { return capacity_; }

private:
  struct Entry {
    std::uint64_t key = 0;
    std::int64_t resident = 0, dirty = 0;
    std::int32_t prev = -1, next = -1;  // towards LRU (prev) and MRU (next)
  };
  std::int32_t touch(std::uint64_t key);  // the entry, moved to MRU (created if absent)
  void unlink(std::int32_t e);
  void push_mru(std::int32_t e);
  void evict_down_to_capacity(std::int32_t keep);

  std::int64_t capacity_ = 0, used_ = 0;
  std::vector<Entry> pool_;
  std::vector<std::int32_t> free_;
  std::unordered_map<std::uint64_t, std::int32_t> index_;
  std::int32_t lru_ = -1, mru_ = -1;
  std::array<std::int64_t, kTensorCount> writebacks_{};
};

}  // namespace hbmlab
