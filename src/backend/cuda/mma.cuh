// The tensor-core instruction the bf16 kernels share (prefill attention,
// decode products): mma.sync m16n8k16, bf16 in, float32 accumulate, and the
// packing of two floats into one bf16 pair register.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace ingot::cuda {

// c += A · B: a holds A[16 x 16] (row major) and b0 / b1 hold B[16 x 8]
// (column major) in the PTX fragment layout of the calling lane.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to bf16, the first in the low half (the lower index).
__device__ __forceinline__ uint32_t pack_bf16(float lo_col, float hi_col) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo_col, hi_col);
  return *reinterpret_cast<uint32_t*>(&v);
}

}  // namespace ingot::cuda
