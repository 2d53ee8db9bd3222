// TileL2: the L2 cache at tile granularity. An LRU over whole tiles (K_j, Q_i, S_ij, ...) of
// variable size in bytes, set-associative or fully associative, with partial residency,
// write-allocate and write-back of dirty bytes. Used by the timing engine (timing.hpp);
// tests/core/test_timing.cpp checks it on small cases.
//
// Why tiles and not 32-byte sectors: attention kernels always move whole tiles, so every sector
// of a tile gets the same recency. This costs one lookup per tile instead of one per sector (a
// 32 KiB tile is 1,024 sectors), which is what makes GPT-2-sized and 64K-token problems fast.
//
// How residency is decided: by each tile's reuse distance D, the bytes of other tiles touched
// since it was last touched (an LRU stack, kept as a Fenwick tree over touch times).
//   fully associative (ways ≥ lines): exactly an LRU over sectors. The tile's sectors sit at
//     stack depths D … D + size; those above the capacity C are resident, the rest evicted.
//   set-associative (W ways): addresses hash onto C / (W · line) sets, so the D bytes since the
//     last touch put a Poisson(λ = D·W / C) number of other lines into this line's set, and LRU
//     keeps the line while fewer than W did. Residency falls off smoothly around D = C instead of
//     at a cliff, as a real L2 does when many CTAs share K and V at slightly different times.
//   a CTA's own tiles read again (`own`: no other CTA of the kernel touches the tile, and it is in
//     the stack already): a footprint swept over and over, as flash1 sweeps its Q_i, O_i, ℓ_i, m_i
//     once per K_j. The address hash spreads a contiguous footprint over the sets evenly: each whole
//     round of the sets (C / W bytes) puts one line into every set, the same lines every sweep. So
//     the share of a CTA's footprint that makes whole rounds (set_own_footprint) puts a fixed
//     D_own·W / C lines into the set, not a Poisson number, and the rest of it falls where the hash
//     puts it, Poisson as before (gpu/bench/l2_partition.cu: 4 to 32 CTAs each sweeping megabytes
//     stay whole up to 24 MB of a 26 MB partition; docs/design.md, "A CTA's own sweep"). The line
//     stays while that count plus Poisson(λ) of the rest of D is below W: a cliff at D = C for a
//     pure sweep of large footprints; a footprint under one round (many CTAs with small ones) is the
//     16-way smoothing, exactly as for everything else.
// Evicted dirty bytes are written back as the tile sinks: each time a dirty tile's resident fraction
// falls past one of nine levels (kWriteBackLevel: 15/16 … 1/1024), what it has lost so far counts as
// written back, so a kernel that stores more than the L2 holds writes its own tiles back while it
// runs, as the GPU does, not in the kernel that next reads them. The rest is counted when the tile
// is next touched or drops out of reach; what the tiles still in reach have lost when a run ends is
// counted then (evicted_dirty_bytes). The levels only decide when; the bytes are the same.
// Where the GPU preset gives the most dirty bytes its L2 holds (set_dirty_limit: the H100 keeps about
// 24 MB, the H200 28 MB), the oldest dirty tiles past that limit are written back whole and stay,
// clean, as a kernel that stores more than the L2 holds is measured to write back all but that much.
// Approximated: the hash is ideal (uniform over sets), sectors of one tile share one recency.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/algo/step.hpp"

namespace hbmlab {

// A tile's identity: the (batch, head) instance, the tensor and the tile's index in it.
// Bits: instance from 41 (B·H < 2^20), tensor 36 to 40, tile 0 to 35.
static_assert(kTensorCount <= 32, "tile_key keeps the tensor in 5 bits");
inline std::uint64_t tile_key(std::int64_t instance, Tensor tensor, std::int64_t tile) {
  return (static_cast<std::uint64_t>(instance) << 41) | (static_cast<std::uint64_t>(tensor) << 36) |
         static_cast<std::uint64_t>(tile);
}
inline Tensor tile_key_tensor(std::uint64_t key) { return static_cast<Tensor>((key >> 36) & 0x1F); }
// The lines of a tile whose home is L2 partition `home` (bit 35: tile indices stay below 2^35).
inline std::uint64_t tile_half_key(std::uint64_t key, int home) {
  return key | (static_cast<std::uint64_t>(home) << 35);
}

class TileL2 {
public:
  // `ways` = 0, or at least capacity / line: fully associative (exact LRU).
  explicit TileL2(std::int64_t capacity_bytes, std::int64_t ways = 0, std::int64_t line_bytes = 128);

