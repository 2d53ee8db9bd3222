// The engine's L2 on the GPU's own order: replays the tile accesses of kv_drift's raw records
// (gpu/bench/kv_drift.cu: each CTA's K_j, V_j reads at the %globaltimer stamps the GPU took, Q_i
// with an item's first tile, O_i stored after its last; K/V tiles of 128 × 128, or 128 × 64 where
// the record says so) through the preset's PartitionedL2, each
// access from the partition beside the SM that made it (the sides gpu/bench/l2_partition.sh
// measured), with 0, 3, 6, 8 and 10 of the preset's 16 ways set aside as `hbmlab validate` models
// `l2_set_aside_bytes` (0, 9.375, 18.75, 25 and 31.25 MiB on the H100). Set beside the DRAM reads
// ncu counted for the same sweeps (assets/measurements/h100-kv-drift.txt), it tells the cache model
// apart from the order and timing of the engine's CTAs: no CTA of the engine's is involved.
// Run: hbmlab_kv_drift_replay SIDES_JSON RECORD.bin... [--ways W] [--partitions P]
//      (SIDES_JSON: assets/measurements/h100-l2-partition.json; --ways, --partitions: the preset's
//      l2_ways per partition and l2_partitions replaced, for trying others)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/engine/l2.hpp"
#include "sim/measure/validate.hpp"
#include "sim/spec/gpu_spec.hpp"

namespace {

using namespace hbmlab;

constexpr std::int64_t kTileBytes = 128 * 128 * 2;  // one 128 × 128 fp16 tile of Q, K, V or O
constexpr int kKv64 = 8;                            // the record's flag: K/V tiles of 128 × 64 (kv_drift.cu)

struct Access {
  unsigned long long t;
  int sm, head, tile;
  Tensor tensor;
  bool store;
  std::int64_t bytes;
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "kv_drift_replay: %s\n", what.c_str());
  std::exit(2);
}

// One raw record (kv_drift.cu's write_raw) as the GPU ordered its accesses.
std::vector<Access> read_record(const std::string& path, std::string& label) {
  std::ifstream f(path, std::ios::binary);
  int head[8], len = 0;
  if (!f.read(reinterpret_cast<char*>(head), sizeof head) || head[0] != 0x6b766466 ||
      !f.read(reinterpret_cast<char*>(&len), 4) || len < 0 || len > 256)
    fail(path + ": not a kv_drift record");
  label.resize(len);
  f.read(label.data(), len);
  const int ctas = head[1], heads = head[2], rows = head[3], descending = head[4];
  const bool longest_first = head[6] & 1, heads_interleaved = head[6] & 2;
  const int kv_split = (head[6] & kKv64) ? 2 : 1;  // K/V tiles a 128-row block
  const std::int64_t kv_bytes = kTileBytes / kv_split;
  std::vector<Access> out;
  for (int c = 0; c < ctas; ++c) {
    int sizes[3];
    if (!f.read(reinterpret_cast<char*>(sizes), sizeof sizes)) fail(path + ": truncated at CTA " + std::to_string(c));
    std::vector<std::pair<int, int>> items(sizes[2]);
    std::vector<unsigned long long> stamps(sizes[1]);
    f.read(reinterpret_cast<char*>(items.data()), 8 * std::streamsize(sizes[2]));
    f.read(reinterpret_cast<char*>(stamps.data()), 8 * std::streamsize(sizes[1]));
    if (!f) fail(path + ": truncated at CTA " + std::to_string(c));
    for (const auto& [item, first] : items) {
      const int h = heads_interleaved ? item % heads : item / rows;
      const int r = heads_interleaved ? item / heads : item % rows, i = longest_first ? rows - 1 - r : r;
      const int n = kv_split * (i + 1);
      if (first + n > sizes[1]) fail(path + ": an item runs past its CTA's stamps");
      out.push_back({stamps[first], sizes[0], h, i, Tensor::Q, false, kTileBytes});
      for (int x = 0; x < n; ++x) {
        const int j = descending ? n - 1 - x : x;
        out.push_back({stamps[first + x], sizes[0], h, j, Tensor::K, false, kv_bytes});
        out.push_back({stamps[first + x], sizes[0], h, j, Tensor::V, false, kv_bytes});
      }
      out.push_back({stamps[first + n - 1] + 1, sizes[0], h, i, Tensor::O, true, kTileBytes});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Access& a, const Access& b) { return a.t < b.t; });
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) fail("usage: hbmlab_kv_drift_replay SIDES_JSON RECORD.bin... [--ways W] [--partitions P]");
  GpuSpec gpu = load_gpu("h100-sxm");
  std::vector<std::string> records;
  for (int a = 2; a < argc; ++a) {
    const std::string arg = argv[a];
    if ((arg == "--ways" || arg == "--partitions") && a + 1 < argc) {
      const long v = std::strtol(argv[++a], nullptr, 10);
      if (v < 1) fail(arg + ": a whole number of at least 1");
      (arg == "--ways" ? gpu.l2_ways : gpu.l2_partitions) = v;
    } else {
      records.push_back(arg);
    }
  }
  std::vector<int> side;
  {
    std::ifstream f(argv[1]);
    const nlohmann::json doc = nlohmann::json::parse(f, nullptr, false);
    if (doc.is_discarded() || !doc.contains("sides")) fail(std::string(argv[1]) + ": no \"sides\" (h100-l2-partition.json)");
    for (const auto& [sm, s] : doc["sides"].items()) {
      const int n = std::stoi(sm);
      if (n >= int(side.size())) side.resize(n + 1, 0);
      side[n] = s.get<int>();
    }
  }
  const std::int64_t way = gpu.l2_bytes / 16;  // the H100's set-aside unit: 1/16 of the L2, 3.125 MiB
  std::printf("DRAM read MB, the preset's L2 (%lld ways a partition, %lld partitions) on the GPU's order, "
              "with 0 / 9.375 / 18.75 / 25 / 31.25 MiB set aside:\n",
              (long long)gpu.l2_ways, (long long)gpu.l2_partitions);
  for (const std::string& path : records) {
    std::string label;
    const std::vector<Access> acc = read_record(path, label);
    std::printf("%-34s", label.c_str());
    for (int ways_aside : {0, 3, 6, 8, 10}) {
      GpuSpec g = gpu;
      if (ways_aside) {
        GpuSpec sixteen = gpu;  // the driver's unit is 1/16 of the L2 whatever ways the model has
        sixteen.l2_ways = 16;
        sixteen = gpu_with_l2_set_aside(sixteen, ways_aside * way, "set-aside");
        g.l2_effective_bytes = sixteen.l2_effective_bytes;
        g.l2_ways = std::max<std::int64_t>(1, gpu.l2_ways * (16 - ways_aside) / 16);
      }
      PartitionedL2 l2(g.l2_effective_bytes, g.l2_ways, g.l2_line_bytes, std::max<std::int64_t>(1, g.l2_partitions));
      double dram = 0;
      for (const Access& a : acc) {
        const std::uint64_t key = tile_key(a.head, a.tensor, a.tile);
        if (a.store) {
          l2.write(key, a.bytes);
        } else {
          const int s = l2.partitions() == 1 || a.sm >= int(side.size()) ? 0 : side[a.sm];
          dram += double(l2.read(s, key, a.bytes).miss_bytes);
        }
      }
      std::printf(" %9.1f", dram / 1e6);
    }
    std::printf("\n");
  }
  return 0;
}
