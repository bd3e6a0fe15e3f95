// The attention tile fold (AttnFold in isa_table.h), written once over a SIMD
// traits type V; included by kernels_impl.h, so the same rules apply.
//
// What a query vector gets depends only on its own q, the tile's rows and its
// visible range, never on G or on the vectors beside it: a row computes the
// same bits alone (a decode step) or in a block of prompt rows, and stores
// that cut keys at the same tile boundaries (contiguous buffers, paged
// blocks) give the same bits.

// s[x] = q . k_(x - x0) for lanes x in [x0, x0 + n), other lanes 0; float32
// rows. Each score is one dot in lanes over d, and the keys of a block (16
// on AVX-512, 8 on AVX2) are reduced together by a transpose-add network;
// a level without one reduces key by key.
template <class V, class L, int RK, bool kFull>
inline void attn_scores_block(const float* q, const typename L::T* k, int64_t ld, int64_t x0, int64_t x1, int64_t xb,
                              int64_t d, float* s) {
  using R = typename V::R;
  R acc[RK];
  for (int x = 0; x < RK; ++x) acc[x] = V::zero();
  const int64_t dfull = d - d % V::W;
  for (int64_t c = 0; c < dfull; c += V::W) {
    const R qv = V::load(q + c);
#pragma GCC unroll 16
    for (int x = 0; x < RK; ++x)
      if (kFull || (xb + x >= x0 && xb + x < x1)) acc[x] = V::fma(qv, L::load(k + (xb + x - x0) * ld + c), acc[x]);
  }
  if (dfull < d) {
    const auto rem = static_cast<size_t>(d - dfull);
    float qt[V::W];
    typename L::T kt[V::W];
    std::memset(qt, 0, sizeof(qt));
    std::memcpy(qt, q + dfull, rem * sizeof(float));
    const R qv = V::load(qt);
    for (int x = 0; x < RK; ++x) {
      if (xb + x < x0 || xb + x >= x1) continue;
      std::memset(kt, 0, sizeof(kt));
      std::memcpy(kt, k + (xb + x - x0) * ld + dfull, rem * sizeof(kt[0]));
      acc[x] = V::fma(qv, L::load(kt), acc[x]);
    }
  }
  if constexpr (RK == 16)
    V::reduce16(acc, s + xb);
  else
    V::reduce8(acc, s + xb);
}

// A full tile (16 rows) takes the branch-free form.
template <class V, class L>
inline void attn_scores(const float* q, const typename L::T* k, int64_t ld, int64_t x0, int64_t n, int64_t d,
                        float* s) {
  constexpr int kRK = V::kReduce16 && V::W == kAttnTile ? 16 : V::kReduce8 ? 8 : 0;  // keys reduced together
  const int64_t x1 = x0 + n;
  const bool full = x0 == 0 && n == kAttnTile;
  if constexpr (kRK > 0) {
    for (int64_t xb = 0; xb < kAttnTile; xb += kRK)
      if (full) {
        attn_scores_block<V, L, kRK, true>(q, k, ld, x0, x1, xb, d, s);
      } else if (xb < x1 && xb + kRK > x0) {
        attn_scores_block<V, L, kRK, false>(q, k, ld, x0, x1, xb, d, s);
      } else {
        for (int64_t x = xb; x < xb + kRK; ++x) s[x] = 0.0f;
      }
  } else {
    for (int64_t x = 0; x < kAttnTile; ++x) s[x] = 0.0f;
    for (int64_t x = x0; x < x1; ++x) tile<V, L, 1, 1, false>(q, 0, k + (x - x0) * ld, ld, d, s + x, 0);
  }
}

