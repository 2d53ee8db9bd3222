// TileL2: LRU over tiles with partial residency (see l2.hpp for why this equals a sector LRU).
#include "sim/engine/l2.hpp"

#include <algorithm>
#include <cassert>

namespace hbmlab {

TileL2::TileL2(std::int64_t capacity_bytes) : capacity_(capacity_bytes) {
  assert(capacity_bytes > 0 && "TileL2 needs a positive capacity: check numbers.l2_effective_bytes");
}

void TileL2::unlink(std::int32_t e) {
  Entry& x = pool_[e];
  if (x.prev >= 0) pool_[x.prev].next = x.next; else lru_ = x.next;
  if (x.next >= 0) pool_[x.next].prev = x.prev; else mru_ = x.prev;
  x.prev = x.next = -1;
}

void TileL2::push_mru(std::int32_t e) {
  Entry& x = pool_[e];
  x.prev = mru_;
  x.next = -1;
  if (mru_ >= 0) pool_[mru_].next = e; else lru_ = e;
  mru_ = e;
}

std::int32_t TileL2::touch(std::uint64_t key) {
  auto [it, inserted] = index_.try_emplace(key, -1);
  if (!inserted) {
    unlink(it->second);
    push_mru(it->second);
    return it->second;
  }
  std::int32_t e;
  if (!free_.empty()) {
    e = free_.back();
    free_.pop_back();
    pool_[e] = Entry{};
  } else {
    e = static_cast<std::int32_t>(pool_.size());
    pool_.emplace_back();
  }
  pool_[e].key = key;
  it->second = e;
  push_mru(e);
  return e;
}

// Evicts from the LRU end until the cache fits; the tile just touched (`keep`) goes last, and
// only if it alone is larger than the cache.
void TileL2::evict_down_to_capacity(std::int32_t keep) {
  while (used_ > capacity_) {
    std::int32_t victim = lru_;
    if (victim == keep && pool_[victim].next >= 0) victim = pool_[victim].next;
    Entry& v = pool_[victim];
    const std::int64_t out = std::min(v.resident, used_ - capacity_);
    // Every sector of a tile has the same recency, so dirty sectors leave in proportion.
    const std::int64_t dirty_out =
        v.resident > 0 ? static_cast<std::int64_t>(double(v.dirty) * double(out) / double(v.resident)) : 0;
    v.resident -= out;
    v.dirty -= dirty_out;
    used_ -= out;
    writebacks_[static_cast<int>(tile_key_tensor(v.key))] += dirty_out;
    if (v.resident == 0) {
      writebacks_[static_cast<int>(tile_key_tensor(v.key))] += v.dirty;
      unlink(victim);
      index_.erase(v.key);
      free_.push_back(victim);
    }
  }
}

TileL2::ReadOutcome TileL2::read(std::uint64_t key, std::int64_t bytes) {
  const std::int32_t e = touch(key);
  ReadOutcome out;
  Entry& x = pool_[e];
  out.hit_bytes = std::min(x.resident, bytes);
  out.miss_bytes = bytes - out.hit_bytes;
  if (x.resident < bytes) {
    used_ += bytes - x.resident;
    x.resident = bytes;
  }
  evict_down_to_capacity(e);
  return out;
}

void TileL2::write(std::uint64_t key, std::int64_t bytes) {
  const std::int32_t e = touch(key);
  Entry& x = pool_[e];
  if (x.resident < bytes) {
    used_ += bytes - x.resident;
    x.resident = bytes;
  }
  x.dirty = x.resident;
  evict_down_to_capacity(e);
}

std::array<std::int64_t, kTensorCount> TileL2::take_writebacks() {
  std::array<std::int64_t, kTensorCount> out = writebacks_;
  writebacks_ = {};
  return out;
}

std::int64_t TileL2::dirty_bytes() const {
  std::int64_t sum = 0;
  for (std::int32_t e = lru_; e >= 0; e = pool_[e].next) sum += pool_[e].dirty;
  return sum;
}

}  // namespace hbmlab