  struct ReadOutcome {
    std::int64_t hit_bytes = 0, miss_bytes = 0;
  };
  // A load of the whole tile: resident bytes hit, the rest is fetched from DRAM and allocated.
  // `own`: one CTA's own tile (no other CTA of the kernel touches it); touched again, its bytes are
  // part of a sweep whose lines load the sets evenly (see above).
  ReadOutcome read(std::uint64_t key, std::int64_t bytes, bool own = false);
  // A store of the whole tile: allocated dirty without a DRAM read (whole sectors are written).
  void write(std::uint64_t key, std::int64_t bytes, bool own = false);
  // A load of `bytes` of a tile of `tile_bytes` (one row of it: other CTAs load the other rows about
  // then): its resident share hits. The tile moves to MRU, whole, with its `last` part; before that
  // nothing changes, so each part sees the tile where the earlier parts found it.
  ReadOutcome read_part(std::uint64_t key, std::int64_t bytes, std::int64_t tile_bytes, bool own, bool last);

  // The running kernel's own tiles per CTA, in bytes: the share of them that makes whole rounds
  // of the sets loads the sets evenly when swept again (see above); 0: none.
  void set_own_footprint(std::int64_t bytes_per_cta);
  // The most dirty bytes held: past it the oldest dirty tiles are written back whole and stay, clean;
  // 0: no limit (a dirty byte goes back only as it is evicted).
  void set_dirty_limit(std::int64_t bytes) { dirty_limit_ = bytes; }

  // Dirty bytes written back to DRAM by evictions since the last call, per tensor: the dirty tiles
  // that sank past a level since then count what they lost (see above).
  std::array<std::int64_t, kTensorCount> take_writebacks();
  std::int64_t dirty_bytes() const;  // still dirty in the cache (not yet written to DRAM)
  // Dirty bytes the tiles in the stack have lost since their last touch, per tensor: written back,
  // though not yet counted (take_writebacks counts them when the tile is touched or leaves). A run
  // that ends adds them to its DRAM writes, so that every byte stored is written back or still dirty.
  std::array<std::int64_t, kTensorCount> evicted_dirty_bytes() const;
  std::int64_t used_bytes() const;   // resident now
  std::int64_t capacity_bytes() const { return capacity_; }
  bool fully_associative() const { return ways_ == 0; }

  // The resident fraction of a tile of `bytes` at reuse distance `distance` (bytes), `swept` of
  // which are bytes of CTAs' own tiles read again; `swept_tile`: the tile is one of those itself.
  double resident_fraction(std::int64_t distance, std::int64_t bytes, std::int64_t swept = 0,
                           bool swept_tile = false) const;

private:
  // Tile key → pool slot: open addressing with linear probing (a node-based map spent a third of
  // the engine's time on every touch chasing pointers).
  class Index {
  public:
    // The slot's value for `key`, inserted as -1 if absent; `inserted` says which.
    std::int32_t& find_or_insert(std::uint64_t key, bool& inserted);
    std::int32_t find(std::uint64_t key) const;  // −1 if absent
    void erase(std::uint64_t key);
    std::size_t size() const { return size_; }

  private:
    static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};  // no tile key has every bit set
    std::size_t home(std::uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
    void grow();
    struct Slot {
      std::uint64_t key = kEmpty;
      std::int32_t value = -1;
    };
    std::vector<Slot> slots_;  // key and value side by side: a lookup reads one cache line, not two
    std::size_t size_ = 0, mask_ = 0;
    int shift_ = 64;
  };

  // A set of tile keys as bits, in pages of 4,096 consecutive keys found through an Index: standard
  // attention's millions of S and P tiles, each an own tile, take a few hundred KB touched in order,
  // where a hash set of their keys took tens of MB and a cache miss a touch.
  class KeySet {
  public:
    bool insert(std::uint64_t key);  // true where `key` was not in the set

