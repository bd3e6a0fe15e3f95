// Fills device buffers with pseudo-random bf16 values (random-weight models
// are generated on the GPU: the host would take minutes for an 8B shape).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "gpu_fill.h"

namespace {

__global__ void fill_kernel(__nv_bfloat16* p, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    // splitmix64 of (seed, i): independent values without state.
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    p[i] = __float2bfloat16_rn((2.0f * u - 1.0f) * scale);
  }
}

}  // namespace

bool fill_random_bf16(void* dst, int64_t n, uint64_t seed, float scale, cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_bfloat16*>(dst), n, seed, scale);
  return cudaGetLastError() == cudaSuccess;
}
