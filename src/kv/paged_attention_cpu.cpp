// The CPU direct paged-attention kernel. One task per (query row, KV head):
// the group of query heads sharing that KV head walks the visible blocks,
// loading each block's K and V rows once into small float32 tiles (converted
// or dequantized on the way: the fusion) and folding them into per-head
// running (max, sum, accumulator) state.
// GCC 12 reports its own AVX-512 intrinsics (_mm512_undefined_*) as maybe-uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "kv/paged_attention.h"
#include "kv/quant.h"
#include "util/error.h"

// Per-ISA clones dispatched by an ifunc resolver. ThreadSanitizer instruments
// the resolver, which the loader runs before the sanitizer is set up (a crash
// at start-up), so that build keeps the portable version only.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define INGOT_NO_IFUNC 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define INGOT_NO_IFUNC 1
#endif
#ifdef INGOT_NO_IFUNC
#define INGOT_ISA_CLONES
#else
#define INGOT_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

namespace ingot::kv {

namespace {

std::map<Device, PagedKernels>& kernels() {
  static std::map<Device, PagedKernels> m{
      {Device::CPU, PagedKernels{&paged_attention_cpu, &paged_write_cpu, &paged_gather_cpu}}};
  return m;
}

// Dequantizes n rows of `dim` codes (+ per-group scale, bias) into out.
INGOT_ISA_CLONES
void dequant_tile(KvQuant q, const uint8_t* codes, const float* params, int64_t n, int64_t dim, int64_t group,
                  size_t row_bytes, size_t row_params, float* out) {
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* c = codes + static_cast<size_t>(r) * row_bytes;
    const float* pr = params + static_cast<size_t>(r) * row_params;
    float* o = out + r * dim;
    for (int64_t g0 = 0, gi = 0; g0 < dim; g0 += group, ++gi) {
      const float sc = pr[2 * gi], bi = pr[2 * gi + 1];
      if (q == KvQuant::Q8) {
#pragma omp simd
        for (int64_t x = g0; x < g0 + group; ++x) o[x] = static_cast<float>(c[x]) * sc + bi;
      } else {
#pragma omp simd
        for (int64_t x = g0 / 2; x < (g0 + group) / 2; ++x) {
          o[2 * x] = static_cast<float>(c[x] & 15) * sc + bi;
          o[2 * x + 1] = static_cast<float>(c[x] >> 4) * sc + bi;
        }
      }
    }
  }
}

INGOT_ISA_CLONES
void bf16_tile(const uint16_t* src, int64_t n, float* out) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(src[i]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    out[i] = f;
  }
}

// Rows [slot0, slot0 + n) of head `h` of block `blk` as float32 [n, dim]:
// a pointer into the pool for float32 rows (or into the exact rows of the
// open KV4 block), else converted into `tile`.
const float* load_rows(const LayerPool& lp, const PagedKV& kv, bool is_v, int64_t blk, int64_t h, int64_t slot0,
                       int64_t n, float* tile) {
  const PlaneGeometry& g = lp.plane(is_v);
  const KvQuant q = lp.options().quant;
  const int64_t bs = lp.block_size();
  if (blk == kv.open_block) return (is_v ? kv.open_v : kv.open_k) + (h * bs + slot0) * g.dim;
  const int32_t id = kv.table[blk];
  const uint8_t* codes = lp.region(is_v ? kVCodes : kKCodes, id) + static_cast<size_t>(h * bs + slot0) * g.row_code_bytes;
  if (q == KvQuant::None) {
    if (lp.elem_dtype() == DType::F32) return reinterpret_cast<const float*>(codes);
    if (lp.elem_dtype() == DType::BF16) {
      bf16_tile(reinterpret_cast<const uint16_t*>(codes), n * g.dim, tile);
    } else {
      cpu::to_f32(codes, lp.elem_dtype(), n * g.dim, tile);
    }
    return tile;
  }
  const auto* params = reinterpret_cast<const float*>(lp.region(is_v ? kVParams : kKParams, id)) +
                       static_cast<size_t>(h * bs + slot0) * g.row_param_floats;
  dequant_tile(q, codes, params, n, g.dim, g.group, g.row_code_bytes, g.row_param_floats, tile);
  return tile;
}