// Scores of a full tile for QB vectors at once: each key row is loaded once
// for all of them. Every (vector, key) accumulator is the same chain of
// fused multiply-adds over d as attn_scores_block's and goes through the
// same reduction, so a vector gets the same bits either way; keys go KH at a
// time so the QB x KH accumulators stay in registers.
template <class V, class L, int RK, int QB, int KH>
inline void attn_scores_full_multi(const float* const* q, const typename L::T* k, int64_t ld, int64_t d,
                                   float* const* s) {
  using R = typename V::R;
  static_assert(RK % KH == 0, "keys in whole passes");
  for (int64_t xb = 0; xb < kAttnTile; xb += RK) {
    R tmp[QB][RK];
    for (int kh = 0; kh < RK; kh += KH) {
      R acc[QB][KH];
      for (int i = 0; i < QB; ++i)
        for (int x = 0; x < KH; ++x) acc[i][x] = V::zero();
      const typename L::T* kr = k + (xb + kh) * ld;
      for (int64_t c = 0; c < d; c += V::W) {
        R qv[QB];
        for (int i = 0; i < QB; ++i) qv[i] = V::load(q[i] + c);
#pragma GCC unroll 8
        for (int x = 0; x < KH; ++x) {
          const R kv = L::load(kr + x * ld + c);
          for (int i = 0; i < QB; ++i) acc[i][x] = V::fma(qv[i], kv, acc[i][x]);
        }
      }
      for (int i = 0; i < QB; ++i)
        for (int x = 0; x < KH; ++x) tmp[i][kh + x] = acc[i][x];
    }
    static_assert(RK == 8, "8-lane levels reduce 8 keys together");
    for (int i = 0; i < QB; ++i) V::reduce8(tmp[i], s[i] + xb);
  }
}

// Scores of every vector of the fold into f.scores. On 8-lane levels vectors
// that see the whole of a full tile go three at a time; the rest one by one.
// (AVX-512 scores one vector at a time: its 3-vector form failed a KV8 bit
// test on an Intel AVX-512 host, cause not found; docs/cpu-backend.md.)
template <class V, class L>
inline void attn_scores_all(const AttnFold& f, const typename L::T* kbase, const int64_t* lo, const int64_t* hi) {
  constexpr int kRK = V::W < 16 && V::kReduce8 ? 8 : 0;
  constexpr int kQB = 3;  // vectors per pass: 12 accumulators of the 16 registers
  constexpr int kKH = 4;
  int64_t g = 0;
  if constexpr (kRK > 0) {
    if (f.x0 == 0 && f.n == kAttnTile && f.d % V::W == 0) {
      const float* qs[kQB];
      float* ss[kQB];
      int nq = 0;
      for (int64_t i = 0; i < f.G; ++i) {
        if (lo[i] != 0 || hi[i] != kAttnTile - 1) continue;
        qs[nq] = f.q + i * f.d;
        ss[nq] = f.scores + i * kAttnTile;
        if (++nq == kQB) {
          attn_scores_full_multi<V, L, kRK, kQB, kKH>(qs, kbase, f.k_ld, f.d, ss);
          nq = 0;
        }
      }
      if (nq == 2)
        attn_scores_full_multi<V, L, kRK, 2, kKH>(qs, kbase, f.k_ld, f.d, ss);
      else if (nq == 1)
        attn_scores_full_multi<V, L, kRK, 1, kKH>(qs, kbase, f.k_ld, f.d, ss);
      for (; g < f.G; ++g)
        if ((lo[g] != 0 || hi[g] != kAttnTile - 1) && lo[g] <= hi[g])
          attn_scores<V, L>(f.q + g * f.d, kbase, f.k_ld, f.x0, f.n, f.d, f.scores + g * kAttnTile);
      return;
    }
  }
  for (; g < f.G; ++g)
    if (lo[g] <= hi[g]) attn_scores<V, L>(f.q + g * f.d, kbase, f.k_ld, f.x0, f.n, f.d, f.scores + g * kAttnTile);
}

