// AVX-512 (F/BW/VL) level: 16 lanes, 4x8 / 4x4 tiles. Built with per-file flags.
// GCC 12 reports its own _mm*_undefined_* helpers as uninitialised (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>
#include <cstring>

#include "backend/cpu/isa_table.h"

namespace ingot::cpu {
namespace {

struct V512 {
  using R = __m512;
  static constexpr int W = 16;
  static constexpr int MX = 4;
  static R zero() { return _mm512_setzero_ps(); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static R load_bf16(const uint16_t* p) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static R load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R set1(float v) { return _mm512_set1_ps(v); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static float reduce(R v) {
    // Lanes i and i + 8 first (a shuffle rather than extract: GCC 12 warns on the latter).
    __m256 s8 = _mm512_castps512_ps256(_mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2))));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    s4 = _mm_add_ss(s4, _mm_shuffle_ps(s4, s4, 1));
    return _mm_cvtss_f32(s4);
  }
  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
};

#include "backend/cpu/kernels_impl.h"

}  // namespace

const KernelTable& kernels_avx512() {
  static const KernelTable t = make_table<V512>("avx512");
  return t;
}

}  // namespace ingot::cpu