// The online-softmax step over one block's n scores (block maximum bm): the
// scores become exp(s - new max), l and m advance, and the factor earlier
// accumulators must be scaled by is returned (0 on the first block, m = -inf).
inline float online_softmax_step(float* scores, int64_t n, float bm, float& m, float& l) {
  const float nm = std::max(m, bm);
  const float corr = std::exp(m - nm);
  float bsum = 0;
  for (int64_t x = 0; x < n; ++x) bsum += (scores[x] = std::exp(scores[x] - nm));
  l = l * corr + bsum;
  m = nm;
  return corr;
}

// Scores of one query row against n key rows, then the online-softmax update.
INGOT_ISA_CLONES
void fold_block(const float* qr, const float* kt, const float* vt, int64_t n, int64_t d, int64_t dv,
                float scale, float softcap, float* scores, float& m, float& l, float* acc) {
  float bm = -std::numeric_limits<float>::infinity();
  for (int64_t x = 0; x < n; ++x) {
    const float* kr = kt + x * d;
    float dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < d; ++c) dot += qr[c] * kr[c];
    dot *= scale;
    if (softcap > 0) dot = std::tanh(dot / softcap) * softcap;
    scores[x] = dot;
    bm = std::max(bm, dot);
  }
  const float corr = online_softmax_step(scores, n, bm, m, l);
#pragma omp simd
  for (int64_t c = 0; c < dv; ++c) acc[c] *= corr;
  for (int64_t x = 0; x < n; ++x) {
    const float w = scores[x];
    const float* vr = vt + x * dv;
#pragma omp simd
    for (int64_t c = 0; c < dv; ++c) acc[c] += w * vr[c];
  }
}

// KV8 with AVX-512 VNNI: the bytes stay bytes. Scores use integer dot
// products of the u8 key codes with the query split per key group into two
// int8 parts, q ~ qs * (hi + lo / 254) (about 15 bits: the query adds no
// error of note), so q.k = sum_g ks_g * qs_g * (hi.codes + lo.codes / 254)
// + kb_g * sum(q_g);
// values fold their affine parameters into the weights (acc += w*vs * codes,
// plus w*vb per group, added at the end). Half the bytes of bf16 and one
// vpdpbusd per 64 key values per head. The 16 rows of a block tile combine
// 254 hi + lo in int32 and are summed by one transpose tree (no per-row
// horizontal reduction); their group parameters apply to 16 scores at once,
// and each value row widens to float32 once for up to 4 query heads. Needs
// head dims and groups that are multiples of 64 (keys, at most 128) and 16
// (values).
bool kv8_vnni_fits(const LayerPool& lp) {
  static const bool cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vnni");
  const PlaneGeometry &k = lp.plane(false), &v = lp.plane(true);
  // Groups up to 128 keep the int32 row sums (254 hi + lo over 16 lanes) in range.
  return cpu && lp.options().quant == KvQuant::Q8 && k.group % 64 == 0 && k.group <= 128 && v.group % 16 == 0;
}

// Lane i of the result: the sum of the 16 lanes of v[i] (rows of a block),
// one transpose-and-add tree instead of 16 horizontal reductions.
__attribute__((target("avx512f"))) inline __m512i row_sums16(const __m512i* v) {
  __m512i a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i)
    a[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)
    b[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_epi64(a[2 * i], a[2 * i + 1]));
  for (int i = 0; i < 2; ++i)
    c[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(b[2 * i], b[2 * i + 1], 0x88),
                            _mm512_shuffle_i32x4(b[2 * i], b[2 * i + 1], 0xDD));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(c[0], c[1], 0x88), _mm512_shuffle_i32x4(c[0], c[1], 0xDD));
}

struct Kv8Scratch {
  std::vector<int8_t> q8, q8lo;        // [G, d]
  std::vector<float> qs, qsum;         // [G, ngk]
  std::vector<float> scores, m, l;     // [G, bs rounded up to 16], [G], [G]
  std::vector<float> acc, vbias;       // [G, dv], [G, ngv]
};

