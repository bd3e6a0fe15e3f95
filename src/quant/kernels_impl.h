// The integer-dot kernels, written once and compiled per instruction set:
// INGOT_QUANT_LEVEL 0 = portable scalar, 1 = AVX2 (+FMA), 2 = AVX-512 VNNI (VL, 256-bit lanes).
// Included by kernels_<isa>.cpp inside namespace ingot::quant::INGOT_QUANT_NS.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "quant/formats.h"
#include "quant/interleave.h"
#include "quant/quant.h"
#include "quant/internal.h"
#include "quant/xquant.h"
#include "util/error.h"

#if INGOT_QUANT_LEVEL > 0
#include <immintrin.h>
#endif

// The instruction set applies only to the functions below, never to inline
// functions of included headers (whose one linked copy every caller shares).
// (clang has no GCC target pragma; its attribute pragma does the same.)
#if INGOT_QUANT_LEVEL == 1 && defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#elif INGOT_QUANT_LEVEL == 2 && defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), \
                             apply_to = function)
#elif INGOT_QUANT_LEVEL == 1
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#elif INGOT_QUANT_LEVEL == 2
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#endif

namespace ingot::quant::INGOT_QUANT_NS {

namespace {

// Per-weight pointers resolved once per linear call.
struct Ctx {
  const uint8_t* data;
  size_t row_bytes;
  const float* scales = nullptr;
  const float* biases = nullptr;
  int64_t group_stride = 0;  // floats between rows of scales / biases
  int group_blocks = 0;      // 32-value blocks per affine group
  int bits = 0;
};

#if INGOT_QUANT_LEVEL > 0
// Eight int32 lanes, lane i = sum of four consecutive u8 * s8 products.
inline __m256i dot_u8s8(__m256i u, __m256i s) {
#if INGOT_QUANT_LEVEL == 2
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}
// Signed x signed through the sign trick (|a| as unsigned, sign of a moved onto b).
inline __m256i dot_s8s8(__m256i a, __m256i b) { return dot_u8s8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a)); }
inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// 16 bytes of nibbles -> 32 bytes: low nibbles first, then high nibbles (GGUF order).
inline __m256i nibbles_split(const uint8_t* p) {
  __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}
// 16 bytes of nibbles -> 32 bytes in element order lo0, hi0, lo1, hi1 ... (MLX order).
inline __m256i nibbles_interleaved(const uint8_t* p) {
  __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m128i m = _mm_set1_epi8(0x0F);
  __m128i lo = _mm_and_si128(q, m), hi = _mm_and_si128(_mm_srli_epi16(q, 4), m);
  return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
}
inline __m256 fma_lanes(__m256i lanes, float scale, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_set1_ps(scale), acc);
}
#endif

#if INGOT_QUANT_LEVEL > 0
// f16 -> f32 with F16C (exact, so the same value as load_f16's portable conversion).
inline float f16v(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
#else
inline float f16v(const uint8_t* p) { return load_f16(p); }
#endif

// The GGUF 32-value formats compute R output rows per pass over the x blocks
// (`dots<R>`): each row keeps its own accumulator and exactly the operation
// sequence of one row alone, so results do not depend on R or on a row's
// position; the R chains hide each other's latency and share the x loads.

// ---- Q8_0 ----
struct Q8_0 {
  static constexpr int kRows = 4;
  template <int R>
  static void dots(const Ctx& c, int64_t r, const XBlock* x, int64_t nb, float* out) {
    const uint8_t* p[R];
    for (int k = 0; k < R; ++k) p[k] = c.data + static_cast<size_t>(r + k) * c.row_bytes;
#if INGOT_QUANT_LEVEL > 0
    __m256 acc[R];
    for (int k = 0; k < R; ++k) acc[k] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i xq = load32(x[b].q);
      for (int k = 0; k < R; ++k) {
        const uint8_t* pb = p[k] + 34 * b;
        if (R > 1) _mm_prefetch(reinterpret_cast<const char*>(pb + R * c.row_bytes), _MM_HINT_T0);
        acc[k] = fma_lanes(dot_s8s8(load32(pb + 2), xq), f16v(pb) * x[b].d16, acc[k]);
      }
    }
    for (int k = 0; k < R; ++k) out[k] = hsum(acc[k]);
#else
    for (int k = 0; k < R; ++k) {
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* pb = p[k] + 34 * b;
        const auto* q = reinterpret_cast<const int8_t*>(pb + 2);
        int32_t s = 0;
        for (int i = 0; i < 32; ++i) s += q[i] * x[b].q[i];
        acc += static_cast<float>(s) * (f16v(pb) * x[b].d16);
      }
      out[k] = acc;
    }
#endif
  }
  static float dot(const Ctx& c, int64_t r, const XBlock* x, int64_t nb) {
    float y;
    dots<1>(c, r, x, nb, &y);
    return y;
  }
};