  private:
    static constexpr int kPageBits = 12;
    using Page = std::array<std::uint64_t, (std::size_t{1} << kPageBits) / 64>;
    Index pages_;  // key >> kPageBits → its page in bits_
    std::vector<Page> bits_;
    std::uint64_t last_ = ~std::uint64_t{0};  // the page key last asked for, and its page
    std::int32_t last_page_ = -1;
  };

  struct Entry {
    std::uint64_t key = 0;
    std::int64_t bytes = 0, dirty = 0;  // size and dirty bytes at the last touch
    std::int32_t time = 0;              // touch time: position in the Fenwick trees
    std::int32_t prev = -1, next = -1;  // towards LRU (prev) and MRU (next)
    std::int8_t level = -1;             // the sinking queue it waits in (levels passed), −1: none
    bool swept = false;                 // its last touch read a CTA's own tile again (in swept_tree_)
    bool owned = false;                 // its key is in owned_ (no need to ask there again)
  };
  // What a dirty tile's sinking keeps, at its entry's index in sinking_: apart from the entries, so
  // that every touch of a clean tile and every walk of the stack read 40 bytes a tile, not 56.
  struct Sinking {
    std::int64_t written = 0;           // of the dirty bytes, counted written back since (as it sank)
    std::int32_t prev = -1, next = -1;  // in its sinking queue, towards older and newer
  };
  // Of e's dirty bytes, those counted written back as it sank (none where it has none).
  std::int64_t written(std::int32_t e) const { return pool_[e].dirty > 0 ? sinking_[e].written : 0; }
  // The bytes touched since an entry's last touch, and those of them that were own tiles read again.
  struct Distance {
    std::int64_t all = 0, swept = 0;
  };
  // The entry for `key` at its reuse distance, moved to MRU with `bytes` (created if absent).
  // Sets `resident` and `dirty_left` to what survived since the last touch.
  std::int32_t touch(std::uint64_t key, std::int64_t bytes, bool own, std::int64_t& resident, std::int64_t& dirty_left);
  Distance distance(const Entry& e) const;
  double resident_fraction(const Entry& e) const;  // of e now
  void unlink(std::int32_t e);
  void push_mru(std::int32_t e);
  void drop_unreachable();  // tiles nothing of which can still be resident leave the stack
  // Dirty tiles wait in one queue per level of kWriteBackLevels, oldest first: queue k holds those
  // that have passed k levels. A tile stored or touched dirty joins queue 0.
  void sink_push(std::int32_t e, int level);
  void sink_unlink(std::int32_t e);
  void set_head(int level, std::int32_t e);  // e (−1: none) heads queue `level`, not yet looked at
  // A touch moves a tile of `bytes` to MRU: a head below its old place (`old_time`; −1: a tile new to
  // the stack) is that much deeper, one above it deeper by what the tile grew.
  void deepen_heads(std::int64_t old_time, std::int64_t old_bytes, std::int64_t bytes);
  void sink();  // the queues' heads that fell past their level count what they lost
  // The least reuse distance at which `e` can have fallen past level `level` (0 where not known).
  double sink_depth(const Entry& e, int level) const;
  void add(const Entry& e, std::int64_t sign);  // e's bytes into (sign 1) or out of (−1) the trees
  static void tree_add(std::vector<std::int64_t>& tree, std::int64_t time, std::int64_t delta);
  // Bytes of tiles touched at or before `time`.
  static std::int64_t tree_prefix(const std::vector<std::int64_t>& tree, std::int64_t time);
  void renumber();

