// TileL2: an LRU stack of tiles with reuse distances (see l2.hpp for the model).
#include "sim/engine/l2.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <limits>

namespace hbmlab {
namespace {

// P(X ≤ k) for X ~ Poisson(λ): the chance that fewer than k + 1 other lines fell into the set.
double poisson_cdf(double lambda, std::int64_t k) {
  if (k < 0) return 0.0;
  double term = std::exp(-lambda), sum = term;
  for (std::int64_t n = 1; n <= k; ++n) {
    term *= lambda / double(n);
    sum += term;
  }
  return std::min(sum, 1.0);
}

// std::llround for x ≥ 0, without the library call (it was 4 % of the engine's time): halves
// round up, and x − ⌊x⌋ is exact below 2^52, so the result is llround's.
std::int64_t round_bytes(double x) {
  const double whole = std::floor(x);
  return static_cast<std::int64_t>(x - whole >= 0.5 ? whole + 1.0 : whole);
}

constexpr double kUnreachable = 1e-9;  // below this resident fraction a tile leaves the stack
// The resident fractions at which a sinking dirty tile counts what it has lost as written back.
constexpr double kWriteBackLevel[] = {15.0 / 16, 7.0 / 8, 3.0 / 4, 1.0 / 2, 1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 64, 1.0 / 1024};
constexpr std::size_t kCdfPoints = 16384;  // table of P(Poisson(λ) ≤ ways − 1) over λ

}  // namespace

TileL2::TileL2(std::int64_t capacity_bytes, std::int64_t ways, std::int64_t line_bytes)
    : capacity_(capacity_bytes), ways_(ways), line_(line_bytes) {
  assert(capacity_bytes > 0 && "TileL2 needs a positive capacity: check numbers.l2_effective_bytes");
  if (ways_ * line_ >= capacity_) ways_ = 0;  // one set: fully associative
  tree_.assign(4097, 0);
  swept_tree_.assign(4097, 0);
  static_assert(std::size(kWriteBackLevel) == kWriteBackLevels);
  sink_head_.fill(-1);
  sink_tail_.fill(-1);
  if (ways_ > 0) {
    // The Poisson tail is looked up, not summed, on every touch: the table runs to 12 standard
    // deviations past the mean, where the chance is far below kUnreachable, and linear
    // interpolation between its points is off by less than 1e-6 (a fraction of a byte per tile).
    const double max_lambda = double(ways_) + 12.0 * std::sqrt(double(ways_)) + 20.0;
    cdf_step_ = max_lambda / double(kCdfPoints - 1);
    cdf_.resize(kCdfPoints);
    for (std::size_t n = 0; n < kCdfPoints; ++n) cdf_[n] = poisson_cdf(double(n) * cdf_step_, ways_ - 1);
    table_per_byte_ = double(ways_) / double(capacity_) / cdf_step_;
    // Depths well short of where the tail falls below kUnreachable: a tile there is reachable
    // without a lookup (drop_unreachable asks on every touch).
    std::size_t n = 0;
    while (n < kCdfPoints && cdf_[n] > kUnreachable) ++n;
    surely_reachable_depth_ = 0.99 * double(n > 0 ? n - 1 : 0) / table_per_byte_;
    for (int level = 0; level < kWriteBackLevels; ++level) {
      std::size_t m = 0;
      while (m < kCdfPoints && cdf_[m] > kWriteBackLevel[level]) ++m;
      sink_lambda_[level] = double(m > 0 ? m - 1 : 0);  // in table points: below it the tile holds more
    }
  }
}

double TileL2::resident_fraction(std::int64_t distance, std::int64_t bytes, std::int64_t swept, bool swept_tile) const {
  if (ways_ == 0) {  // sectors at depths distance … distance + bytes; those above the capacity stay
    if (bytes <= 0) return distance < capacity_ ? 1.0 : 0.0;
    return std::clamp(double(capacity_ - distance) / double(bytes), 0.0, 1.0);
  }
  const double half = 0.5 * double(bytes);  // depth to the tile's middle sector
  if (sharp_share_ == 0 || (swept == 0 && !swept_tile)) {  // Poisson(λ) others: the table
    const double x = (double(distance) + half) * table_per_byte_;
    if (x >= double(kCdfPoints - 1)) return 0.0;
    const auto n = static_cast<std::size_t>(x);
    const double t = x - double(n);
    return cdf_[n] + t * (cdf_[n + 1] - cdf_[n]);
  }
  // The sweep's lines other than the tile's own: the sharp share of them a fixed count in every set,
  // the rest (each CTA's footprint past its last whole round of the sets, which falls where the hash
  // puts it) with the rest of the distance Poisson(λ) lines.
  const double per_byte = double(ways_) / double(capacity_);
  const double sweep_lines =
      std::max(0.0, (double(swept) + (swept_tile ? half : 0.0)) * per_byte - (swept_tile ? 1.0 : 0.0));
  const double fixed = sharp_share_ * sweep_lines;
  const double lambda =
      (double(distance - swept) + (swept_tile ? 0.0 : half)) * per_byte + (1.0 - sharp_share_) * sweep_lines;
  // x others in the set: the line stays while x ≤ W − 1 and not from x = W on (a fixed count is a
  // mean over sets: in between, a share of them).
  const double full = double(ways_ - 1), none = double(ways_);
  if (fixed >= none) return 0.0;
  double p = std::exp(-lambda), sum = 0;
  for (std::int64_t k = 0; fixed + double(k) < none; ++k) {
    const double x = fixed + double(k);
    sum += p * (x <= full ? 1.0 : none - x);
    p *= lambda / double(k + 1);
  }
  return std::min(sum, 1.0);
}

void TileL2::set_own_footprint(std::int64_t bytes_per_cta) {
  sharp_share_ = 0;
  if (ways_ == 0 || bytes_per_cta <= 0) return;
  // u lines a set from each CTA's sweep: ⌊u⌋ in every set, one more in a share q = u − ⌊u⌋ of them,
  // which sets falling where the hash puts each CTA's footprint. Over n CTAs' sweeps that is
  // n⌊u⌋ + Binomial(n, q) lines; the engine keeps the binomial's mean and variance as a fixed
  // n·q² plus Poisson(n·q(1 − q)), so the fixed share of the n·u lines is (⌊u⌋ + q²) / u.
  const double u = double(bytes_per_cta) * double(ways_) / double(capacity_);
  const double q = u - std::floor(u);
  sharp_share_ = (std::floor(u) + q * q) / u;
}

double TileL2::resident_fraction(const Entry& e) const {
  const Distance d = distance(e);
  return resident_fraction(d.all, e.bytes, d.swept, e.swept);
}

std::int32_t& TileL2::Index::find_or_insert(std::uint64_t key, bool& inserted) {
  if (2 * (size_ + 1) > slots_.size()) grow();  // at most half full: probes stay short
  std::size_t i = home(key);
  for (; slots_[i].key != kEmpty; i = (i + 1) & mask_)
    if (slots_[i].key == key) {
      inserted = false;
      return slots_[i].value;
    }
  slots_[i] = {key, -1};
  ++size_;
  inserted = true;
  return slots_[i].value;
}

std::int32_t TileL2::Index::find(std::uint64_t key) const {
  if (slots_.empty()) return -1;
  for (std::size_t i = home(key); slots_[i].key != kEmpty; i = (i + 1) & mask_)
    if (slots_[i].key == key) return slots_[i].value;
  return -1;
}

// Backward-shift deletion: later keys of the probe run move up into the hole, so that lookups
// never need tombstones.
void TileL2::Index::erase(std::uint64_t key) {
  std::size_t hole = home(key);
  while (slots_[hole].key != key) {
    assert(slots_[hole].key != kEmpty && "erasing a key that is not in the index");
    hole = (hole + 1) & mask_;
  }
  for (std::size_t i = (hole + 1) & mask_; slots_[i].key != kEmpty; i = (i + 1) & mask_) {
    const std::size_t h = home(slots_[i].key);
    // slots_[i] may move to the hole only if its home is not in (hole, i] (cyclically).
    if (((i - h) & mask_) >= ((i - hole) & mask_)) {
      slots_[hole] = slots_[i];
      hole = i;
    }
  }
  slots_[hole] = Slot{};
  --size_;
}

void TileL2::Index::grow() {
  std::vector<Slot> old = std::move(slots_);
  const std::size_t capacity = std::max<std::size_t>(1024, 2 * old.size());
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  for (const Slot& slot : old) {
    if (slot.key == kEmpty) continue;
    std::size_t i = home(slot.key);
    while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
    slots_[i] = slot;
  }
}

bool TileL2::KeySet::insert(std::uint64_t key) {
  const std::uint64_t page_key = key >> kPageBits;
  if (page_key != last_) {
    bool inserted = false;
    std::int32_t& page = pages_.find_or_insert(page_key, inserted);
    if (inserted) {
      page = static_cast<std::int32_t>(bits_.size());
      bits_.emplace_back();
    }
    last_ = page_key;
    last_page_ = page;
  }
  const std::uint64_t bit = key & ((std::uint64_t{1} << kPageBits) - 1);
  std::uint64_t& word = bits_[static_cast<std::size_t>(last_page_)][bit / 64];
  const std::uint64_t mask = std::uint64_t{1} << (bit % 64);
  const bool absent = (word & mask) == 0;
  word |= mask;
  return absent;
}

void TileL2::tree_add(std::vector<std::int64_t>& tree, std::int64_t time, std::int64_t delta) {
  for (std::size_t i = static_cast<std::size_t>(time) + 1; i < tree.size(); i += i & (~i + 1)) tree[i] += delta;
}

std::int64_t TileL2::tree_prefix(const std::vector<std::int64_t>& tree, std::int64_t time) {
  std::int64_t sum = 0;
  for (std::size_t i = static_cast<std::size_t>(time) + 1; i > 0; i -= i & (~i + 1)) sum += tree[i];
  return sum;
}

void TileL2::add(const Entry& e, std::int64_t sign) {
  tree_add(tree_, e.time, sign * e.bytes);
  stack_bytes_ += sign * e.bytes;
  if (e.swept) {
    tree_add(swept_tree_, e.time, sign * e.bytes);
    swept_bytes_ += sign * e.bytes;
  }
}

TileL2::Distance TileL2::distance(const Entry& e) const {
  Distance d{stack_bytes_ - tree_prefix(tree_, e.time), 0};
  if (swept_bytes_ > 0) d.swept = swept_bytes_ - tree_prefix(swept_tree_, e.time);
  return d;
}

// Touch times run out: number the tiles 0 … n − 1 from LRU to MRU and rebuild the trees, in linear
// time: each node takes its own tile's bytes, then passes its sum up to its parent.
void TileL2::renumber() {
  const std::size_t n = index_.size();
  tree_.assign(std::max<std::size_t>(4 * n, 4096) + 1, 0);
  swept_tree_.assign(tree_.size(), 0);
  std::int64_t t = 0;
  for (std::int32_t e = lru_; e >= 0; e = pool_[e].next) {
    Entry& x = pool_[e];
    x.time = static_cast<std::int32_t>(t++);
    tree_[static_cast<std::size_t>(x.time) + 1] = x.bytes;
    if (x.swept) swept_tree_[static_cast<std::size_t>(x.time) + 1] = x.bytes;
  }
  for (std::size_t i = 1; i < tree_.size(); ++i) {
    const std::size_t parent = i + (i & (~i + 1));
    if (parent < tree_.size()) {
      tree_[parent] += tree_[i];
      swept_tree_[parent] += swept_tree_[i];
    }
  }
  next_time_ = t;
  for (int level = 0; level < kWriteBackLevels; ++level)
    if (sink_head_[level] >= 0) head_time_[level] = pool_[sink_head_[level]].time;
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

std::int32_t TileL2::touch(std::uint64_t key, std::int64_t bytes, bool own, std::int64_t& resident,
                           std::int64_t& dirty_left) {
  if (next_time_ + 1 >= static_cast<std::int64_t>(tree_.size())) renumber();
  bool inserted = false;
  std::int32_t& slot = index_.find_or_insert(key, inserted);
  std::int32_t e;
  std::int64_t old_time = -1, old_bytes = 0;
  if (!inserted) {
    e = slot;
    Entry& x = pool_[e];
    old_time = x.time;
    old_bytes = x.bytes;
    const Distance d = distance(x);
    const double f = resident_fraction(d.all, x.bytes, d.swept, own);
    resident = round_bytes(f * double(x.bytes));
    // What is still dirty: never more than it has not counted as it sank (a tile above it that
    // shrinks can lift it a little).
    const std::int64_t counted = written(e);
    dirty_left = std::min(round_bytes(f * double(x.dirty)), x.dirty - counted);
    // What it lost since its last touch, less what it counted as it sank.
    writebacks_[static_cast<int>(tile_key_tensor(key))] += x.dirty - dirty_left - counted;
    sink_unlink(e);  // takes out of dirty_queued_ what the tile put in: its bytes not yet counted
    if (x.dirty > 0) sinking_[e].written = 0;
    add(x, -1);
    unlink(e);
  } else {
    resident = dirty_left = 0;
    if (!free_.empty()) {
      e = free_.back();
      free_.pop_back();
      pool_[e] = Entry{};
      sinking_[e] = Sinking{};
    } else {
      e = static_cast<std::int32_t>(pool_.size());
      pool_.emplace_back();
      sinking_.emplace_back();
    }
    pool_[e].key = key;
    slot = e;
  }
  // Swept: an own tile touched before, whether or not it is still in the stack (a sweep larger than
  // the cache drops its tiles before they come round again).
  Entry& x = pool_[e];
  bool first_touch = inserted;
  if (own && x.owned) {
    first_touch = false;
  } else if (own) {
    first_touch = owned_.insert(key);
    x.owned = true;
  }
  x.bytes = bytes;
  x.time = static_cast<std::int32_t>(next_time_++);
  x.swept = own && !first_touch;
  add(x, 1);
  push_mru(e);
  deepen_heads(old_time, old_bytes, bytes);
  return e;
}

void TileL2::deepen_heads(std::int64_t old_time, std::int64_t old_bytes, std::int64_t bytes) {
  for (int level = 0; level < kWriteBackLevels; ++level)
    if (sink_head_[level] >= 0)
      head_gap_[level] -= old_time < head_time_[level] ? bytes : std::max<std::int64_t>(0, bytes - old_bytes);
}

// The LRU tile's distance is everything above it; once nothing of it can be resident it leaves,
// and its dirty bytes are written back.
void TileL2::drop_unreachable() {
  while (lru_ >= 0 && lru_ != mru_) {
    Entry& v = pool_[lru_];
    const std::int64_t distance = stack_bytes_ - v.bytes, swept = swept_bytes_ - (v.swept ? v.bytes : 0);
    if (ways_ > 0) {
      if (sharp_share_ == 0 || (swept == 0 && !v.swept)) {
        if (double(stack_bytes_) - 0.5 * double(v.bytes) < surely_reachable_depth_) break;
      } else {
        // A sweep's fixed count reaches W long before the Poisson tail thins out, so the depth alone
        // says nothing; but with at most W − 2 fixed lines and λ < 20 the line stays in at least
        // P(Poisson(20) ≤ 1) = 4e-8 of the sets, which is surely reachable, without the sum.
        const double per_byte = double(ways_) / double(capacity_), half = 0.5 * double(v.bytes);
        const double lines = (double(swept) + (v.swept ? half : 0.0)) * per_byte;
        const double lambda = (double(distance - swept) + (v.swept ? 0.0 : half)) * per_byte;
        if (sharp_share_ * lines <= double(ways_ - 2) && lambda + (1.0 - sharp_share_) * lines < 20.0) break;
      }
    }
    if (resident_fraction(distance, v.bytes, swept, v.swept) > (ways_ == 0 ? 0.0 : kUnreachable)) break;
    const std::int32_t victim = lru_;
    writebacks_[static_cast<int>(tile_key_tensor(v.key))] += v.dirty - written(victim);
    sink_unlink(victim);
    add(v, -1);
    unlink(victim);
    index_.erase(v.key);
    free_.push_back(victim);
  }
}

TileL2::ReadOutcome TileL2::read(std::uint64_t key, std::int64_t bytes, bool own) {
  std::int64_t resident = 0, dirty_left = 0;
  const std::int32_t e = touch(key, bytes, own, resident, dirty_left);
  ReadOutcome out;
  out.hit_bytes = std::min(resident, bytes);
  out.miss_bytes = bytes - out.hit_bytes;
  pool_[e].dirty = std::min(dirty_left, bytes);  // a read fills the tile; its dirty sectors stay dirty
  if (pool_[e].dirty > 0) sink_push(e, 0);
  drop_unreachable();
  return out;
}

TileL2::ReadOutcome TileL2::read_part(std::uint64_t key, std::int64_t bytes, std::int64_t tile_bytes, bool own,
                                      bool last) {
  double f = 0.0;
  if (last) {
    const ReadOutcome whole = read(key, tile_bytes, own);
    f = tile_bytes > 0 ? double(whole.hit_bytes) / double(tile_bytes) : 0.0;
  } else if (const std::int32_t e = index_.find(key); e >= 0) {
    f = resident_fraction(pool_[e]);
  }
  ReadOutcome out;
  out.hit_bytes = std::min(bytes, round_bytes(f * double(bytes)));
  out.miss_bytes = bytes - out.hit_bytes;
  return out;
}

void TileL2::write(std::uint64_t key, std::int64_t bytes, bool own) {
  std::int64_t resident = 0, dirty_left = 0;
  const std::int32_t e = touch(key, bytes, own, resident, dirty_left);
  // Sectors still dirty are overwritten in the L2: one write-back for both stores.
  pool_[e].dirty = bytes;
  if (bytes > 0) sink_push(e, 0);
  drop_unreachable();
}

double TileL2::sink_depth(const Entry& e, int level) const {
  if (ways_ == 0) return double(capacity_) - kWriteBackLevel[level] * double(e.bytes);  // f = (C − D) / bytes
  // With own tiles swept, their fixed lines can bring a tile down sooner than the Poisson table says.
  if (sharp_share_ > 0) return 0.0;
  return sink_lambda_[static_cast<std::size_t>(level)] / table_per_byte_ - 0.5 * double(e.bytes);
}

void TileL2::sink_push(std::int32_t e, int level) {
  Sinking& s = sinking_[e];
  dirty_queued_ += pool_[e].dirty - s.written;
  pool_[e].level = static_cast<std::int8_t>(level);
  s.prev = sink_tail_[level];
  s.next = -1;
  if (s.prev >= 0) sinking_[s.prev].next = e; else set_head(level, e);
  sink_tail_[level] = e;
}

void TileL2::sink_unlink(std::int32_t e) {
  Entry& x = pool_[e];
  if (x.level < 0) return;
  Sinking& s = sinking_[e];
  dirty_queued_ -= x.dirty - s.written;
  if (s.prev >= 0) sinking_[s.prev].next = s.next; else set_head(x.level, s.next);
  if (s.next >= 0) sinking_[s.next].prev = s.prev; else sink_tail_[x.level] = s.prev;
  s.prev = s.next = -1;
  x.level = -1;
}

void TileL2::set_head(int level, std::int32_t e) {
  sink_head_[level] = e;
  head_gap_[level] = 0;
  if (e >= 0) head_time_[level] = pool_[e].time;
}

// A queue's tiles were stored or passed their last level about in the order they sank since, so
// its head is the first to fall past the next level: the queue is looked at from the head only
// (a tile behind one that has not fallen waits a little longer, never for its bytes).
void TileL2::sink() {
  for (int level = 0; level < kWriteBackLevels; ++level) {
    for (std::int32_t e = sink_head_[level]; e >= 0 && head_gap_[level] <= 0; e = sink_head_[level]) {
      Entry& x = pool_[e];
      Sinking& s = sinking_[e];
      const Distance d = distance(x);
      const double f = resident_fraction(d.all, x.bytes, d.swept, x.swept);
      if (f > kWriteBackLevel[level]) {  // not yet: it cannot have before it is this much deeper
        head_gap_[level] = static_cast<std::int64_t>(std::max(0.0, sink_depth(x, level) - double(d.all)));
        break;
      }
      const std::int64_t lost = std::max(s.written, x.dirty - round_bytes(f * double(x.dirty)));
      sink_unlink(e);
      writebacks_[static_cast<int>(tile_key_tensor(x.key))] += lost - s.written;
      s.written = lost;
      int next = level + 1;
      while (next < kWriteBackLevels && f <= kWriteBackLevel[next]) ++next;
      if (next < kWriteBackLevels) sink_push(e, next);
    }
  }
  // Past the dirty limit, the oldest dirty tiles (the heads of the deepest queues) go back whole.
  for (int level = kWriteBackLevels - 1; dirty_limit_ > 0 && dirty_queued_ > dirty_limit_ && level >= 0; --level) {
    for (std::int32_t e = sink_head_[level]; e >= 0 && dirty_queued_ > dirty_limit_; e = sink_head_[level]) {
      Entry& x = pool_[e];
      sink_unlink(e);
      writebacks_[static_cast<int>(tile_key_tensor(x.key))] += x.dirty - sinking_[e].written;
      sinking_[e].written = x.dirty;
    }
  }
}

std::array<std::int64_t, kTensorCount> TileL2::take_writebacks() {
  sink();
  std::array<std::int64_t, kTensorCount> out = writebacks_;
  writebacks_ = {};
  return out;
}

std::int64_t TileL2::dirty_bytes() const {
  std::int64_t sum = 0;
  for (std::int32_t e = lru_; e >= 0; e = pool_[e].next)
    sum += std::min(round_bytes(resident_fraction(pool_[e]) * double(pool_[e].dirty)), pool_[e].dirty - written(e));
  return sum;
}

std::array<std::int64_t, kTensorCount> TileL2::evicted_dirty_bytes() const {
  std::array<std::int64_t, kTensorCount> out{};
  for (std::int32_t e = lru_; e >= 0; e = pool_[e].next) {
    const Entry& x = pool_[e];
    if (x.dirty > 0)
      out[static_cast<int>(tile_key_tensor(x.key))] +=
          std::max<std::int64_t>(0, x.dirty - round_bytes(resident_fraction(x) * double(x.dirty)) - written(e));
  }
  return out;
}

std::int64_t TileL2::used_bytes() const {
  std::int64_t sum = 0;
  for (std::int32_t e = lru_; e >= 0; e = pool_[e].next)
    sum += round_bytes(resident_fraction(pool_[e]) * double(pool_[e].bytes));
  return sum;
}

PartitionedL2::PartitionedL2(std::int64_t capacity_bytes, std::int64_t ways, std::int64_t line_bytes,
                             std::int64_t partitions) {
  assert(partitions == 1 || partitions == 2);
  for (std::int64_t p = 0; p < partitions; ++p)
    parts_.emplace_back(capacity_bytes / partitions, ways, line_bytes);
}

TileL2::ReadOutcome PartitionedL2::read(int side, std::uint64_t key, std::int64_t bytes, bool own) {
  if (parts_.size() == 1) return parts_.front().read(key, bytes, own);
  return read_halves(side, key, bytes, [&](TileL2& part, std::uint64_t k, int home) {
    return part.read(k, home == 0 ? bytes / 2 : bytes - bytes / 2, own);
  });
}

TileL2::ReadOutcome PartitionedL2::read_part(int side, std::uint64_t key, std::int64_t bytes, std::int64_t tile_bytes,
                                             bool own, bool last) {
  if (parts_.size() == 1) return parts_.front().read_part(key, bytes, tile_bytes, own, last);
  return read_halves(side, key, bytes, [&](TileL2& part, std::uint64_t k, int home) {
    return part.read_part(k, home == 0 ? bytes / 2 : bytes - bytes / 2,
                          home == 0 ? tile_bytes / 2 : tile_bytes - tile_bytes / 2, own, last);
  });
}

template <typename ReadHalf>
TileL2::ReadOutcome PartitionedL2::read_halves(int side, std::uint64_t key, std::int64_t bytes, ReadHalf read_half) {
  TileL2::ReadOutcome out;
  const std::int64_t half[2] = {bytes / 2, bytes - bytes / 2};
  for (int home = 0; home < 2; ++home) {
    const std::uint64_t k = tile_half_key(key, home);
    const TileL2::ReadOutcome near = read_half(parts_[side], k, home);
    out.hit_bytes += near.hit_bytes;
    if (home == side || near.miss_bytes == 0) {
      out.miss_bytes += near.miss_bytes;
      continue;
    }
    // The home partition answers the near misses from its own copy, refreshed by the request.
    const TileL2::ReadOutcome far = read_half(parts_[home], k, home);
    const std::int64_t far_hits = half[home] > 0 ? near.miss_bytes * far.hit_bytes / half[home] : 0;
    out.hit_bytes += far_hits;
    out.miss_bytes += near.miss_bytes - far_hits;
  }
  return out;
}

void PartitionedL2::write(std::uint64_t key, std::int64_t bytes, bool own) {
  if (parts_.size() == 1) return parts_.front().write(key, bytes, own);
  parts_[0].write(tile_half_key(key, 0), bytes / 2, own);
  parts_[1].write(tile_half_key(key, 1), bytes - bytes / 2, own);
}

std::array<std::int64_t, kTensorCount> PartitionedL2::take_writebacks() {
  std::array<std::int64_t, kTensorCount> out{};
  for (TileL2& p : parts_) {
    const auto wb = p.take_writebacks();
    for (int t = 0; t < kTensorCount; ++t) out[t] += wb[t];
  }
  return out;
}

std::array<std::int64_t, kTensorCount> PartitionedL2::evicted_dirty_bytes() const {
  std::array<std::int64_t, kTensorCount> out{};
  for (const TileL2& p : parts_) {
    const auto lost = p.evicted_dirty_bytes();
    for (int t = 0; t < kTensorCount; ++t) out[t] += lost[t];
  }
  return out;
}

std::int64_t PartitionedL2::dirty_bytes() const {
  std::int64_t sum = 0;
  for (const TileL2& p : parts_) sum += p.dirty_bytes();
  return sum;
}

}  // namespace hbmlab