// ---- Q4_0 / Q4_1 ----
template <bool kMin>
struct Q4 {
  static constexpr int kBytes = kMin ? 20 : 18;
  static constexpr int kRows = 4;
  template <int R>
  static void dots(const Ctx& c, int64_t r, const XBlock* x, int64_t nb, float* out) {
    const uint8_t* p[R];
    float corr[R];
    for (int k = 0; k < R; ++k) {
      p[k] = c.data + static_cast<size_t>(r + k) * c.row_bytes;
      corr[k] = 0;
    }
#if INGOT_QUANT_LEVEL > 0
    __m256 acc[R];
    for (int k = 0; k < R; ++k) acc[k] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i xq = load32(x[b].q);
      for (int k = 0; k < R; ++k) {
        const uint8_t* pb = p[k] + kBytes * b;
        // The R rows are R short streams; fetch the next group's rows as these pass.
        if (R > 1) _mm_prefetch(reinterpret_cast<const char*>(pb + R * c.row_bytes), _MM_HINT_T0);
        const float d = f16v(pb) * x[b].d16;
        // Offset term: Q4_0 stores nibble - 8, Q4_1 adds a per-block min.
        corr[k] += kMin ? f16v(pb + 2) * x[b].s16 : -8.0f * d * static_cast<float>(x[b].sum);
        acc[k] = fma_lanes(dot_u8s8(nibbles_split(pb + (kMin ? 4 : 2)), xq), d, acc[k]);
      }
    }
    for (int k = 0; k < R; ++k) out[k] = hsum(acc[k]) + corr[k];
#else
    for (int k = 0; k < R; ++k) {
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* pb = p[k] + kBytes * b;
        const float d = f16v(pb) * x[b].d16;
        const uint8_t* qs = pb + (kMin ? 4 : 2);
        corr[k] += kMin ? f16v(pb + 2) * x[b].s16 : -8.0f * d * static_cast<float>(x[b].sum);
        int32_t s = 0;
        for (int i = 0; i < 16; ++i) s += (qs[i] & 0xF) * x[b].q[i] + (qs[i] >> 4) * x[b].q[i + 16];
        acc += static_cast<float>(s) * d;
      }
      out[k] = acc + corr[k];
    }
#endif
  }
  static float dot(const Ctx& c, int64_t r, const XBlock* x, int64_t nb) {
    float y;
    dots<1>(c, r, x, nb, &y);
    return y;
  }
#if INGOT_QUANT_LEVEL > 0
  // dots<R> for kCols activation rows at once (prefill): each weight block is
  // unpacked once for all of them. Every (row, x row) output keeps exactly
  // the operation sequence dots<R> gives it. y[i * ldy + k] for x row i
  // (x + i * nb) and weight row r + k.
  static constexpr int kCols = INGOT_QUANT_LEVEL == 2 ? 4 : 2;  // AVX2 has half the vector registers
  template <int R>
  static void dots_cols(const Ctx& c, int64_t r, const XBlock* x, int64_t nb, float* y, int64_t ldy) {
    constexpr int C = kCols;
    const uint8_t* p[R];
    for (int k = 0; k < R; ++k) p[k] = c.data + static_cast<size_t>(r + k) * c.row_bytes;
    __m256 acc[C][R];
    float corr[C][R];
    for (int i = 0; i < C; ++i)
      for (int k = 0; k < R; ++k) acc[i][k] = _mm256_setzero_ps(), corr[i][k] = 0;
    for (int64_t b = 0; b < nb; ++b) {
      __m256i xq[C];
      for (int i = 0; i < C; ++i) xq[i] = load32(x[i * nb + b].q);
      for (int k = 0; k < R; ++k) {
        const uint8_t* pb = p[k] + kBytes * b;
        if (R > 1) _mm_prefetch(reinterpret_cast<const char*>(pb + R * c.row_bytes), _MM_HINT_T0);
        const float wd = f16v(pb), wm = kMin ? f16v(pb + 2) : 0.0f;
        const __m256i wq = nibbles_split(pb + (kMin ? 4 : 2));
        for (int i = 0; i < C; ++i) {
          const XBlock& xb = x[i * nb + b];
          const float d = wd * xb.d16;
          corr[i][k] += kMin ? wm * xb.s16 : -8.0f * d * static_cast<float>(xb.sum);
          acc[i][k] = fma_lanes(dot_u8s8(wq, xq[i]), d, acc[i][k]);
        }
      }
    }
    for (int i = 0; i < C; ++i)
      for (int k = 0; k < R; ++k) y[i * ldy + k] = hsum(acc[i][k]) + corr[i][k];
  }
