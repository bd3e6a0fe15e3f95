#pragma once
#include <cuda_runtime.h>

#include <cstdint>

// Uniform values in [-scale, scale) rounded to bf16, on stream s.
bool fill_random_bf16(void* dst, int64_t n, uint64_t seed, float scale, cudaStream_t s);
