// The engine's L2 against gpu/bench/l2_partition.cu: the same reads replayed through the H100's and
// the H200's presets' PartitionedL2, printed as the share of passes 2–6 that hit, footprint by
// footprint (the GPU's figures: assets/measurements/h100-l2-partition.txt, h200-l2-partition.txt).
// Run: ./build/tests/bench/bench_l2_partition   (--smoke: two footprints)
#include <cstdio>
#include <string>
#include <string_view>
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
// times in order, placed as the engine places a launch's first CTAs (PartitionedL2::side_of_sm).
double private_hit_share(const GpuSpec& gpu, std::int64_t ctas, double footprint_mb) {
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
        if (pass > 0) hit += o.hit_bytes, read += tile;
      }
  return double(hit) / double(read);
}

// One preset's two tables: the all-SM modes, then the private sweeps (the GPU's figures for the
// footprints named: assets/measurements/<gpu>-l2-partition.txt and <gpu>-l2-private.txt).
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
  std::printf("\n%s: CTAs each sweeping their own slice 8 times: share of passes 2-8 that hit\n%-7s", gpu.name.c_str(), "F MB");
  for (double f : private_footprints) std::printf(" %6.0f", f);
  std::printf("\n");
  for (std::int64_t ctas : {4, 8, 16, 32}) {
    std::printf("%-7s", (std::to_string(ctas) + " CTAs").c_str());
    for (double f : private_footprints) std::printf(" %5.1f%%", 100 * private_hit_share(gpu, ctas, f));
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Args args = bench::parse_args(argc, argv);
  if (args.smoke) {
    print_tables(load_gpu("h100-sxm"), {16, 48}, {24, 32});
    return 0;
  }
  // The H200's runs took the H100's footprints scaled by its 60 MB of L2 against 50.
  print_tables(load_gpu("h100-sxm"), {16, 24, 28, 32, 36, 40, 44, 48, 56, 64, 80}, {8, 16, 24, 28, 32, 36, 40});
  std::printf("\n");
  print_tables(load_gpu("h200"), {16, 24, 28, 32, 36, 40, 44, 48, 56, 64, 80, 96}, {8, 16, 24, 28, 32, 36, 40, 44, 48});
  return 0;
}
