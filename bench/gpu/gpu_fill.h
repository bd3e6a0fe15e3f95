#pragma once
#include <cuda_runtime.h>

#include <cstdint>

// Uniform values in [-scale, scale) rounded to bf16, on stream s.
bool fill_random_bf16(void* dst, int64_t n, uint64_t seed, float scale, cudaStream_t s);
// Q4_0 blocks (18 bytes: f16 d, 16 bytes of random nibbles), values d * (q - 8), on stream s.
bool fill_random_q4_0(void* dst, int64_t blocks, uint64_t seed, float d, cudaStream_t s);