// acc_g = acc_g * corr[g] + sum over visible x of p_g[x] * v_x over columns
// [c0, c0 + NV * W), for GB vectors at once, their accumulators in
// registers. kFull: every vector sees every lane (no per-lane test).
template <class V, class L, int NV, int GB, bool kFull>
inline void attn_accumulate(const AttnFold& f, int64_t g0, int64_t c0, const int64_t* lo, const int64_t* hi,
                            const float* corr) {
  using R = typename V::R;
  const auto* vbase = static_cast<const typename L::T*>(f.v) + c0;  // lane x reads row x - x0
  R a[GB][NV];
  int64_t xl = kAttnTile, xh = -1;
  for (int gi = 0; gi < GB; ++gi) {
    const float* ag = f.acc + (g0 + gi) * f.dv + c0;
    const R c = V::set1(corr[g0 + gi]);
    for (int j = 0; j < NV; ++j) a[gi][j] = V::mul(V::load(ag + j * V::W), c);
    if (lo[g0 + gi] <= hi[g0 + gi]) xl = imin(xl, lo[g0 + gi]), xh = imax(xh, hi[g0 + gi]);
  }
  for (int64_t x = xl; x <= xh; ++x) {
    const typename L::T* vr = vbase + (x - f.x0) * f.v_ld;
    R vv[NV];
    for (int j = 0; j < NV; ++j) {
      vv[j] = L::load(vr + j * V::W);
      if constexpr (GB > 1) V::pin(vv[j]);
    }
    for (int gi = 0; gi < GB; ++gi) {
      if (!kFull && (x < lo[g0 + gi] || x > hi[g0 + gi])) continue;
      const R pv = V::set1(f.scores[(g0 + gi) * kAttnTile + x]);
      for (int j = 0; j < NV; ++j) a[gi][j] = V::fma(pv, vv[j], a[gi][j]);
    }
  }
  for (int gi = 0; gi < GB; ++gi)
    for (int j = 0; j < NV; ++j) V::store(f.acc + (g0 + gi) * f.dv + c0 + j * V::W, a[gi][j]);
}

// The n < GB vectors from g0 in one block of n (B counts down to it).
template <class V, class L, int NV, int B>
inline void attn_accumulate_rest(const AttnFold& f, int64_t g0, int64_t n, int64_t c0, const int64_t* lo,
                                 const int64_t* hi, const float* corr, bool full) {
  if constexpr (B >= 1) {
    if (n != B) return attn_accumulate_rest<V, L, NV, B - 1>(f, g0, n, c0, lo, hi, corr, full);
    if (full)
      attn_accumulate<V, L, NV, B, true>(f, g0, c0, lo, hi, corr);
    else
      attn_accumulate<V, L, NV, B, false>(f, g0, c0, lo, hi, corr);
  }
}

// Vectors [0, G) in blocks of GB (then one block of the rest), columns in
// windows of NV registers.
template <class V, class L, int NV, int GB>
inline void attn_accumulate_range(const AttnFold& f, const int64_t* lo, const int64_t* hi, const float* corr) {
  auto all_full = [&](int64_t g, int64_t n) {
    for (int64_t i = g; i < g + n; ++i)
      if (lo[i] != 0 || hi[i] != kAttnTile - 1) return false;
    return true;
  };
  for (int64_t c0 = 0; c0 < f.dv; c0 += NV * V::W) {
    int64_t g = 0;
    for (; g + GB <= f.G; g += GB) {
      if (all_full(g, GB))
        attn_accumulate<V, L, NV, GB, true>(f, g, c0, lo, hi, corr);
      else
        attn_accumulate<V, L, NV, GB, false>(f, g, c0, lo, hi, corr);
    }
    // The vectors left (a decode step's few heads of one KV head, often all
    // of them) in one more block, so each value row is read once for them.
    if (g < f.G) attn_accumulate_rest<V, L, NV, GB - 1>(f, g, f.G - g, c0, lo, hi, corr, all_full(g, f.G - g));
  }
}

// Register blocks where dv is whole registers; other widths take axpy's
// padded-tail path (the same fused multiply-add per value, so the bits do
// not depend on it).
template <class V, class L>
inline void attn_accumulate_all(const AttnFold& f, const int64_t* lo, const int64_t* hi, const float* corr) {
  // Accumulators kept beside one value row and a broadcast: 32 registers
  // on AVX-512, 16 on AVX2.
  constexpr int kRegs = V::W >= 16 ? 24 : 8;
  constexpr int kWin = V::W >= 16 ? 8 : 4;  // value registers per column window
  if (f.dv % V::W == 0) {
    const int64_t nv = f.dv / V::W;
    if (nv == 1) return attn_accumulate_range<V, L, 1, kRegs>(f, lo, hi, corr);
    if (nv == 2) return attn_accumulate_range<V, L, 2, kRegs / 2>(f, lo, hi, corr);
    if (nv % kWin == 0) return attn_accumulate_range<V, L, kWin, kRegs / kWin>(f, lo, hi, corr);
    if (nv % 4 == 0) return attn_accumulate_range<V, L, 4, kRegs / 4>(f, lo, hi, corr);
  }
  const auto* vbase = static_cast<const typename L::T*>(f.v);
  for (int64_t g = 0; g < f.G; ++g) {
    float* ag = f.acc + g * f.dv;
    for (int64_t c = 0; c < f.dv; ++c) ag[c] *= corr[g];
    for (int64_t x = lo[g]; x <= hi[g]; ++x)
      axpy_t<V, L>(f.scores[g * kAttnTile + x], vbase + (x - f.x0) * f.v_ld, ag, f.dv);
  }
}

