// The CPU direct paged-attention kernel. One task per (query row, KV head):
// the group of query heads sharing that KV head walks the visible blocks,
// loading each block's K and V rows once into small float32 tiles (converted
// or dequantized on the way: the fusion) and folding them into per-head
// running (max, sum, accumulator) state.
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

std::map<Device, PagedAttentionFn>& kernels() {
  static std::map<Device, PagedAttentionFn> m{{Device::CPU, &paged_attention_cpu}};
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

// Rows [slot0, slot0 + n) of head `h` of one block plane as float32 [n, dim]:
// a pointer into the pool for float32 rows, else converted into `tile`.
const float* load_rows(const LayerPool& lp, bool is_v, int32_t id, int64_t h, int64_t slot0, int64_t n,
                       float* tile) {
  const PlaneGeometry& g = lp.plane(is_v);
  const KvQuant q = lp.options().quant;
  const int64_t bs = lp.block_size();
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
  const float nm = std::max(m, bm);
  const float corr = std::exp(m - nm);  // m = -inf on the first block: 0
  float bsum = 0;
  for (int64_t x = 0; x < n; ++x) bsum += (scores[x] = std::exp(scores[x] - nm));
  l = l * corr + bsum;
#pragma omp simd
  for (int64_t c = 0; c < dv; ++c) acc[c] *= corr;
  for (int64_t x = 0; x < n; ++x) {
    const float w = scores[x];
    const float* vr = vt + x * dv;
#pragma omp simd
    for (int64_t c = 0; c < dv; ++c) acc[c] += w * vr[c];
  }
  m = nm;
}

}  // namespace

void register_paged_attention(Device d, PagedAttentionFn fn) { kernels()[d] = fn; }

Tensor paged_attention(const Tensor& q, const PagedKV& kv, const AttnParams& p) {
  auto it = kernels().find(q.device());
  if (it == kernels().end())
    fail(ErrorKind::Unsupported, "no paged-attention kernel for device ", device_name(q.device()));
  return it->second(q, kv, p);
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
        const int32_t id = kv.table[blk];
        const float* kr = load_rows(lp, false, id, kh, j0 - blk * bs, n, kt.data());
        const float* vr = load_rows(lp, true, id, kh, j0 - blk * bs, n, vt.data());
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
      }
    }
  });
  return out;
}

}  // namespace ingot::kv
