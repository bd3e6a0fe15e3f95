#include "kv/quant.h"

#include <algorithm>
#include <cmath>

namespace ingot::kv {

namespace {

uint8_t code_of(float x, float lo, float inv, float levels) {
  return static_cast<uint8_t>(std::clamp(std::nearbyint((x - lo) * inv), 0.0f, levels));
}

// Squared error of the group under (scale, bias).
float group_error(const float* x, int64_t n, float scale, float bias, float levels) {
  const float inv = scale > 0 ? 1.0f / scale : 0.0f;
  float e = 0;
  for (int64_t c = 0; c < n; ++c) {
    const float d = static_cast<float>(code_of(x[c], bias, inv, levels)) * scale + bias - x[c];
    e += d * d;
  }
  return e;
}

// Min/max gives the first fit; a few least-squares refits of (scale, bias)
// to the assigned codes lower the error (most for 4-bit codes).
void fit_group(const float* x, int64_t n, float levels, int refits, float* scale, float* bias) {
  float lo = x[0], hi = x[0];
  for (int64_t c = 1; c < n; ++c) {
    lo = std::min(lo, x[c]);
    hi = std::max(hi, x[c]);
  }
  float s = (hi - lo) / levels, b = lo;
  float best = refits ? group_error(x, n, s, b, levels) : 0.0f;
  *scale = s;
  *bias = b;
  for (int it = 0; it < refits && s > 0; ++it) {
    const float inv = 1.0f / s;
    double sq = 0, sx = 0, sqq = 0, sqx = 0;
    for (int64_t c = 0; c < n; ++c) {
      const double q = code_of(x[c], b, inv, levels);
      sq += q;
      sx += x[c];
      sqq += q * q;
      sqx += q * x[c];
    }
    const double den = static_cast<double>(n) * sqq - sq * sq;
    if (den <= 0) break;
    const auto ns = static_cast<float>((static_cast<double>(n) * sqx - sq * sx) / den);
    const auto nb = static_cast<float>((sx - ns * sq) / static_cast<double>(n));
    if (!(ns > 0)) break;
    const float e = group_error(x, n, ns, nb, levels);
    if (e >= best) break;
    best = e;
    s = *scale = ns;
    b = *bias = nb;
  }
}

}  // namespace

void quantize_row(KvQuant q, const float* x, int64_t dim, int64_t group, uint8_t* codes, float* params) {
  const float levels = static_cast<float>(quant_levels(q));
  const int refits = q == KvQuant::Q4 ? 4 : 0;
  for (int64_t g0 = 0, gi = 0; g0 < dim; g0 += group, ++gi) {
    float scale = 0, bias = 0;
    fit_group(x + g0, group, levels, refits, &scale, &bias);
    const float inv = scale > 0 ? 1.0f / scale : 0.0f;
    params[2 * gi] = scale;
    params[2 * gi + 1] = bias;
    for (int64_t c = g0; c < g0 + group; ++c) {
      const uint8_t code = code_of(x[c], bias, inv, levels);
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
