// Tensor maps of the Hopper kernels (gpu/flash3.cu, gpu/flash3_backward.cu): the description of a
// [instances][rows][d] tensor that the tensor copy engine (TMA) reads and writes in boxes of 64
// columns, encoded on the host by cuTensorMapEncodeTiled. Included by those .cu files only.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "gpu/cuda_util.hpp"

namespace hbmlab::gpu {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled through the runtime's driver entry point: no link against libcuda.
inline EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || p == nullptr)
      throw CudaError("the driver has no cuTensorMapEncodeTiled (CUDA 12.0 or newer needed)");
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

// [instances][rows][d] in the dtype, boxes of 64 columns × box_rows rows, 128-byte swizzle.
template <typename T>
inline CUtensorMap tensor_map(const void* hbm, int d, std::int64_t rows, std::int64_t instances, int box_rows) {
  CUtensorMap map{};
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(rows), static_cast<cuuint64_t>(instances)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(d) * sizeof(T), static_cast<cuuint64_t>(rows * d) * sizeof(T)};
  const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUtensorMapDataType type =
      sizeof(T) == 2 && std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUresult r = encode_tiled()(&map, type, 3, const_cast<void*>(hbm), dims, strides, box, elem_strides,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw CudaError("cuTensorMapEncodeTiled failed (CUresult " + std::to_string(r) + ")");
  return map;
}

}  // namespace hbmlab::gpu