// For GH query heads at once: acc_h[NV * 16] += w_hx * (codes_x * vs + vb)
// over n value rows, accumulators in registers; each row's codes widen to
// float32 once for all GH heads; the bias part goes to vb per group.
template <int NV, int GH>
__attribute__((target("avx512f,avx512bw,avx512vnni")))
void fold_values_kv8(const uint8_t* vc, const float* vp, int64_t n, const PlaneGeometry& vg, const float* w,
                     size_t w_stride, float* acc, int64_t dv, float* vb) {
  __m512 a[GH][NV];
  for (int h = 0; h < GH; ++h)
    for (int j = 0; j < NV; ++j) a[h][j] = _mm512_loadu_ps(acc + h * dv + 16 * j);
  const int64_t ngv = vg.dim / vg.group, per = vg.group / 16;
  int scale_at[NV];  // the scale of chunk j: params[2 * (j / per)], divided once
  for (int j = 0; j < NV; ++j) scale_at[j] = static_cast<int>(2 * (j / per));
  for (int64_t x = 0; x < n; ++x) {
    const uint8_t* c = vc + static_cast<size_t>(x) * vg.row_code_bytes;
    const float* pr = vp + static_cast<size_t>(x) * vg.row_param_floats;
    __m512 cf[NV];
    for (int j = 0; j < NV; ++j)
      cf[j] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 16 * j))));
    for (int h = 0; h < GH; ++h) {
      const float wx = w[static_cast<size_t>(h) * w_stride + static_cast<size_t>(x)];
      for (int64_t g = 0; g < ngv; ++g) vb[h * ngv + g] += wx * pr[2 * g + 1];
      for (int j = 0; j < NV; ++j) a[h][j] = _mm512_fmadd_ps(_mm512_set1_ps(wx * pr[scale_at[j]]), cf[j], a[h][j]);
    }
  }
  for (int h = 0; h < GH; ++h)
    for (int j = 0; j < NV; ++j) _mm512_storeu_ps(acc + h * dv + 16 * j, a[h][j]);
}

// Scores of one query head against up to 16 key rows (n) of a block: integer
// dot products per row, the 16 rows' lanes summed by one transpose tree,
// then the per-row group parameters applied to all 16 scores at once.
__attribute__((target("avx512f,avx512bw,avx512vnni")))
__m512 kv8_scores16(const uint8_t* kc, const float* kp, int64_t n, const PlaneGeometry& kg, const int8_t* qr,
                    const int8_t* ql, const float* qs, const float* qsum) {
  const int64_t ngk = kg.dim / kg.group;
  const __mmask16 live = n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
  const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                          _mm512_set1_epi32(static_cast<int>(kg.row_param_floats)));
  __m512 s = _mm512_setzero_ps();
  for (int64_t g = 0; g < ngk; ++g) {
    __m512i acc[16];
#pragma GCC unroll 16
    for (int x = 0; x < 16; ++x) {
      acc[x] = _mm512_setzero_si512();
      if (x >= n) continue;
      const uint8_t* c = kc + static_cast<size_t>(x) * kg.row_code_bytes;
      __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512();
      for (int64_t c0 = g * kg.group; c0 < (g + 1) * kg.group; c0 += 64) {
        const __m512i codes = _mm512_loadu_si512(c + c0);
        a = _mm512_dpbusd_epi32(a, codes, _mm512_loadu_si512(qr + c0));
        b = _mm512_dpbusd_epi32(b, codes, _mm512_loadu_si512(ql + c0));
      }
      acc[x] = _mm512_add_epi32(_mm512_mullo_epi32(a, _mm512_set1_epi32(254)), b);
    }
    const __m512 dot = _mm512_cvtepi32_ps(row_sums16(acc));
    const __m512i at = _mm512_add_epi32(rows, _mm512_set1_epi32(static_cast<int>(2 * g)));
    const __m512 ks = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, at, kp, 4);
    const __m512 kb = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, _mm512_add_epi32(at, _mm512_set1_epi32(1)), kp, 4);
    s = _mm512_fmadd_ps(dot, _mm512_mul_ps(ks, _mm512_set1_ps(qs[g] * (1.0f / 254.0f))), s);
    s = _mm512_fmadd_ps(kb, _mm512_set1_ps(qsum[g]), s);
  }
  return s;
}

