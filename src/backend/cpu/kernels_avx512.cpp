// AVX-512 (F/BW/VL) level: 16 lanes, 4x8 / 4x4 tiles. Built with per-file flags.
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

struct V512 {
  using R = __m512;
  static constexpr int W = 16;
  static constexpr int MX = 4;
  static constexpr int PX = 4;
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
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  // Lanes whose x has the sign bit set take a, the others b.
  static R select_neg(R x, R a, R b) {
    const __mmask16 neg = _mm512_test_epi32_mask(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN));
    return _mm512_mask_blend_ps(neg, b, a);
  }
  // e^x: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial for e^r, scaled by 2^n
  // with scalef (exact, handles the subnormal range). |x| is clamped to 88.
  static R exp(R x) {
    x = _mm512_min_ps(_mm512_max_ps(x, set1(-88.0f)), set1(88.0f));
    R n = _mm512_roundscale_ps(_mm512_mul_ps(x, set1(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    R r = _mm512_fnmadd_ps(n, set1(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, set1(-2.12194440e-4f), r);
    R p = set1(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, set1(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, set1(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, set1(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, set1(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, set1(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    return _mm512_scalef_ps(_mm512_add_ps(p, set1(1.0f)), n);
  }
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
  // Keeps v in a register: a value reused by several fused multiply-adds is
  // loaded once instead of being folded into each as a memory operand.
  static void pin(R& v) { asm volatile("" : "+v"(v)); }

  // Sixteen reductions at once, each in reduce()'s tree: lanes i + (i + 8),
  // then i + (i + 4), i + (i + 2), i + (i + 1).
  static constexpr bool kReduce8 = false;  // keys reduce 16 at a time here
  static void reduce8(const R*, float*) {}
  static constexpr bool kReduce8Tree = false;  // dot_rows too
  static void reduce8_tree(const R*, float*) {}
  static constexpr bool kReduce16 = true;
  static void reduce16(const R* a, float* out) {
    R c[8], e[4], g[2];
    for (int m = 0; m < 8; ++m)  // c[m]: dot 2m in lanes 0-7, dot 2m+1 in lanes 8-15
      c[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int p = 0; p < 4; ++p)  // e[p]: quarter q holds dot 4p+q
      e[p] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * p], c[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(c[2 * p], c[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int r = 0; r < 2; ++r)  // g[r]: quarter q holds dots 8r+q (lanes 0-1) and 8r+4+q (lanes 2-3)
      g[r] = _mm512_add_ps(_mm512_shuffle_ps(e[2 * r], e[2 * r + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_ps(e[2 * r], e[2 * r + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    // Lane 4q+s holds dot 4s+q; permute into dot order.
    R h = _mm512_add_ps(_mm512_shuffle_ps(g[0], g[1], _MM_SHUFFLE(2, 0, 2, 0)),
                        _mm512_shuffle_ps(g[0], g[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(idx, h));
  }
};

#include "backend/cpu/kernels_impl.h"

}  // namespace

const KernelTable& kernels_avx512() {
  static const KernelTable t = make_table<V512>("avx512");
  return t;
}

}  // namespace ingot::cpu
