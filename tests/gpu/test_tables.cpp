// The kernels' shape tables against the rooms' (sim/algo/kernel_tiles.hpp): gpu/ builds every
// family's table from its room's, so that `hbmlab measure --blocks default` and `simulate
// --hbmlab-kernels` run the same tile. Needs no device: `ctest -L gpu` runs it on any CUDA build.
#include <algorithm>
#include <optional>
#include <vector>

#include <catch2/catch.hpp>

#include "gpu/kernels.hpp"

using namespace hbmlab;
using namespace hbmlab::gpu;

namespace hbmlab::gpu {
#if HBMLAB_WITH_FLASH3
// gpu/flash3.cu and gpu/flash3_backward.cu: kernel_families() lists them only on a Hopper GPU.
const KernelFamily& flash3_kernels();
const KernelFamily& flash3_backward_kernels();
#endif
}  // namespace hbmlab::gpu

TEST_CASE("every kernel family is compiled for exactly its room's tiles, in its order", "[gpu][tiles]") {
  std::vector<const KernelFamily*> families(kernel_families().begin(), kernel_families().end());
#if HBMLAB_WITH_FLASH3
  for (const KernelFamily* f : {&flash3_kernels(), &flash3_backward_kernels()})
    if (std::find(families.begin(), families.end(), f) == families.end()) families.push_back(f);
#endif
  std::vector<Algo> rooms;  // those with a family
  for (const KernelFamily* f : families) {
    const Algo algo = f->algo();
    INFO(to_string(algo));
    rooms.push_back(algo);
    const std::span<const KernelTile> tiles = algo->hbmlab_kernel_tiles();
    REQUIRE(f->shapes().size() == tiles.size());
    for (std::size_t k = 0; k < tiles.size(); ++k) {
      const CompiledShape& s = f->shapes()[k];
      CHECK(KernelTile{s.d, s.Br, s.Bc} == tiles[k]);
      CHECK(s.fp16 != nullptr);
      CHECK(s.bf16 != nullptr);
    }
    // What it takes besides its tiles is its room's row of kernel_takes, which simulate reads.
    const KernelTakes takes = algo->hbmlab_kernel_takes();
    CHECK(f->takes_query_len() == takes.query_len);
    CHECK(f->takes_kv_heads() == takes.kv_heads);
    CHECK(f->takes_block_mask() == takes.block_mask);
    // measure's default for each d and dtype is the room's kernel blocks.
    for (int d : {64, 128})
      for (Dtype dtype : {Dtype::fp16, Dtype::bf16}) {
        AttentionProblem p;
        p.head_dim = d;
        p.dtype = dtype;
        const std::optional<Blocks> room = algo->hbmlab_kernel_blocks(p);
        REQUIRE(room);
        if (std::find(kernel_families().begin(), kernel_families().end(), f) != kernel_families().end())
          CHECK(default_blocks(algo, dtype, d) == *room);
      }
  }
  // And every room with a table has a family: no room is timed on a kernel gpu/ does not build.
  for (Pass pass : {Pass::forward, Pass::backward})
    for (Algo a : algorithms(pass)) {
      INFO(to_string(a));
      CHECK(a->has_hbmlab_kernel() == (std::find(rooms.begin(), rooms.end(), a) != rooms.end()));
    }
}
