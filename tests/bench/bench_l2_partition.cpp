// The engine's L2 against gpu/bench/l2_partition.cu: the same reads replayed through the H100's and
// the H200's presets' PartitionedL2, printed as the share of passes 2–6 that hit, footprint by
// footprint (the GPU's figures: assets/measurements/h100-l2-partition.txt, h200-l2-partition.txt),
// its private sweeps, read-only and read-then-store (h100-l2-private.txt, h200-l2-private.txt), and
// gpu/bench/l2_policy.cu's sequences (h100-l2-policy.txt, h100-l2-policy-store.txt).
// Run: ./build/tests/bench/bench_l2_partition   (--smoke: two footprints)
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/engine/l2.hpp"
#include "sim/spec/gpu_spec.hpp"
#include "tests/bench/bench_args.hpp"

using namespace hbmlab;

namespace {

// As l2_partition.cu: every reading SM takes a slice of the footprint and reads it six times, all
// SMs in step; 4 KiB tiles stand for its 128-byte lines. "random" visits a slice's tiles as
// (a·j + b) mod n, a new multiplier each pass; "cross" reads the partner's slice on odd passes.
// A slice one SM alone reads is that SM's own (TileL2::read's `own`); one two SMs read is shared.
double hit_share(const GpuSpec& gpu, std::string_view mode, double footprint_mb) {
  PartitionedL2 l2(gpu.l2_effective_bytes, gpu.l2_ways, gpu.l2_line_bytes, gpu.l2_partitions);
  const std::int64_t tile = 4096, per_side = gpu.sm_count / 2;
  const std::int64_t readers = mode == "side0" ? per_side : 2 * per_side;
  const std::int64_t tiles = static_cast<std::int64_t>(footprint_mb * 1e6) / tile / readers;
  if (mode != "cross") l2.set_own_footprint(tiles * tile);
  const unsigned long long mult[8] = {1000003, 1000033, 1000037, 1000039, 1000081, 1000099, 1000117, 1000121};
  std::int64_t hit = 0, read = 0;
  for (int pass = 0; pass < 6; ++pass)
    for (std::int64_t j = 0; j < tiles; ++j) {
      const std::int64_t t =
          mode == "random" ? static_cast<std::int64_t>((mult[pass] * j + 7919ull * (pass + 1)) % tiles) : j;
      for (std::int64_t r = 0; r < readers; ++r) {
        const std::int64_t owner = mode == "cross" && pass % 2 == 1 ? (r + per_side) % readers : r;
        const int side = mode == "side0" ? 0 : static_cast<int>(r / per_side);
        const TileL2::ReadOutcome o = l2.read(side, tile_key(owner, Tensor::K, t), tile, mode != "cross");
        if (pass > 0) hit += o.hit_bytes, read += tile;
      }
    }
  return double(hit) / double(read);
}

// As l2_partition.cu's `private` mode: `ctas` CTAs, each reading its own slice of the footprint 8
// times in order (`write`: storing every tile back after reading it, as flash1 stores O_i, ℓ_i, m_i),
// placed as the engine places a launch's first CTAs (PartitionedL2::side_of_sm).
double private_hit_share(const GpuSpec& gpu, std::int64_t ctas, double footprint_mb, bool write = false) {
  PartitionedL2 l2(gpu.l2_effective_bytes, gpu.l2_ways, gpu.l2_line_bytes, gpu.l2_partitions);
  const std::int64_t tile = 4096;
  const std::int64_t tiles = static_cast<std::int64_t>(footprint_mb * 1e6) / tile / ctas;
  l2.set_own_footprint(tiles * tile);
  std::int64_t hit = 0, read = 0;
  for (int pass = 0; pass < 8; ++pass)
    for (std::int64_t j = 0; j < tiles; ++j)
      for (std::int64_t c = 0; c < ctas; ++c) {
        const int side = PartitionedL2::side_of_sm(c, gpu.l2_partition_first_sms, gpu.l2_partition_run_sms);
        const TileL2::ReadOutcome o = l2.read(side, tile_key(c, Tensor::Q, j), tile, true);
        if (write) l2.write(tile_key(c, Tensor::Q, j), tile, true);
        if (pass > 0) hit += o.hit_bytes, read += tile;
      }
  return double(hit) / double(read);
}

// As gpu/bench/l2_policy.cu: every SM reads its own slice of A once (`cold`), twice (`hot`) or three
// times (`hot3`), stores it whole (`store`) or reads then stores it (`read-store`), then reads its
// slice of B once (twice: `hot-b`), then of A again; the share of that last read of A that hits.
double policy_kept(const GpuSpec& gpu, std::string_view sequence, double a_mb, double b_mb) {
  PartitionedL2 l2(gpu.l2_effective_bytes, gpu.l2_ways, gpu.l2_line_bytes, gpu.l2_partitions);
  const std::int64_t tile = 4096, readers = gpu.sm_count, per_side = readers / 2;
  const std::int64_t a_tiles = static_cast<std::int64_t>(a_mb * 1e6) / tile / readers;
  const std::int64_t b_tiles = static_cast<std::int64_t>(b_mb * 1e6) / tile / readers;
  l2.set_own_footprint((a_tiles + b_tiles) * tile);
  std::int64_t hit = 0;
  auto read = [&](Tensor region, std::int64_t tiles, bool count) {
    for (std::int64_t j = 0; j < tiles; ++j)
      for (std::int64_t r = 0; r < readers; ++r) {
        const TileL2::ReadOutcome o = l2.read(static_cast<int>(r / per_side), tile_key(r, region, j), tile, true);
        if (count) hit += o.hit_bytes;
      }
  };
  auto store = [&](Tensor region, std::int64_t tiles) {
    for (std::int64_t j = 0; j < tiles; ++j)
      for (std::int64_t r = 0; r < readers; ++r) l2.write(tile_key(r, region, j), tile, true);
  };
  if (sequence == "store")
    store(Tensor::Q, a_tiles);
  else
    read(Tensor::Q, a_tiles, false);
  if (sequence == "read-store") store(Tensor::Q, a_tiles);
  if (sequence == "hot" || sequence == "hot3") read(Tensor::Q, a_tiles, false);
  if (sequence == "hot3") read(Tensor::Q, a_tiles, false);
  read(Tensor::K, b_tiles, false);
  if (sequence == "hot-b") read(Tensor::K, b_tiles, false);
  read(Tensor::Q, a_tiles, true);
  return double(hit) / double(a_tiles * readers * tile);
}

void print_policy(const GpuSpec& gpu, double a_mb, const std::vector<double>& b_mbs) {
  std::printf("\n%s: A = %.0f MB read once (cold), twice (hot) or 3 times (hot3), B once (twice: hot-b), or A "
              "stored (store), read then stored (read-store); then A: share of A kept\n%-10s",
              gpu.name.c_str(), a_mb, "B MB");
  for (double b : b_mbs) std::printf(" %6.0f", b);
  std::printf("\n");
  for (const char* sequence : {"cold", "hot", "hot3", "hot-b", "store", "read-store"}) {
    std::printf("%-10s", sequence);
    for (double b : b_mbs) std::printf(" %5.1f%%", 100 * policy_kept(gpu, sequence, a_mb, b));
    std::printf("\n");
  }
}

// One preset's tables: the all-SM modes, then the private sweeps, reading and reading then storing
// (the GPU's figures for the footprints named: assets/measurements/<gpu>-l2-partition.txt and
// <gpu>-l2-private.txt, private-read and private-write).
void print_tables(const GpuSpec& gpu, const std::vector<double>& footprints, const std::vector<double>& private_footprints) {
  std::printf("%s: %lld partitions, %lld ways, %.1f MB; share of passes 2-6 that hit\n%-7s", gpu.name.c_str(),
              static_cast<long long>(gpu.l2_partitions), static_cast<long long>(gpu.l2_ways),
              double(gpu.l2_effective_bytes) / 1e6, "F MB");
  for (double f : footprints) std::printf(" %6.0f", f);
  std::printf("\n");
  for (const char* mode : {"all", "cross", "side0", "random"}) {
    std::printf("%-7s", mode);
    for (double f : footprints) std::printf(" %5.1f%%", 100 * hit_share(gpu, mode, f));
    std::printf("\n");
  }
  for (const bool write : {false, true}) {
    std::printf("\n%s: CTAs each sweeping their own slice 8 times%s: share of passes 2-8 that hit\n%-7s", gpu.name.c_str(),
                write ? ", storing every line back" : "", "F MB");
    for (double f : private_footprints) std::printf(" %6.0f", f);
    std::printf("\n");
    for (std::int64_t ctas : {4, 8, 16, 32}) {
      std::printf("%-7s", (std::to_string(ctas) + " CTAs").c_str());
      for (double f : private_footprints) std::printf(" %5.1f%%", 100 * private_hit_share(gpu, ctas, f, write));
      std::printf("\n");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Args args = bench::parse_args(argc, argv);
  if (args.smoke) {
    print_tables(load_gpu("h100-sxm"), {16, 48}, {24, 32});
    print_policy(load_gpu("h100-sxm"), 16, {24});
    return 0;
  }
  // The H200's runs took the H100's footprints scaled by its 60 MB of L2 against 50.
  print_tables(load_gpu("h100-sxm"), {16, 24, 28, 32, 36, 40, 44, 48, 56, 64, 80}, {8, 16, 24, 28, 32, 36, 40});
  // The GPU's: assets/measurements/h100-l2-policy.txt.
  for (const auto& [a, bs] : std::vector<std::pair<double, std::vector<double>>>{
           {4, {24, 28, 32, 36, 40}}, {8, {8, 16, 20, 24, 28, 32, 36, 40, 48, 64}}, {16, {8, 12, 16, 20, 24, 28, 32, 40, 48}},
           {24, {8, 12, 16, 20, 24}}})
    print_policy(load_gpu("h100-sxm"), a, bs);
  std::printf("\n");
  print_tables(load_gpu("h200"), {16, 24, 28, 32, 36, 40, 44, 48, 56, 64, 80, 96}, {8, 16, 24, 28, 32, 36, 40, 44, 48});
  return 0;
}