  std::int64_t capacity_ = 0, ways_ = 0, line_ = 128;
  double sharp_share_ = 0;     // of a CTA's own footprint, the share in whole rounds of the sets
  std::vector<double> cdf_;  // set-associative: P(Poisson(λ) ≤ ways − 1) at λ = 0, step, 2·step, …
  double cdf_step_ = 0, table_per_byte_ = 0;  // λ per table point; table points per byte of depth
  double surely_reachable_depth_ = 0;         // set-associative: shallower tiles are surely reachable
  std::int64_t stack_bytes_ = 0;  // all tiles in the stack, at their full size
  std::int64_t swept_bytes_ = 0;  // those of them whose last touch read an own tile again
  std::vector<Entry> pool_;
  std::vector<Sinking> sinking_;  // beside pool_, index for index
  std::vector<std::int32_t> free_;
  Index index_;
  KeySet owned_;  // the own tiles touched so far
  std::int32_t lru_ = -1, mru_ = -1;
  std::vector<std::int64_t> tree_;        // Fenwick tree of tile sizes by touch time (1-based)
  std::vector<std::int64_t> swept_tree_;  // the same, of the swept entries alone
  std::int64_t next_time_ = 0;
  std::array<std::int64_t, kTensorCount> writebacks_{};
  static constexpr int kWriteBackLevels = 9;
  std::array<std::int32_t, kWriteBackLevels> sink_head_{}, sink_tail_{};
  // Each queue's head: its touch time, and how much deeper it must still get before it can have fallen
  // past its level (bytes; 0 or less: look at it). sink() looks at a head only when that is used up.
  std::array<std::int64_t, kWriteBackLevels> head_time_{}, head_gap_{};
  std::array<double, kWriteBackLevels> sink_lambda_{};  // set-associative: the table's λ just short of each level
  std::int64_t dirty_limit_ = 0;   // see set_dirty_limit
  std::int64_t dirty_queued_ = 0;  // the queued tiles' dirty bytes not yet counted written back
};

// PartitionedL2: the L2 as the GPU builds it, one TileL2 per partition (the H100 has two, each by
// half of the SMs; gpu/bench/l2_partition.cu). Every line has a home partition (the addresses of a
// tile alternate between them, so half of each tile's bytes live on each side). An SM looks up its
// own partition first; a miss on a line homed there goes to DRAM, a miss on a line homed on the
// other side asks that partition, which answers from its copy or from DRAM, and the line is then
// held in both. A line read by SMs on both sides thus takes room in both; stores go to the home.
// With one partition it is a single TileL2 of the whole capacity.
class PartitionedL2 {
public:
  PartitionedL2(std::int64_t capacity_bytes, std::int64_t ways, std::int64_t line_bytes, std::int64_t partitions);

  // A load of the whole tile by an SM next to partition `side`; `own` as TileL2::read.
  TileL2::ReadOutcome read(int side, std::uint64_t key, std::int64_t bytes, bool own = false);
  // A row of a tile (TileL2::read_part), half of it homed on each side as the tile's lines are.
  TileL2::ReadOutcome read_part(int side, std::uint64_t key, std::int64_t bytes, std::int64_t tile_bytes, bool own,
                                bool last);
  void write(std::uint64_t key, std::int64_t bytes, bool own = false);
  void set_own_footprint(std::int64_t bytes_per_cta) {
    for (TileL2& p : parts_) p.set_own_footprint(bytes_per_cta);
  }
  // The GPU's dirty limit over its whole L2: each partition holds its share of it.
  void set_dirty_limit(std::int64_t bytes) {
    for (TileL2& p : parts_) p.set_dirty_limit(bytes / static_cast<std::int64_t>(parts_.size()));
  }
  std::array<std::int64_t, kTensorCount> take_writebacks();
  std::int64_t dirty_bytes() const;
  std::array<std::int64_t, kTensorCount> evicted_dirty_bytes() const;  // TileL2's, both partitions
  int partitions() const { return static_cast<int>(parts_.size()); }

  // The partition beside the engine's SM `sm`, which takes the grid's CTA `sm` first. The GPU gives
  // a launch's first `first` CTAs to SMs by partition 0 (the H100: SMs 124–131 in every launch
  // recorded), then hands consecutive CTAs to one side's SMs in runs (gpu/bench/l2_partition.cu's
  // sides against gpu/bench/cta_schedule.sh's schedules): partition 1 for `run` SMs, 0, 1, …
  static int side_of_sm(std::int64_t sm, std::int64_t first, std::int64_t run) {
    if (sm < first) return 0;
    return static_cast<int>(((sm - first) / run + (first > 0 ? 1 : 0)) % 2);
  }

private:
  // Each half of the tile from the near partition, the near misses of the far half from its home.
  template <typename ReadHalf>
  TileL2::ReadOutcome read_halves(int side, std::uint64_t key, std::int64_t bytes, ReadHalf read_half);

  std::vector<TileL2> parts_;
};

}  // namespace hbmlab
