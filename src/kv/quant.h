// Affine KV quantization: each group of `group` values along a row keeps a
// float32 (scale, bias) pair; value = code * scale + bias, codes 0..255 (KV8)
// or 0..15 packed two per byte, low nibble first (KV4).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kv/pool.h"

namespace ingot::kv {

inline int quant_levels(KvQuant q) { return q == KvQuant::Q8 ? 255 : 15; }

// Quantizes one row of `dim` floats: codes (dim or dim/2 bytes) and
// params (2 floats per group: scale, bias).
void quantize_row(KvQuant q, const float* x, int64_t dim, int64_t group, uint8_t* codes, float* params);
// The inverse: writes `dim` floats.
void dequantize_row(KvQuant q, const uint8_t* codes, const float* params, int64_t dim, int64_t group,
                    float* out);

}  // namespace ingot::kv
