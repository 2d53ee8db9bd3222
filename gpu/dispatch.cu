// The dispatcher by name: (algorithm, dtype, d, Br, Bc) → the compiled kernel template, and the
// list of what is compiled (each algorithm's file holds its own shape table).
#include <stdexcept>
#include <string>

#include "gpu/kernels.hpp"

namespace hbmlab::gpu {

extern const int kStandardShapes[][3];
extern const int kStandardShapeCount;
extern const int kFlash1Shapes[][3];
extern const int kFlash1ShapeCount;
extern const int kFlash2Shapes[][3];
extern const int kFlash2ShapeCount;
bool launch_standard(const AttentionProblem& p, Blocks b, const DeviceTensors& t, cudaStream_t s, LaunchInfo* info);
bool launch_flash1(const AttentionProblem& p, Blocks b, const DeviceTensors& t, cudaStream_t s, LaunchInfo* info);
bool launch_flash2(const AttentionProblem& p, Blocks b, bool kv_descending, const DeviceTensors& t, cudaStream_t s,
                   LaunchInfo* info);

std::vector<KernelShape> compiled_shapes() {
  std::vector<KernelShape> shapes;
  auto add = [&](Algo algo, const int (*table)[3], int count) {
    for (Dtype dtype : {Dtype::fp16, Dtype::bf16})
      for (int k = 0; k < count; ++k)
        shapes.push_back({algo, dtype, table[k][0], Blocks{table[k][1], table[k][2]}});
  };
  add(Algo::standard, kStandardShapes, kStandardShapeCount);
  add(Algo::flash1, kFlash1Shapes, kFlash1ShapeCount);
  add(Algo::flash2, kFlash2Shapes, kFlash2ShapeCount);
  return shapes;
}

bool is_compiled(const KernelShape& s) {
  for (const auto& c : compiled_shapes())
    if (c.algo == s.algo && c.dtype == s.dtype && c.d == s.d && c.blocks == s.blocks) return true;
  return false;
}

Blocks default_blocks(Algo algo, Dtype dtype, int d) {
  for (const auto& c : compiled_shapes())
    if (c.algo == algo && c.dtype == dtype && c.d == d) return c.blocks;
  throw std::invalid_argument("no compiled " + std::string(to_string(algo)) + " kernel for d = " + std::to_string(d) +
                              " (compiled: d = 64, 128)");
}

std::int64_t scratch_bytes(Algo algo, const AttentionProblem& p) {
  const std::int64_t rows = p.instances() * p.seq_len;
  switch (algo) {
    case Algo::standard: return 2 * rows * p.seq_len * p.elem_bytes();
    case Algo::flash1: return 2 * rows * 4;
    case Algo::flash2: return rows * 4;
  }
  return 0;
}

void launch(Algo algo, const AttentionProblem& p, Blocks b, const DeviceTensors& t, cudaStream_t s, bool kv_descending) {
  if (t.Q == nullptr || t.K == nullptr || t.V == nullptr || t.O == nullptr)
    throw std::invalid_argument("launch: Q, K, V and O must be device buffers");
  if (kv_descending && algo != Algo::flash2)
    throw std::invalid_argument(std::string(to_string(algo)) + " visits K/V blocks in ascending order only (descending: flash2)");
  bool launched = false;
  switch (algo) {
    case Algo::standard: launched = t.S && t.P && launch_standard(p, b, t, s, nullptr); break;
    case Algo::flash1: launched = t.l && t.m && launch_flash1(p, b, t, s, nullptr); break;
    case Algo::flash2: launched = launch_flash2(p, b, kv_descending, t, s, nullptr); break;
  }
  if (!launched)
    throw std::invalid_argument(std::string(to_string(algo)) + " has no compiled kernel for " +
                                std::string(to_string(p.dtype)) + ", d = " + std::to_string(p.head_dim) +
                                ", Br x Bc = " + std::to_string(b.Br) + "x" + std::to_string(b.Bc) +
                                " (or its scratch tensors are missing); see `hbmlab measure --list`");
}

LaunchInfo launch_info(Algo algo, const AttentionProblem& p, Blocks b, bool kv_descending) {
  LaunchInfo info;
  bool found = false;
  switch (algo) {
    case Algo::standard: found = launch_standard(p, b, DeviceTensors{}, nullptr, &info); break;
    case Algo::flash1: found = launch_flash1(p, b, DeviceTensors{}, nullptr, &info); break;
    case Algo::flash2: found = launch_flash2(p, b, kv_descending, DeviceTensors{}, nullptr, &info); break;
  }
  if (!found) throw std::invalid_argument(std::string(to_string(algo)) + ": no compiled kernel for this shape");
  return info;
}

const char* kernel_name_pattern(Algo algo) {
  switch (algo) {
    case Algo::standard: return "qk_kernel|softmax_kernel|pv_kernel";
    case Algo::flash1: return "flash1_kernel";
    case Algo::flash2: return "flash2_kernel";
  }
  return "";
}

}  // namespace hbmlab::gpu