#endif
};

// ---- MLX affine, 4 bits (8 bits: affine8_dot below) ----
struct Affine4 {
  static float dot(const Ctx& c, int64_t r, const XBlock* x, int64_t nb) {
    const uint8_t* p = c.data + static_cast<size_t>(r) * c.row_bytes;
    const float* sc = c.scales + r * c.group_stride;
    const float* bi = c.biases ? c.biases + r * c.group_stride : nullptr;
    float corr = 0;
#if INGOT_QUANT_LEVEL > 0
    __m256 acc = _mm256_setzero_ps();
#else
    float acc = 0;
#endif
    for (int64_t b = 0; b < nb; ++b, p += 16) {
      const int64_t g = b / c.group_blocks;
      const float d = sc[g] * x[b].d;
      if (bi) corr += bi[g] * x[b].d * static_cast<float>(x[b].sum);
#if INGOT_QUANT_LEVEL > 0
      acc = fma_lanes(dot_u8s8(nibbles_interleaved(p), load32(x[b].q)), d, acc);
#else
      int32_t s = 0;
      for (int i = 0; i < 16; ++i) s += (p[i] & 0xF) * x[b].q[2 * i] + (p[i] >> 4) * x[b].q[2 * i + 1];
      acc += static_cast<float>(s) * d;
#endif
    }
#if INGOT_QUANT_LEVEL > 0
    return hsum(acc) + corr;
#else
    return acc + corr;
#endif
  }
};

// ---- Q4_K / Q5_K ----
template <bool kFive>
struct QK45 {
  static constexpr int kBytes = kFive ? kQ5KBytes : kQ4KBytes;
  static float dot(const Ctx& c, int64_t r, const XBlock* x, int64_t nb) {
    const uint8_t* p = c.data + static_cast<size_t>(r) * c.row_bytes;
    float corr = 0;
#if INGOT_QUANT_LEVEL > 0
    __m256 acc = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
#else
    float acc = 0;
#endif
    for (int64_t sb = 0; sb < nb / 8; ++sb, p += kBytes, x += 8) {
      const float d = load_f16(p), dmin = load_f16(p + 2);
      const uint8_t* scales = p + 4;
      const uint8_t* qh = p + 16;
      const uint8_t* qs = p + (kFive ? 48 : 16);
#if INGOT_QUANT_LEVEL > 0
      const __m256i hbits = kFive ? load32(qh) : _mm256_setzero_si256();
#endif
      for (int j = 0; j < 8; ++j) {
        int sc, mn;
        k_scale_min(scales, j, &sc, &mn);
        corr -= dmin * static_cast<float>(mn) * x[j].d * static_cast<float>(x[j].sum);
        const uint8_t* q = qs + 32 * (j / 2);
#if INGOT_QUANT_LEVEL > 0
        __m256i raw = load32(q);
        __m256i u = j % 2 ? _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4) : _mm256_and_si256(raw, m4);
        if constexpr (kFive) {
          const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << j));
          __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(hbits, bit), bit);
          u = _mm256_or_si256(u, _mm256_and_si256(set, _mm256_set1_epi8(16)));
        }
        acc = fma_lanes(dot_u8s8(u, load32(x[j].q)), d * static_cast<float>(sc) * x[j].d, acc);
#else
        int32_t s = 0;
        for (int l = 0; l < 32; ++l) {
          int v = j % 2 ? q[l] >> 4 : q[l] & 0xF;
          if (kFive && (qh[l] >> j & 1)) v += 16;
          s += v * x[j].q[l];
        }
        acc += static_cast<float>(s) * (d * static_cast<float>(sc) * x[j].d);
#endif
      }
    }
#if INGOT_QUANT_LEVEL > 0
    return hsum(acc) + corr;
#else
    return acc + corr;
#endif
  }
};

