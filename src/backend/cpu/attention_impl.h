// The attention tile fold (AttnFold in isa_table.h), written once over a SIMD
// traits type V; included by kernels_impl.h, so the same rules apply.
//
// What a query vector gets depends only on its own q, the tile's rows and its
// visible range, never on G or on the vectors beside it: a row computes the
// same bits alone (a decode step) or in a block of prompt rows, and stores
// that cut keys at the same tile boundaries (contiguous buffers, paged
// blocks) give the same bits.

// s[x] = q . k_(x - x0) for lanes x in [x0, x0 + n) in the canonical dot
// order (lanes over d, then the fixed reduce() tree); other lanes get 0.
template <class V, class L>
inline void attn_scores(const float* q, const typename L::T* k, int64_t ld, int64_t x0, int64_t n, int64_t d,
                        float* s) {
  using R = typename V::R;
  using T = typename L::T;
  const int64_t x1 = x0 + n;
  if constexpr (V::kReduce16 && V::W == kAttnTile) {
    R acc[kAttnTile];
    for (int x = 0; x < kAttnTile; ++x) acc[x] = V::zero();
    const int64_t dfull = d - d % V::W;
    for (int64_t c = 0; c < dfull; c += V::W) {
      const R qv = V::load(q + c);
#pragma GCC unroll 16
      for (int x = 0; x < kAttnTile; ++x)
        if (x >= x0 && x < x1) acc[x] = V::fma(qv, L::load(k + (x - x0) * ld + c), acc[x]);
    }
    if (dfull < d) {
      const auto rem = static_cast<size_t>(d - dfull);
      float qt[V::W];
      std::memset(qt, 0, sizeof(qt));
      std::memcpy(qt, q + dfull, rem * sizeof(float));
      const R qv = V::load(qt);
      for (int64_t x = x0; x < x1; ++x) {
        T kt[V::W];
        std::memset(kt, 0, sizeof(kt));
        std::memcpy(kt, k + (x - x0) * ld + dfull, rem * sizeof(T));
        acc[x] = V::fma(qv, L::load(kt), acc[x]);
      }
    }
    V::reduce16(acc, s);
  } else {
    for (int64_t x = 0; x < kAttnTile; ++x) s[x] = 0.0f;
    for (int64_t x = x0; x < x1; ++x) tile<V, L, 1, 1, false>(q, 0, k + (x - x0) * ld, ld, d, s + x, 0);
  }
}

// acc_g = acc_g * corr[g] + sum over visible x of p_g[x] * v_x for GB vectors
// at once, their accumulators in registers (NV registers of dv each).
template <class V, class L, int NV, int GB>
inline void attn_accumulate(const AttnFold& f, int64_t g0, const int64_t* lo, const int64_t* hi, const float* corr) {
  using R = typename V::R;
  using T = typename L::T;
  const T* vbase = static_cast<const T*>(f.v);  // lane x reads row x - x0
  R a[GB][NV];
  int64_t xl = kAttnTile, xh = -1;
  for (int gi = 0; gi < GB; ++gi) {
    const float* ag = f.acc + (g0 + gi) * f.dv;
    const R c = V::set1(corr[g0 + gi]);
    for (int j = 0; j < NV; ++j) a[gi][j] = V::mul(V::load(ag + j * V::W), c);
    if (lo[g0 + gi] <= hi[g0 + gi]) xl = imin(xl, lo[g0 + gi]), xh = imax(xh, hi[g0 + gi]);
  }
  for (int64_t x = xl; x <= xh; ++x) {
    const T* vr = vbase + (x - f.x0) * f.v_ld;
    R vv[NV];
    for (int j = 0; j < NV; ++j) vv[j] = L::load(vr + j * V::W);
    for (int gi = 0; gi < GB; ++gi) {
      if (x < lo[g0 + gi] || x > hi[g0 + gi]) continue;
      const R pv = V::set1(f.scores[(g0 + gi) * kAttnTile + x]);
      for (int j = 0; j < NV; ++j) a[gi][j] = V::fma(pv, vv[j], a[gi][j]);
    }
  }
  for (int gi = 0; gi < GB; ++gi)
    for (int j = 0; j < NV; ++j) V::store(f.acc + (g0 + gi) * f.dv + j * V::W, a[gi][j]);
}

// Vectors [g0, g1) in blocks of GB (then one at a time).
template <class V, class L, int NV, int GB>
inline void attn_accumulate_range(const AttnFold& f, int64_t g0, int64_t g1, const int64_t* lo, const int64_t* hi,
                                  const float* corr) {
  int64_t g = g0;
  for (; g + GB <= g1; g += GB) attn_accumulate<V, L, NV, GB>(f, g, lo, hi, corr);
  for (; g < g1; ++g) attn_accumulate<V, L, NV, 1>(f, g, lo, hi, corr);
}

