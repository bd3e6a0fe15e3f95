// Dense float matrices re-packed as Q8_0 blocks at load time, so models that
// ship only float weights (Whisper) can run the integer-dot kernels.
#pragma once
#include "ops/weight.h"

namespace ingot::quant {

// w: [out, in] f32 / bf16 / f16 with `in` a multiple of 32. Each run of 32
// values becomes one f16 scale d = max|w| / 127 and 32 int8 values
// round(w / d), the GGUF Q8_0 layout. Returns a CPU weight.
Weight quantize_q8_0(const Tensor& w);

}  // namespace ingot::quant
