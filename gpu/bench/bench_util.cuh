// What the L2 microbenchmarks share (l2_reuse.cu, l2_layout.cu, l2_alias.cu): an exit on a CUDA
// error, and a grid-wide barrier for grids whose CTAs are all resident at once.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace bench {

// Prints "PROGRAM: WHAT: error" and exits 1 unless `e` is cudaSuccess.
inline void check(cudaError_t e, const char* program, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", program, what, cudaGetErrorString(e));
    std::exit(1);
  }
}

__device__ unsigned int g_arrived = 0;
__device__ volatile unsigned int g_generation = 0;

// Every CTA of the grid waits here until all `ctas` have arrived. Only for grids that fit the GPU
// at once: a CTA that never gets an SM would leave the others waiting for ever.
__device__ void grid_barrier(unsigned int ctas) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned int gen = g_generation;
    __threadfence();
    if (atomicAdd(&g_arrived, 1u) == ctas - 1) {
      g_arrived = 0;
      __threadfence();
      g_generation = gen + 1;
    } else {
      while (g_generation == gen) {
      }
    }
  }
  __syncthreads();
}

}  // namespace bench
