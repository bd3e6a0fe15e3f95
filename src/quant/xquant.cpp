#include "quant/xquant.h"

#include <cmath>
#include <cstdlib>

#include "tensor/half.h"
#include "util/error.h"

namespace ingot::quant {

XRows::XRows(const float* x, int64_t n, int64_t k) {
  const int64_t nb = k / 32;
  blocks = static_cast<XBlock*>(std::malloc(static_cast<size_t>(n * nb) * sizeof(XBlock) + 1));
  if (!blocks) fail(ErrorKind::ResourceExhausted, "out of memory quantizing activations");
  for (int64_t i = 0; i < n * nb; ++i) {
    const float* v = x + i * 32;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(v[j]));
    XBlock& b = blocks[i];
    b.d = amax / 127.0f;
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) {
      b.q[j] = static_cast<int8_t>(std::nearbyint(v[j] * inv));
      s += b.q[j];
    }
    b.sum = s;
    b.d16 = f16_to_f32(f32_to_f16(b.d));
    b.s16 = f16_to_f32(f32_to_f16(b.d * static_cast<float>(s)));
  }
}

XRows::~XRows() { std::free(blocks); }

}  // namespace ingot::quant