// Rows of L's type (float32, or 16-bit rows read in registers).
template <class V, class L>
void attn_fold_rows(const AttnFold& f) {
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
    }
    attn_scores_all<V, L>(part, kbase, lo, hi);
    for (int64_t g = 0; g < part.G; ++g) {
      corr[g] = 1.0f;
      if (hi[g] < lo[g]) continue;  // nothing visible: the state stays as it is
      float* s = part.scores + g * kAttnTile;
      const bool full = lo[g] == 0 && hi[g] == kAttnTile - 1;
      float bm = kNegInf;
      if (full && f.softcap <= 0) {
        const R sv = V::set1(f.scale);
        for (int j = 0; j < NR; ++j) V::store(s + j * V::W, V::mul(V::load(s + j * V::W), sv));
        for (int64_t x = 0; x < kAttnTile; ++x) bm = s[x] > bm ? s[x] : bm;
      } else {
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
      }
      const float mo = part.m[g], mn = mo > bm ? mo : bm;
      corr[g] = mo == kNegInf ? 0.0f : mo == mn ? 1.0f : std::exp(mo - mn);  // exp(0) is exactly 1
      const R mv = V::set1(mn);
      for (int j = 0; j < NR; ++j) V::store(s + j * V::W, V::exp(V::sub(V::load(s + j * V::W), mv)));
      if (!full)
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

// 16-bit rows are widened into f.convert once per tile, not once per query
// vector (exact: the same products as widening them in registers).
template <class V, class L>
void attn_widen_rows(const typename L::T* src, int64_t ld, int64_t n, int64_t dim, float* dst) {
  for (int64_t r = 0; r < n; ++r) to_f32_t<V, L>(src + r * ld, dim, dst + r * dim);
}

// A fold of this many query vectors or fewer (a decode step: the heads of one
// KV head) reads 16-bit rows in registers; a larger one (prompt rows) widens
// each tile once, since every vector then reads it again. The widening is
// exact, so every product takes the same float32 values either way.
constexpr int64_t kAttnInPlaceMaxG = 4;

template <class V>
void attn_fold(const AttnFold& f) {
  if (f.dt == DType::F32) return attn_fold_rows<V, LoadF32<V>>(f);
  if (f.G <= kAttnInPlaceMaxG)
    return f.dt == DType::BF16 ? attn_fold_rows<V, LoadBF16<V>>(f) : attn_fold_rows<V, LoadF16<V>>(f);
  AttnFold w = f;
  float* kf = f.convert;
  float* vf = f.convert + kAttnTile * f.d;
  const auto* k16 = static_cast<const uint16_t*>(f.k);
  const auto* v16 = static_cast<const uint16_t*>(f.v);
  if (f.dt == DType::BF16) {
    attn_widen_rows<V, LoadBF16<V>>(k16, f.k_ld, f.n, f.d, kf);
    attn_widen_rows<V, LoadBF16<V>>(v16, f.v_ld, f.n, f.dv, vf);
  } else {
    attn_widen_rows<V, LoadF16<V>>(k16, f.k_ld, f.n, f.d, kf);
    attn_widen_rows<V, LoadF16<V>>(v16, f.v_ld, f.n, f.dv, vf);
  }
  w.k = kf;
  w.v = vf;
  w.k_ld = f.d;
  w.v_ld = f.dv;
  w.dt = DType::F32;
  attn_fold_rows<V, LoadF32<V>>(w);
}
