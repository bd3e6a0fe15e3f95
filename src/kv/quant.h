// Affine KV quantization: each group of `group` values along a row keeps a
// float32 (scale, bias) pair; value = fma(code, scale, bias), codes 0..255 (KV8)
// or 0..15 packed two per byte, low nibble first (KV4).
//
// KV4 rows are rotated before they are quantized: an orthonormal Hadamard
// transform along the row (per power-of-two block, see rotation_block)
// spreads an outlier channel over the whole row, so the row's groups keep
// fine steps. The transform is its own inverse and preserves dot products,
// so attention runs in the rotated basis (rotated query, output rotated back).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kv/pool.h"

namespace ingot::kv {

inline int quant_levels(KvQuant q) { return q == KvQuant::Q8 ? 255 : 15; }

// Whether rows of this scheme are stored in the rotated basis (KV4).
inline bool quant_rotates(KvQuant q) { return q == KvQuant::Q4; }
// The Hadamard block of a row of `dim` values: its largest power-of-two
// divisor (the whole row for power-of-two head dims); 1 means no rotation.
int64_t rotation_block(int64_t dim);
// In place: x <- H x per block of rotation_block(dim) values, H the
// orthonormal Sylvester Hadamard matrix (H = H^T = H^-1).
void hadamard_row(float* x, int64_t dim);

// Quantizes one row of `dim` floats (already rotated for KV4): codes (dim or dim/2 bytes) and
// params (2 floats per group: scale, bias).
void quantize_row(KvQuant q, const float* x, int64_t dim, int64_t group, uint8_t* codes, float* params);
// The inverse: writes `dim` floats (still in the rotated basis for KV4), each
// fma(code, scale, bias). Built per ISA (util/isa_clones.h).
void dequantize_row(KvQuant q, const uint8_t* codes, const float* params, int64_t dim, int64_t group,
                    float* out);
// dequantize_row's body, inline so that a caller built per ISA (the direct
// attention kernel's tiles) compiles it for its own ISA: every path computes
// the same floats.
inline void dequantize_values(KvQuant q, const uint8_t* codes, const float* params, int64_t dim, int64_t group,
                              float* out) {
  for (int64_t g0 = 0, gi = 0; g0 < dim; g0 += group, ++gi) {
    const float scale = params[2 * gi], bias = params[2 * gi + 1];
    if (q == KvQuant::Q8) {
      for (int64_t c = g0; c < g0 + group; ++c) out[c] = std::fma(static_cast<float>(codes[c]), scale, bias);
    } else {
      for (int64_t c = g0 / 2; c < (g0 + group) / 2; ++c) {
        out[2 * c] = std::fma(static_cast<float>(codes[c] & 15), scale, bias);
        out[2 * c + 1] = std::fma(static_cast<float>(codes[c] >> 4), scale, bias);
      }
    }
  }
}

}  // namespace ingot::kv