// Register blocks for dv = NV * W; other widths take axpy's padded-tail path
// (the same fused multiply-add per value, so the bits do not depend on it).
template <class V, class L>
inline void attn_accumulate_all(const AttnFold& f, const int64_t* lo, const int64_t* hi, const float* corr) {
  constexpr int kRegs = V::W >= 16 ? 24 : 12;  // accumulator registers left beside the value row
  if (f.dv % V::W == 0) {
    switch (f.dv / V::W) {
      case 1: return attn_accumulate_range<V, L, 1, (kRegs >= 8 ? 8 : 1)>(f, 0, f.G, lo, hi, corr);
      case 2: return attn_accumulate_range<V, L, 2, kRegs / 2>(f, 0, f.G, lo, hi, corr);
      case 4: return attn_accumulate_range<V, L, 4, kRegs / 4>(f, 0, f.G, lo, hi, corr);
      case 8: return attn_accumulate_range<V, L, 8, (kRegs / 8 > 0 ? kRegs / 8 : 1)>(f, 0, f.G, lo, hi, corr);
      case 16: return attn_accumulate_range<V, L, 16, 1>(f, 0, f.G, lo, hi, corr);
      default: break;
    }
  }
  using T = typename L::T;
  const T* vbase = static_cast<const T*>(f.v);
  for (int64_t g = 0; g < f.G; ++g) {
    float* ag = f.acc + g * f.dv;
    for (int64_t c = 0; c < f.dv; ++c) ag[c] *= corr[g];
    for (int64_t x = lo[g]; x <= hi[g]; ++x) axpy_t<V, L>(f.scores[g * kAttnTile + x], vbase + (x - f.x0) * f.v_ld, ag, f.dv);
  }
}

template <class V, class L>
void attn_fold_t(const AttnFold& f) {
  using R = typename V::R;
  constexpr int NR = kAttnTile / V::W;
  static_assert(kAttnTile % V::W == 0, "a tile is whole registers");
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const auto* kbase = static_cast<const typename L::T*>(f.k);
  // Small fixed scratch: G is a block of query vectors (at most a few dozen).
  constexpr int64_t kMaxG = 64;
  int64_t lo[kMaxG], hi[kMaxG];
  float corr[kMaxG];
  for (int64_t g0 = 0; g0 < f.G; g0 += kMaxG) {
    AttnFold part = f;
    part.G = imin(kMaxG, f.G - g0);
    part.q = f.q + g0 * f.d;
    part.first = f.first + g0;
    part.last = f.last + g0;
    part.m = f.m + g0;
    part.l = f.l + g0;
    part.acc = f.acc + g0 * f.dv;
    part.scores = f.scores + g0 * kAttnTile;
    for (int64_t g = 0; g < part.G; ++g) {
      lo[g] = imax(part.first[g], f.x0);
      hi[g] = imin(part.last[g], f.x0 + f.n - 1);
      corr[g] = 1.0f;
      if (hi[g] < lo[g]) continue;  // nothing visible: the state stays as it is
      float* s = part.scores + g * kAttnTile;
      attn_scores<V, L>(part.q + g * f.d, kbase, f.k_ld, f.x0, f.n, f.d, s);
      float bm = kNegInf;
      for (int64_t x = 0; x < kAttnTile; ++x) {
        if (x < lo[g] || x > hi[g]) {
          s[x] = kNegInf;
          continue;
        }
        float v = s[x] * f.scale;
        if (f.softcap > 0) v = std::tanh(v / f.softcap) * f.softcap;
        s[x] = v;
        bm = v > bm ? v : bm;
      }
      const float mo = part.m[g], mn = mo > bm ? mo : bm;
      corr[g] = mo == kNegInf ? 0.0f : std::exp(mo - mn);
      const R mv = V::set1(mn);
      for (int j = 0; j < NR; ++j) V::store(s + j * V::W, V::exp(V::sub(V::load(s + j * V::W), mv)));
      for (int64_t x = 0; x < kAttnTile; ++x)
        if (x < lo[g] || x > hi[g]) s[x] = 0.0f;
      R sum = V::load(s);
      for (int j = 1; j < NR; ++j) sum = V::add(sum, V::load(s + j * V::W));
      part.l[g] = part.l[g] * corr[g] + V::reduce(sum);
      part.m[g] = mn;
    }
    attn_accumulate_all<V, L>(part, lo, hi, corr);
  }
}

template <class V>
void attn_fold(const AttnFold& f) {
  switch (f.dt) {
    case DType::BF16:
      return attn_fold_t<V, LoadBF16<V>>(f);
    case DType::F16:
      return attn_fold_t<V, LoadF16<V>>(f);
    default:
      return attn_fold_t<V, LoadF32<V>>(f);
  }
}