__attribute__((target("avx512f,avx512bw,avx512vnni")))
void attend_kv8_vnni(const LayerPool& lp, const PagedKV& kv, const float* q, int64_t G, int64_t kh, int64_t lo,
                     int64_t hi, const AttnParams& p, Kv8Scratch& w, float* out, int64_t out_stride) {
  const PlaneGeometry &kg = lp.plane(false), &vg = lp.plane(true);
  const int64_t d = kg.dim, dv = vg.dim, bs = lp.block_size();
  const int64_t ngk = d / kg.group, ngv = dv / vg.group;
  const auto sstride = static_cast<size_t>((bs + 15) / 16 * 16);
  w.q8.resize(static_cast<size_t>(G * d));
  w.q8lo.resize(static_cast<size_t>(G * d));
  w.qs.resize(static_cast<size_t>(G * ngk));
  w.qsum.resize(static_cast<size_t>(G * ngk));
  w.scores.resize(static_cast<size_t>(G) * sstride);
  w.m.assign(static_cast<size_t>(G), -std::numeric_limits<float>::infinity());
  w.l.assign(static_cast<size_t>(G), 0.0f);
  w.acc.assign(static_cast<size_t>(G * dv), 0.0f);
  w.vbias.assign(static_cast<size_t>(G * ngv), 0.0f);
  for (int64_t r = 0; r < G; ++r)
    for (int64_t g = 0; g < ngk; ++g) {
      const float* x = q + r * d + g * kg.group;
      float mx = 0, sum = 0;
      for (int64_t c = 0; c < kg.group; ++c) mx = std::max(mx, std::fabs(x[c])), sum += x[c];
      const float sc = mx > 0 ? mx / 127.0f : 1.0f, inv = 1.0f / sc;
      for (int64_t c = 0; c < kg.group; ++c) {
        const float y = x[c] * inv, hi = std::nearbyint(y);
        w.q8[static_cast<size_t>(r * d + g * kg.group + c)] = static_cast<int8_t>(hi);
        w.q8lo[static_cast<size_t>(r * d + g * kg.group + c)] = static_cast<int8_t>(std::nearbyint((y - hi) * 254.0f));
      }
      w.qs[static_cast<size_t>(r * ngk + g)] = sc;
      w.qsum[static_cast<size_t>(r * ngk + g)] = sum;
    }
  for (int64_t blk = lo / bs; hi >= lo && blk <= hi / bs; ++blk) {
    const int64_t j0 = std::max(lo, blk * bs), j1 = std::min(hi, blk * bs + bs - 1), n = j1 - j0 + 1;
    const int32_t id = kv.table[blk];
    const auto row0 = static_cast<size_t>(kh * bs + (j0 - blk * bs));
    const uint8_t* kc = lp.region(kKCodes, id) + row0 * kg.row_code_bytes;
    const float* kp = reinterpret_cast<const float*>(lp.region(kKParams, id)) + row0 * kg.row_param_floats;
    const uint8_t* vc = lp.region(kVCodes, id) + row0 * vg.row_code_bytes;
    const float* vp = reinterpret_cast<const float*>(lp.region(kVParams, id)) + row0 * vg.row_param_floats;
    for (int64_t r = 0; r < G; ++r) {
      float* sc = w.scores.data() + static_cast<size_t>(r) * sstride;
      for (int64_t x0 = 0; x0 < n; x0 += 16) {
        const int64_t nn = std::min<int64_t>(16, n - x0);
        const __m512 s = kv8_scores16(kc + static_cast<size_t>(x0) * kg.row_code_bytes,
                                      kp + static_cast<size_t>(x0) * kg.row_param_floats, nn, kg, w.q8.data() + r * d,
                                      w.q8lo.data() + r * d, w.qs.data() + r * ngk, w.qsum.data() + r * ngk);
        _mm512_storeu_ps(sc + x0, _mm512_mul_ps(s, _mm512_set1_ps(p.scale)));
      }
      float bm = -std::numeric_limits<float>::infinity();
      for (int64_t x = 0; x < n; ++x) {
        if (p.softcap > 0) sc[x] = std::tanh(sc[x] / p.softcap) * p.softcap;
        bm = std::max(bm, sc[x]);
      }
      const float corr = online_softmax_step(sc, n, bm, w.m[static_cast<size_t>(r)], w.l[static_cast<size_t>(r)]);
      float* acc = w.acc.data() + r * dv;
      const __m512 vcorr = _mm512_set1_ps(corr);
      for (int64_t c = 0; c < dv; c += 16) _mm512_storeu_ps(acc + c, _mm512_mul_ps(vcorr, _mm512_loadu_ps(acc + c)));
      for (int64_t g = 0; g < ngv; ++g) w.vbias[static_cast<size_t>(r * ngv + g)] *= corr;
    }
    for (int64_t r = 0; r < G;) {
      const float* sc = w.scores.data() + static_cast<size_t>(r) * sstride;
      float* acc = w.acc.data() + r * dv;
      float* vb = w.vbias.data() + r * ngv;
      if (dv == 64 && G - r >= 4) {
        fold_values_kv8<4, 4>(vc, vp, n, vg, sc, sstride, acc, dv, vb);
        r += 4;
      } else if (dv == 64) {
        fold_values_kv8<4, 1>(vc, vp, n, vg, sc, sstride, acc, dv, vb);
        r += 1;
      } else if (dv == 128 && G - r >= 2) {
        fold_values_kv8<8, 2>(vc, vp, n, vg, sc, sstride, acc, dv, vb);
        r += 2;
      } else if (dv == 128) {
        fold_values_kv8<8, 1>(vc, vp, n, vg, sc, sstride, acc, dv, vb);
        r += 1;
      } else {
        for (int64_t x = 0; x < n; ++x) {
          const uint8_t* c = vc + static_cast<size_t>(x) * vg.row_code_bytes;
          const float* pr = vp + static_cast<size_t>(x) * vg.row_param_floats;
          for (int64_t g = 0; g < ngv; ++g) {
            const __m512 ws = _mm512_set1_ps(sc[x] * pr[2 * g]);
            vb[g] += sc[x] * pr[2 * g + 1];
            for (int64_t c0 = g * vg.group; c0 < (g + 1) * vg.group; c0 += 16) {
              const __m512 cv = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + c0))));
              _mm512_storeu_ps(acc + c0, _mm512_fmadd_ps(ws, cv, _mm512_loadu_ps(acc + c0)));
            }
          }
        }
        r += 1;
      }
    }
  }
  for (int64_t r = 0; r < G; ++r) {
    const float li = w.l[static_cast<size_t>(r)], inv = li > 0 ? 1.0f / li : 0.0f;
    float* o = out + r * out_stride;
    for (int64_t c = 0; c < dv; ++c)
      o[c] = (w.acc[static_cast<size_t>(r * dv + c)] + w.vbias[static_cast<size_t>(r * ngv + c / vg.group)]) * inv;
  }
}

