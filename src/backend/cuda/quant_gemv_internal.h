// What quant_gemv.cu and quant_gemv_int8.cu share: the launch's weight
// segments, the int8-activation GEMV's entry points and the 2-byte-aligned
// loads both read quantized blocks with (a block of 18, 20 or 34 bytes is
// only 2-byte aligned).
#pragma once
#include <cstdint>

#include "backend/cuda/quant_gemv.h"

namespace ingot::cuda {

// Up to three weights on one x (q/k/v); for SwiGLU w[0] is the gate and w[1]
// the up projection; otherwise w[0] alone.
struct Segments {
  QuantMatrix w[3];
  float* y[3];
  int count;
};

// Whether the int8-activation GEMV takes this launch: a format it reads (Q8_0,
// Q4_0, Q4_1) with 2-byte aligned rows, x rows that fit its shared memory, and
// at least Tuning::qgemv_int8_min_values weight values.
__device__ inline uint32_t ld16(const uint8_t* p) { return __ldg(reinterpret_cast<const unsigned short*>(p)); }
__device__ inline uint32_t ld32_2(const uint8_t* p) { return ld16(p) | (ld16(p + 2) << 16); }

bool int8x_gemv_applies(const Segments& sg, int mode, int64_t n);
// mode: gemv::Mode (gemv_epilogue.cuh). Callers check int8x_gemv_applies first.
void launch_int8x_gemv(const Segments& sg, int mode, const float* x, const float* res, int64_t n);

}  // namespace ingot::cuda
