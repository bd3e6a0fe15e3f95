// AVX2 + FMA + F16C level: 8 lanes, 2x4 tiles. Built with per-file flags.
// GCC 12 reports its own _mm*_undefined_* helpers as uninitialised (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC only
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backend/cpu/isa_table.h"

namespace ingot::cpu {
namespace {

struct V256 {
  using R = __m256;
  static constexpr int W = 8;
  static constexpr int MX = 2;
  static constexpr int PX = 3;
  static constexpr bool kReduce16 = false;
  static void reduce16(const R*, float*) {}
  // Eight sums at once (attention scores): out[i] = the lanes of a[i] added
  // as ((0+1)+(2+3)) + ((4+5)+(6+7)).
  static constexpr bool kReduce8 = true;
  static void reduce8(const R* a, float* out) {
    const R u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const R u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31)));
  }
  // Eight sums at once, each in exactly reduce()'s order (dot_rows):
  // ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)).
  static constexpr bool kReduce8Tree = true;
  static void reduce8_tree(const R* a, float* out) {
    R u[4];  // lanes i + (i+4) of rows 2j (low half) and 2j+1 (high half)
    for (int j = 0; j < 4; ++j)
      u[j] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * j], a[2 * j + 1], 0x20),
                           _mm256_permute2f128_ps(a[2 * j], a[2 * j + 1], 0x31));
    // (x0+x2, x1+x3) of rows 0, 2 | 1, 3 and then 4, 6 | 5, 7.
    const R w0 = _mm256_add_ps(_mm256_shuffle_ps(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                               _mm256_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const R w1 = _mm256_add_ps(_mm256_shuffle_ps(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)),
                               _mm256_shuffle_ps(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)));
    // Rows 0, 2, 4, 6 | 1, 3, 5, 7, then in order.
    const R h = _mm256_hadd_ps(w0, w1);
    _mm256_storeu_ps(out, _mm256_permutevar8x32_ps(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  static R zero() { return _mm256_setzero_ps(); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static R load_bf16(const uint16_t* p) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static R load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  // Lanes whose x has the sign bit set take a, the others b.
  static R select_neg(R x, R a, R b) { return _mm256_blendv_ps(b, a, x); }
  // e^x as on the AVX-512 level; 2^n built in the exponent field, so x is
  // clamped to [-87, 88] where n stays a normal exponent.
  static R exp(R x) {
    x = _mm256_min_ps(_mm256_max_ps(x, set1(-87.0f)), set1(88.0f));
    R n = _mm256_round_ps(_mm256_mul_ps(x, set1(1.44269504088896341f)),
                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    R r = _mm256_fnmadd_ps(n, set1(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, set1(-2.12194440e-4f), r);
    R p = set1(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, set1(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, set1(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, set1(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, set1(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, set1(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(_mm256_add_ps(p, set1(1.0f)), _mm256_castsi256_ps(e));
  }
  static R set1(float v) { return _mm256_set1_ps(v); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static float reduce(R v) {
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    s4 = _mm_add_ss(s4, _mm_shuffle_ps(s4, s4, 1));
    return _mm_cvtss_f32(s4);
  }
  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
  // Keeps v in a register: a value reused by several fused multiply-adds is
  // loaded once instead of being folded into each as a memory operand.
  static void pin(R& v) { asm volatile("" : "+x"(v)); }
};

#include "backend/cpu/kernels_impl.h"

}  // namespace

const KernelTable& kernels_avx2() {
  static const KernelTable t = make_table<V256>("avx2");
  return t;
}

}  // namespace ingot::cpu
