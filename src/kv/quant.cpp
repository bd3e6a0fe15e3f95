#include "kv/quant.h"

#include <algorithm>
#include <cmath>

namespace ingot::kv {

void quantize_row(KvQuant q, const float* x, int64_t dim, int64_t group, uint8_t* codes, float* params) {
  const float levels = static_cast<float>(quant_levels(q));
  for (int64_t g0 = 0, gi = 0; g0 < dim; g0 += group, ++gi) {
    float lo = x[g0], hi = x[g0];
    for (int64_t c = g0; c < g0 + group; ++c) {
      lo = std::min(lo, x[c]);
      hi = std::max(hi, x[c]);
    }
    const float scale = (hi - lo) / levels;
    const float inv = scale > 0 ? 1.0f / scale : 0.0f;
    params[2 * gi] = scale;
    params[2 * gi + 1] = lo;
    for (int64_t c = g0; c < g0 + group; ++c) {
      float r = std::nearbyint((x[c] - lo) * inv);
      auto code = static_cast<uint8_t>(std::clamp(r, 0.0f, levels));
      if (q == KvQuant::Q8) {
        codes[c] = code;
      } else if (c % 2 == 0) {
        codes[c / 2] = code;
      } else {
        codes[c / 2] = static_cast<uint8_t>(codes[c / 2] | (code << 4));
      }
    }
  }
}

void dequantize_row(KvQuant q, const uint8_t* codes, const float* params, int64_t dim, int64_t group,
                    float* out) {
  for (int64_t g0 = 0, gi = 0; g0 < dim; g0 += group, ++gi) {
    const float scale = params[2 * gi], bias = params[2 * gi + 1];
    if (q == KvQuant::Q8) {
      for (int64_t c = g0; c < g0 + group; ++c) out[c] = static_cast<float>(codes[c]) * scale + bias;
    } else {
      for (int64_t c = g0; c < g0 + group; c += 2) {
        const uint8_t b = codes[c / 2];
        out[c] = static_cast<float>(b & 15) * scale + bias;
        out[c + 1] = static_cast<float>(b >> 4) * scale + bias;
      }
    }
  }
}

}  // namespace ingot::kv