// ---- Q6_K ----
struct Q6K {
  static float dot(const Ctx& c, int64_t r, const XBlock* x, int64_t nb) {
    const uint8_t* p = c.data + static_cast<size_t>(r) * c.row_bytes;
#if INGOT_QUANT_LEVEL > 0
    __m256 acc = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
#else
    float acc = 0;
#endif
    for (int64_t sb = 0; sb < nb / 8; ++sb, p += kQ6KBytes, x += 8) {
      const auto* sc = reinterpret_cast<const int8_t*>(p + 192);
      const float d = load_f16(p + 208);
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = p + 64 * h;
        const uint8_t* qh = p + 128 + 32 * h;
#if INGOT_QUANT_LEVEL > 0
        const __m256i la = load32(ql), lb = load32(ql + 32), hh = load32(qh);
        const __m256i lo[4] = {_mm256_and_si256(la, m4), _mm256_and_si256(lb, m4),
                               _mm256_and_si256(_mm256_srli_epi16(la, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(lb, 4), m4)};
        const __m256i hi[4] = {_mm256_and_si256(_mm256_slli_epi16(hh, 4), m30),
                               _mm256_and_si256(_mm256_slli_epi16(hh, 2), m30), _mm256_and_si256(hh, m30),
                               _mm256_and_si256(_mm256_srli_epi16(hh, 2), m30)};
        for (int qt = 0; qt < 4; ++qt) {
          const int xb = 4 * h + qt, si = 8 * h + 2 * qt;
          __m256i v = _mm256_sub_epi8(_mm256_or_si256(lo[qt], hi[qt]), k32);
          __m256i lanes = dot_s8s8(v, load32(x[xb].q));
          __m256i scl = _mm256_set_epi32(sc[si + 1], sc[si + 1], sc[si + 1], sc[si + 1], sc[si], sc[si], sc[si], sc[si]);
          acc = fma_lanes(_mm256_mullo_epi32(lanes, scl), d * x[xb].d, acc);
        }
#else
        for (int qt = 0; qt < 4; ++qt) {
          const int xb = 4 * h + qt, si = 8 * h + 2 * qt;
          int32_t s0 = 0, s1 = 0;
          for (int l = 0; l < 16; ++l) s0 += (q6_value(ql, qh, 32 * qt + l) - 32) * x[xb].q[l];
          for (int l = 16; l < 32; ++l) s1 += (q6_value(ql, qh, 32 * qt + l) - 32) * x[xb].q[l];
          acc += static_cast<float>(s0 * sc[si] + s1 * sc[si + 1]) * (d * x[xb].d);
        }
#endif
      }
    }
#if INGOT_QUANT_LEVEL > 0
    return hsum(acc);
#else
    return acc;
#endif
  }
};

Ctx make_ctx(const Weight& w) {
  Ctx c;
  c.data = static_cast<const uint8_t*>(w.data.raw());
  c.row_bytes = row_bytes(w);
  if (w.is_affine()) {
    c.bits = w.bits;
    c.scales = w.scales.data<float>();
    c.biases = w.biases.defined() ? w.biases.data<float>() : nullptr;
    c.group_stride = w.scales.stride(0);
    c.group_blocks = w.group_size / 32;
  }
  return c;
}

// Whether F computes several rows per pass (has kRows and dots<R>).
template <class F>
constexpr bool has_rows(decltype(F::kRows)) { return true; }
template <class F>
constexpr bool has_rows(...) { return false; }

// Whether F also takes several activation rows per pass (has kCols and dots_cols<R>).
template <class F>
constexpr bool has_cols(decltype(F::kCols)) { return true; }
template <class F>
constexpr bool has_cols(...) { return false; }

template <class F, int kBlock>
void linear(const float* x, int64_t n, const Weight& w, float* y) {
  check_linear_shape(w, kBlock);
  const int64_t k = w.cols(), m = w.rows(), nb = k / 32;
  XRows xq(x, n, k);
  const Ctx c = make_ctx(w);
  constexpr int64_t kTile = 16;  // weight rows that stay in L1 while every x row passes
  const int64_t tiles = (m + kTile - 1) / kTile;
  cpu::pool().parallel_for(tiles, 1, [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) {
      const int64_t j0 = t * kTile, j1 = m < j0 + kTile ? m : j0 + kTile;
      int64_t i = 0;
      if constexpr (has_cols<F>(0) && has_rows<F>(0)) {
        // Groups of kCols x rows share each weight block's unpacking (prefill).
        for (; i + F::kCols <= n; i += F::kCols) {
          const XBlock* xi = xq.blocks + i * nb;
          int64_t j = j0;
          for (; j + F::kRows <= j1; j += F::kRows) F::template dots_cols<F::kRows>(c, j, xi, nb, y + i * m + j, m);
          for (; j < j1; ++j)
            for (int u = 0; u < F::kCols; ++u) y[(i + u) * m + j] = F::dot(c, j, xi + u * nb, nb);
        }
      }
      for (; i < n; ++i) {
        const XBlock* xi = xq.blocks + i * nb;
        int64_t j = j0;
        if constexpr (has_rows<F>(0)) {
          for (; j + F::kRows <= j1; j += F::kRows) F::template dots<F::kRows>(c, j, xi, nb, y + i * m + j);
        }
        for (; j < j1; ++j) y[i * m + j] = F::dot(c, j, xi, nb);
      }
    }
  });
}

