// Fills device buffers with pseudo-random bf16 values (random-weight models
// are generated on the GPU: the host would take minutes for an 8B shape).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "gpu_fill.h"

namespace {

// splitmix64 of (seed, i): independent values without state.
__device__ uint64_t mix(uint64_t seed, int64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void fill_kernel(__nv_bfloat16* p, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float u = static_cast<float>(mix(seed, i) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    p[i] = __float2bfloat16_rn((2.0f * u - 1.0f) * scale);
  }
}

__global__ void fill_q4_0_kernel(uint8_t* p, int64_t n, uint64_t seed, unsigned short d_bits) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int j = static_cast<int>(i % 18);  // bytes 0-1: the f16 scale, little-endian
    p[i] = j == 0 ? d_bits & 0xFF : j == 1 ? d_bits >> 8 : static_cast<uint8_t>(mix(seed, i) >> 56);
  }
}

}  // namespace

bool fill_random_bf16(void* dst, int64_t n, uint64_t seed, float scale, cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_bfloat16*>(dst), n, seed, scale);
  return cudaGetLastError() == cudaSuccess;
}

bool fill_random_q4_0(void* dst, int64_t blocks, uint64_t seed, float d, cudaStream_t s) {
  const unsigned short bits = __half_as_ushort(__float2half_rn(d));
  fill_q4_0_kernel<<<1024, 256, 0, s>>>(static_cast<uint8_t*>(dst), blocks * 18, seed, bits);
  return cudaGetLastError() == cudaSuccess;
}
