#include "quant/xquant.h"

#include <cmath>
#include <cstdlib>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "tensor/half.h"
#include "util/error.h"

namespace ingot::quant {

namespace {

// d, the f16 forms and the sum of a block whose ints are in b.q.
void finish_block(XBlock& b, float amax) {
  int32_t s = 0;
  for (int j = 0; j < 32; ++j) s += b.q[j];
  b.d = amax / 127.0f;
  b.sum = s;
  b.d16 = f16_to_f32(f32_to_f16(b.d));
  b.s16 = f16_to_f32(f32_to_f16(b.d * static_cast<float>(s)));
}

void quantize_block_scalar(const float* v, XBlock& b) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(v[j]));
  const float inv = amax > 0 ? 127.0f / amax : 0.0f;
  for (int j = 0; j < 32; ++j) b.q[j] = static_cast<int8_t>(std::nearbyint(v[j] * inv));
  finish_block(b, amax);
}

#if defined(__x86_64__)
// The scalar loop 8 lanes at a time: |v| by clearing the sign bit, an exact
// max, v * inv rounded to nearest-even (nearbyint's default mode), then
// narrowed to int8 (|q| <= 127, so the saturating packs change nothing).
__attribute__((target("avx2"))) void quantize_blocks_avx2(const float* x, int64_t count, XBlock* out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < count; ++i) {
    const float* v = x + i * 32;
    __m256 a[4];
    __m256 mx = _mm256_setzero_ps();
    for (int u = 0; u < 4; ++u) {
      a[u] = _mm256_loadu_ps(v + 8 * u);
      mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, a[u]));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    const float amax = _mm_cvtss_f32(m4);
    const __m256 inv = _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
    __m256i q[4];
    for (int u = 0; u < 4; ++u)
      q[u] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(a[u], inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // packs interleave 128-bit lanes; the permute restores value order.
    const __m256i w01 = _mm256_packs_epi32(q[0], q[1]), w23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[i].q), b);
    finish_block(out[i], amax);
  }
}

bool have_avx2() {
  static const bool on = __builtin_cpu_supports("avx2");
  return on;
}
#endif

}  // namespace

void quantize_activation_blocks(const float* x, int64_t count, XBlock* out, bool simd) {
#if defined(__x86_64__)
  if (simd && have_avx2()) return quantize_blocks_avx2(x, count, out);
#endif
  (void)simd;
  for (int64_t i = 0; i < count; ++i) quantize_block_scalar(x + i * 32, out[i]);
}

XRows::XRows(const float* x, int64_t n, int64_t k) {
  const int64_t nb = k / 32;
  blocks = static_cast<XBlock*>(std::malloc(static_cast<size_t>(n * nb) * sizeof(XBlock) + 1));
  if (!blocks) fail(ErrorKind::ResourceExhausted, "out of memory quantizing activations");
  quantize_activation_blocks(x, n * nb, blocks);
}

XRows::~XRows() { std::free(blocks); }

}  // namespace ingot::quant
