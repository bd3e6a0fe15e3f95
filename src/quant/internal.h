// Pieces shared by the per-instruction-set kernel builds, compiled once for
// the baseline CPU.
#pragma once
#include <cstdint>

#include "backend/cpu/kernels.h"
#include "ops/weight.h"

namespace ingot::quant {

// Throws a clear error when `w` cannot run through the block kernels.
void check_linear_shape(const Weight& w, int64_t block);
[[noreturn]] void fail_affine_bits(int bits);

// Each build's table; an empty QuantKernels for keys it has no kernels for.
namespace scalar { cpu::QuantKernels kernels_for(DType key); }
namespace avx2 { cpu::QuantKernels kernels_for(DType key); }
namespace avx512 { cpu::QuantKernels kernels_for(DType key); }

}  // namespace ingot::quant