// bf16 K/V on AVX-512: rows widen to float32 in registers (a 16-bit shift),
// the query heads of a GQA group fold each block with one reduction per
// score and value accumulators held in registers. Exact float32 arithmetic on
// the stored values, as the tile path, in another summation order.
bool bf16_avx512_fits(const LayerPool& lp) {
  static const bool cpu = __builtin_cpu_supports("avx512f");
  return cpu && lp.options().quant == KvQuant::None && lp.elem_dtype() == DType::BF16 &&
         lp.spec().head_dim % 16 == 0 && (lp.spec().v_head_dim == 64 || lp.spec().v_head_dim == 128);
}

__attribute__((target("avx512f"))) inline __m512 widen_bf16(const uint8_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

template <int NV>
__attribute__((target("avx512f")))
void fold_values_bf16(const uint8_t* vc, size_t row_bytes, int64_t n, const float* w, float* acc) {
  __m512 a[NV];
  for (int j = 0; j < NV; ++j) a[j] = _mm512_loadu_ps(acc + 16 * j);
  for (int64_t x = 0; x < n; ++x) {
    const uint8_t* c = vc + static_cast<size_t>(x) * row_bytes;
    const __m512 ws = _mm512_set1_ps(w[x]);
    for (int j = 0; j < NV; ++j) a[j] = _mm512_fmadd_ps(ws, widen_bf16(c + 32 * j), a[j]);
  }
  for (int j = 0; j < NV; ++j) _mm512_storeu_ps(acc + 16 * j, a[j]);
}

__attribute__((target("avx512f")))
void attend_bf16_avx512(const LayerPool& lp, const PagedKV& kv, const float* q, int64_t G, int64_t kh, int64_t lo,
                        int64_t hi, const AttnParams& p, Kv8Scratch& w, float* out, int64_t out_stride) {
  const PlaneGeometry &kg = lp.plane(false), &vg = lp.plane(true);
  const int64_t d = kg.dim, dv = vg.dim, bs = lp.block_size();
  w.scores.resize(static_cast<size_t>(G * bs));
  w.m.assign(static_cast<size_t>(G), -std::numeric_limits<float>::infinity());
  w.l.assign(static_cast<size_t>(G), 0.0f);
  w.acc.assign(static_cast<size_t>(G * dv), 0.0f);
  for (int64_t blk = lo / bs; hi >= lo && blk <= hi / bs; ++blk) {
    const int64_t j0 = std::max(lo, blk * bs), j1 = std::min(hi, blk * bs + bs - 1), n = j1 - j0 + 1;
    const int32_t id = kv.table[blk];
    const auto row0 = static_cast<size_t>(kh * bs + (j0 - blk * bs));
    const uint8_t* kc = lp.region(kKCodes, id) + row0 * kg.row_code_bytes;
    const uint8_t* vc = lp.region(kVCodes, id) + row0 * vg.row_code_bytes;
    for (int64_t r = 0; r < G; ++r) {
      const float* qr = q + r * d;
      float* sc = w.scores.data() + r * bs;
      float bm = -std::numeric_limits<float>::infinity();
      for (int64_t x = 0; x < n; ++x) {
        const uint8_t* c = kc + static_cast<size_t>(x) * kg.row_code_bytes;
        __m512 lanes = _mm512_setzero_ps();
        for (int64_t c0 = 0; c0 < d; c0 += 16)
          lanes = _mm512_fmadd_ps(_mm512_loadu_ps(qr + c0), widen_bf16(c + 2 * c0), lanes);
        float dot = _mm512_reduce_add_ps(lanes) * p.scale;
        if (p.softcap > 0) dot = std::tanh(dot / p.softcap) * p.softcap;
        sc[x] = dot;
        bm = std::max(bm, dot);
      }
      const float corr = online_softmax_step(sc, n, bm, w.m[static_cast<size_t>(r)], w.l[static_cast<size_t>(r)]);
      float* acc = w.acc.data() + r * dv;
      const __m512 vcorr = _mm512_set1_ps(corr);
      for (int64_t c = 0; c < dv; c += 16) _mm512_storeu_ps(acc + c, _mm512_mul_ps(vcorr, _mm512_loadu_ps(acc + c)));
      if (dv == 64) {
        fold_values_bf16<4>(vc, vg.row_code_bytes, n, sc, acc);
      } else {
        fold_values_bf16<8>(vc, vg.row_code_bytes, n, sc, acc);
      }
    }
  }
  for (int64_t r = 0; r < G; ++r) {
    const float li = w.l[static_cast<size_t>(r)], inv = li > 0 ? 1.0f / li : 0.0f;
    float* o = out + r * out_stride;
    for (int64_t c = 0; c < dv; ++c) o[c] = w.acc[static_cast<size_t>(r * dv + c)] * inv;
  }
}

}  // namespace