#include "quant/kernels_x8_impl.h"

// 8-bit affine weights are as fine as int8 activations would be, so rounding the
// activations would double the error: these dots keep them in float32.
float affine8_dot(const Ctx& c, int64_t r, const float* x, const float* xsum, int64_t nb) {
  const uint8_t* p = c.data + static_cast<size_t>(r) * c.row_bytes;
  const float* sc = c.scales + r * c.group_stride;
  const float* bi = c.biases ? c.biases + r * c.group_stride : nullptr;
  const int64_t groups = nb / c.group_blocks;
  const int64_t gsize = 32 * static_cast<int64_t>(c.group_blocks);
  float total = 0;
  for (int64_t g = 0; g < groups; ++g, p += gsize, x += gsize) {
#if INGOT_QUANT_LEVEL > 0
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < gsize; i += 8) {
      __m128i b8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + i));
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b8)), _mm256_loadu_ps(x + i), acc);
    }
    float dot = hsum(acc);
#else
    float dot = 0;
    for (int64_t i = 0; i < gsize; ++i) dot += static_cast<float>(p[i]) * x[i];
#endif
    total += sc[g] * dot + (bi ? bi[g] * xsum[g] : 0.0f);
  }
  return total;
}

void affine8_linear(const float* x, int64_t n, const Weight& w, float* y) {
  check_linear_shape(w, 32);
  const int64_t k = w.cols(), m = w.rows(), nb = k / 32;
  const Ctx c = make_ctx(w);
  const int64_t groups = nb / c.group_blocks, gsize = 32 * static_cast<int64_t>(c.group_blocks);
  std::vector<float> xsum(static_cast<size_t>(n * groups), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t j = 0; j < gsize; ++j) xsum[static_cast<size_t>(i * groups + g)] += x[i * k + g * gsize + j];
  constexpr int64_t kTile = 16;
  const int64_t tiles = (m + kTile - 1) / kTile;
  cpu::pool().parallel_for(tiles, 1, [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) {
      const int64_t j0 = t * kTile, j1 = m < j0 + kTile ? m : j0 + kTile;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = j0; j < j1; ++j)
          y[i * m + j] = affine8_dot(c, j, x + i * k, xsum.data() + i * groups, nb);
    }
  });
}

void affine_linear(const float* x, int64_t n, const Weight& w, float* y) {
  if (w.bits == 4) return linear<Affine4, 32>(x, n, w, y);
  if (w.bits == 8) return affine8_linear(x, n, w, y);
  fail_affine_bits(w.bits);
}

void row_kernel(const Weight& w, int64_t r, float* out) { dequantize_row(w, r, out); }

}  // namespace

cpu::QuantKernels kernels_for(DType key) {
  switch (key) {
    case DType::Q8_0: return {linear<Q8_0, 32>, row_kernel, interleave_rows};
    case DType::Q8_0x8: return {linear_x8<Q8x8>, row_kernel, nullptr, linear_many_x8<Q8x8>};
    case DType::Q4_0: return {linear<Q4<false>, 32>, row_kernel, interleave_rows};
    case DType::Q4_1: return {linear<Q4<true>, 32>, row_kernel, interleave_rows};
    case DType::Q4_0x8: return {linear_x8<Q4x8<false>>, row_kernel, nullptr, linear_many_x8<Q4x8<false>>};
    case DType::Q4_1x8: return {linear_x8<Q4x8<true>>, row_kernel, nullptr, linear_many_x8<Q4x8<true>>};
    case DType::Q4_K: return {linear<QK45<false>, 256>, row_kernel};
    case DType::Q5_K: return {linear<QK45<true>, 256>, row_kernel};
    case DType::Q6_K: return {linear<Q6K, 256>, row_kernel};
    case DType::U32: return {affine_linear, row_kernel};
    default: return {};
  }
}

}  // namespace ingot::quant::INGOT_QUANT_NS

#if INGOT_QUANT_LEVEL > 0 && defined(__clang__)
#pragma clang attribute pop
#elif INGOT_QUANT_LEVEL > 0
#pragma GCC pop_options
#endif
