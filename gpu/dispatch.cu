// The registry of kernel families (one line each, with its declaration) and the dispatch by name:
// (algorithm, dtype, d, Br, Bc) → the row of the family's shape table that launches it.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/kernels.hpp"

namespace hbmlab::gpu {

// HBMLAB_KERNELS(accessor): declares `const KernelFamily& accessor()`, which the family's .cu file
// defines, and yields it, so that a family is named in one line of the list below and nowhere else.
#define HBMLAB_KERNELS(accessor) [] { const KernelFamily& accessor(); return &accessor(); }()

#if HBMLAB_WITH_FLASH3
bool flash3_available();  // gpu/flash3.cu: false on a GPU that is not a Hopper
#endif

std::span<const KernelFamily* const> kernel_families() {
  static const std::vector<const KernelFamily*> families = [] {
    std::vector<const KernelFamily*> f = {
        HBMLAB_KERNELS(standard_kernels),          // gpu/standard.cu
        HBMLAB_KERNELS(flash1_kernels),            // gpu/flash1.cu
        HBMLAB_KERNELS(flash2_kernels),            // gpu/flash2.cu
        HBMLAB_KERNELS(flash_decoding_kernels),    // gpu/flash_decoding.cu
        HBMLAB_KERNELS(flashdecoding_pp_kernels),  // gpu/flash_decoding.cu
        HBMLAB_KERNELS(flash2_backward_kernels),   // gpu/flash2_backward.cu
    };
#if HBMLAB_WITH_FLASH3
    // gpu/flash3.cu (sm_90a), after flash2, only where the GPU is a Hopper
    if (flash3_available()) {
      f.insert(f.begin() + 3, HBMLAB_KERNELS(flash3_kernels));
      f.push_back(HBMLAB_KERNELS(flash3_backward_kernels));  // gpu/flash3_backward.cu (sm_90a)
    }
#endif
    return f;
  }();
  return families;
}
#undef HBMLAB_KERNELS

const KernelFamily& family_of(Algo algo) {
  for (const KernelFamily* f : kernel_families())
    if (f->algo() == algo) return *f;
  throw std::invalid_argument(std::string(to_string(algo)) + " has no CUDA kernel in this build");
}

Tolerance KernelFamily::tolerance(Dtype dtype) const {
  const double u = dtype == Dtype::fp16 ? 4.9e-4 : 3.9e-3;
  return {8 * u, 8 * u};
}

bool KernelFamily::launch(const AttentionProblem& p, Blocks b, bool kv_descending, const DeviceTensors& t,
                          cudaStream_t stream, LaunchInfo* info) const {
  for (const CompiledShape& s : shapes()) {
    if (s.d != p.head_dim || s.Br != b.Br || s.Bc != b.Bc) continue;
    const LaunchFn fn = p.dtype == Dtype::fp16 ? s.fp16 : p.dtype == Dtype::bf16 ? s.bf16 : nullptr;
    if (fn == nullptr) return false;
    fn(p, kv_descending, t, stream, info);
    return true;
  }
  return false;
}

std::vector<KernelShape> compiled_shapes() {
  std::vector<KernelShape> shapes;
  for (const KernelFamily* f : kernel_families())
    for (Dtype dtype : {Dtype::fp16, Dtype::bf16})
      for (const CompiledShape& s : f->shapes()) shapes.push_back({f->algo(), dtype, s.d, Blocks{s.Br, s.Bc}});
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
  std::vector<int> dims;  // the head dims of this room's table: "64, 128"
  for (const CompiledShape& s : family_of(algo).shapes())
    if (std::find(dims.begin(), dims.end(), s.d) == dims.end()) dims.push_back(s.d);
  std::string compiled;
  for (int dim : dims) compiled += (compiled.empty() ? "" : ", ") + std::to_string(dim);
  throw std::invalid_argument("no compiled " + std::string(to_string(algo)) + " kernel for d = " + std::to_string(d) +
                              " (compiled: d = " + compiled + ")");
}

std::int64_t scratch_bytes(Algo algo, const AttentionProblem& p) {
  std::int64_t bytes = 0;
  for (const ScratchTensor& s : family_of(algo).scratch(p)) bytes += s.bytes;
  return bytes;
}

void launch(Algo algo, const AttentionProblem& p, Blocks b, const DeviceTensors& t, cudaStream_t s, bool kv_descending) {
  for (Tensor needed : {Tensor::Q, Tensor::K, Tensor::V, Tensor::O})
    if (t.at(needed) == nullptr) throw std::invalid_argument("launch: Q, K, V and O must be device buffers");
  if (kv_descending && !algo->has_kv_order())
    throw std::invalid_argument(std::string(to_string(algo)) + " visits K/V blocks in ascending order only");
  const KernelFamily& family = family_of(algo);
  if (p.block_mask && !family.takes_block_mask()) {
    std::string masked;  // the families that do, from the registry below
    for (const KernelFamily* f : kernel_families())
      if (f->takes_block_mask()) masked += (masked.empty() ? "" : ", ") + std::string(to_string(f->algo())) + "'s";
    throw std::invalid_argument(std::string(to_string(algo)) + "'s kernel takes no block mask (" +
                                (masked.empty() ? std::string("no kernel does") : masked + " does") + ")");
  }
  bool tensors = true;
  for (const ScratchTensor& st : family.scratch(p)) tensors = tensors && t.at(st.tensor) != nullptr;
  if (!tensors || !family.launch(p, b, kv_descending, t, s))
    throw std::invalid_argument(std::string(to_string(algo)) + " has no compiled kernel for " +
                                std::string(to_string(p.dtype)) + ", d = " + std::to_string(p.head_dim) +
                                ", Br x Bc = " + std::to_string(b.Br) + "x" + std::to_string(b.Bc) +
                                " (or its scratch tensors are missing); see `hbmlab measure --list`");
}

LaunchInfo launch_info(Algo algo, const AttentionProblem& p, Blocks b, bool kv_descending) {
  LaunchInfo info;
  if (!family_of(algo).launch(p, b, kv_descending, DeviceTensors{}, nullptr, &info))
    throw std::invalid_argument(std::string(to_string(algo)) + ": no compiled kernel for this shape");
  return info;
}

const char* kernel_name_pattern(Algo algo) { return family_of(algo).profiler_names(); }

}  // namespace hbmlab::gpu
