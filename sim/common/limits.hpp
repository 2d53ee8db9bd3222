// What one run of hbmlab may ask of the machine. Every number a user gives (an option, a scenario,
// a preset, a measurement or mask file) is checked against these before the work starts, and a
// request past one is an InputError (exit 2) naming the option and the limit, never minutes of work
// or an out-of-memory kill. Times in the comments are for one core of a 2020s laptop.
#pragma once

#include <cstdint>
#include <limits>

namespace hbmlab {

// Files: scenarios, presets, measurement files and mask files are read whole; the largest recorded
// measurement file is half a MiB.
inline constexpr std::int64_t kMaxInputFileBytes = std::int64_t{64} << 20;

// Counting streams every step of one instance: about 100 ns per block pair, so 2^26 pairs take
// seconds (N = 512K tokens with 64 × 64 blocks).
inline constexpr std::int64_t kMaxCountedPairs = std::int64_t{1} << 26;

// The timing engine keeps one instance's plan in memory (about 0.5 KiB per block pair) and replays
// every CTA of every instance (about 0.3 µs per block pair): at most this many pairs in one plan and
// this many over all instances, B·H × Tr × Tc.
inline constexpr std::int64_t kMaxPlanPairs = std::int64_t{1} << 20;
inline constexpr std::int64_t kMaxEngineTotalPairs = std::int64_t{1} << 26;

// The CPU numerics: a full check costs NQ·N·d multiply-adds (2^31: seconds); a sampled one keeps
// Q, K, V of one head in fp64, N·d values each.
inline constexpr std::int64_t kMaxFullCheckWork = std::int64_t{1} << 31;
inline constexpr std::int64_t kMaxNumericsElements = std::int64_t{1} << 25;

// Sweeps: points of `hbmlab sweep` (each one runs the timing engine) and values of each `hbmlab
// bounds` list. Their total work is held to the limits above as well.
// A sweep runs on all cores, so its engine work may be a few runs' worth; `bounds` only counts, so
// its points together may stream a few runs' worth of block pairs.
inline constexpr std::int64_t kMaxSweepPoints = 4096;
inline constexpr std::int64_t kMaxSweepEnginePairs = std::int64_t{1} << 28;
inline constexpr std::int64_t kMaxSweepValues = 64;
inline constexpr std::int64_t kMaxBoundsPairs = std::int64_t{1} << 28;

// SRAM per SM (--sram-bytes, a scenario's sram_bytes): a GPU has a few hundred KiB (the H100 228);
// the model takes up to 1 GiB, enough for M to reach N·d on long sequences, and refuses more.
inline constexpr std::int64_t kMaxSramBytes = std::int64_t{1} << 30;

// a × b for non-negative a and b, or the largest int64 when that overflows: sizes compared with the
// limits above are products of user numbers that may not fit.
inline std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? std::numeric_limits<std::int64_t>::max() : product;
}

}  // namespace hbmlab