void register_paged_kernels(Device d, const PagedKernels& k) { kernels()[d] = k; }

const PagedKernels* paged_kernels(Device d) {
  auto it = kernels().find(d);
  return it == kernels().end() || !it->second.attend ? nullptr : &it->second;
}

Tensor paged_attention(const Tensor& q, const PagedKV& kv, const AttnParams& p) {
  if (q.device() != kv.pool->device())
    fail(ErrorKind::InvalidArgument, "paged attention: queries on ", device_name(q.device()), ", KV pool on ",
         device_name(kv.pool->device()));
  const PagedKernels* k = paged_kernels(q.device());
  if (!k) fail(ErrorKind::Unsupported, "no paged-attention kernel for device ", device_name(q.device()));
  return k->attend(q, kv, p);
}

Tensor paged_attention_cpu(const Tensor& q_in, const PagedKV& kv, const AttnParams& p) {
  const LayerPool& lp = *kv.pool;
  Tensor q = q_in.dtype() == DType::F32 ? q_in.contiguous() : q_in.to(DType::F32).contiguous();
  const int64_t t = q.dim(0), h = q.dim(1), d = q.dim(2);
  const int64_t kvh = lp.spec().kv_heads, dv = lp.spec().v_head_dim, bs = lp.block_size();
  INGOT_CHECK(d == lp.spec().head_dim && h % kvh == 0, "paged attention q ", q.describe());
  const int64_t group = h / kvh, s = kv.length;
  Tensor out = Tensor::empty({t, h, dv}, DType::F32);
  const float* pq = q.data<float>();
  float* po = out.data<float>();
  // KV4 is stored in the rotated basis: rotate the query rows (dot products
  // are unchanged) and, below, each output row back.
  const bool rotated = quant_rotates(lp.options().quant);
  std::vector<float> qrot;
  if (rotated) {
    qrot.assign(pq, pq + t * h * d);
    for (int64_t r = 0; r < t * h; ++r) hadamard_row(qrot.data() + r * d, d);
    pq = qrot.data();
  }
  const bool vnni = kv8_vnni_fits(lp), bf16 = !vnni && bf16_avx512_fits(lp);
  if (vnni || bf16) {
    cpu::pool().parallel_for(t * kvh, 1, [&](int64_t b, int64_t e) {
      Kv8Scratch w;
      for (int64_t idx = b; idx < e; ++idx) {
        const int64_t i = idx / kvh, kh = idx % kvh, qpos = p.q_offset + i;
        const int64_t hi = p.causal ? std::min(s - 1, qpos) : s - 1;
        const int64_t lo = p.window > 0 ? std::max<int64_t>(0, qpos - p.window + 1) : 0;
        const float* qi = pq + (i * h + kh * group) * d;
        float* oi = po + (i * h + kh * group) * dv;
        if (vnni) {
          attend_kv8_vnni(lp, kv, qi, group, kh, lo, hi, p, w, oi, dv);
        } else {
          attend_bf16_avx512(lp, kv, qi, group, kh, lo, hi, p, w, oi, dv);
        }
      }
    });
    return out;
  }
  cpu::pool().parallel_for(t * kvh, 1, [&](int64_t b, int64_t e) {
    std::vector<float> kt(static_cast<size_t>(bs * d)), vt(static_cast<size_t>(bs * dv));
    std::vector<float> scores(static_cast<size_t>(bs)), acc(static_cast<size_t>(group * dv));
    std::vector<float> m(static_cast<size_t>(group)), l(static_cast<size_t>(group));
    for (int64_t idx = b; idx < e; ++idx) {
      const int64_t i = idx / kvh, kh = idx % kvh;
      const int64_t qpos = p.q_offset + i;
      const int64_t hi = p.causal ? std::min(s - 1, qpos) : s - 1;
      const int64_t lo = p.window > 0 ? std::max<int64_t>(0, qpos - p.window + 1) : 0;
      std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
      std::fill(l.begin(), l.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t blk = lo / bs; hi >= lo && blk <= hi / bs; ++blk) {
        const int64_t j0 = std::max(lo, blk * bs), j1 = std::min(hi, blk * bs + bs - 1), n = j1 - j0 + 1;
        const float* kr = load_rows(lp, kv, false, blk, kh, j0 - blk * bs, n, kt.data());
        const float* vr = load_rows(lp, kv, true, blk, kh, j0 - blk * bs, n, vt.data());
        for (int64_t r = 0; r < group; ++r) {
          const int64_t hh = kh * group + r;
          fold_block(pq + (i * h + hh) * d, kr, vr, n, d, dv, p.scale, p.softcap, scores.data(),
                     m[static_cast<size_t>(r)], l[static_cast<size_t>(r)], acc.data() + r * dv);
        }
      }
      for (int64_t r = 0; r < group; ++r) {
        float* o = po + (i * h + kh * group + r) * dv;
        const float li = l[static_cast<size_t>(r)];
        const float inv = li > 0 ? 1.0f / li : 0.0f;
        for (int64_t c = 0; c < dv; ++c) o[c] = acc[static_cast<size_t>(r * dv + c)] * inv;
        if (rotated) hadamard_row(o, dv);
      }
    }
  });
  return out;
}

}  // namespace ingot::kv
