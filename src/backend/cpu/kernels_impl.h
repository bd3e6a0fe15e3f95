// Leaf kernels written once over a SIMD traits type V and instantiated in
// each ISA translation unit. Include this file only inside an anonymous
// namespace, after the standard and intrinsic headers, so that every ISA gets
// its own internal copy (no inline symbol may be shared across ISA flags).
//
// V provides: R (register), W (lanes), MX (x rows per streaming tile), PX
// (x rows per panel tile, many-row products), zero, load,
// load_bf16, load_f16, fma(a, b, c) = a * b + c, add, sub, mul, div, set1,
// store, exp (vector e^x), reduce (a fixed tree), prefetch, pin (keep a value
// in a register), and kReduce16 /
// reduce16 (16 registers to 16 sums, each in exactly reduce()'s order) and
// kReduce8Tree / reduce8_tree (the same for 8).
//
// The dot-product order is the invariant that makes batching safe: lane l of
// one accumulator sums the products at k = l, l + W, l + 2W, ... in order (the
// tail zero-padded into the same lanes), then reduce() adds the lanes in a
// fixed tree. Every kernel below that produces a dot follows exactly that
// sequence, whatever tile it is computed in, so a (row, column) result never
// depends on n or on its neighbours.

constexpr int64_t kPrefetchElems = 512;  // weights prefetched this far ahead on the streaming path

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

template <class V>
struct LoadF32 {
  using T = float;
  static typename V::R load(const float* p) { return V::load(p); }
};
template <class V>
struct LoadBF16 {
  using T = uint16_t;
  static typename V::R load(const uint16_t* p) { return V::load_bf16(p); }
};
template <class V>
struct LoadF16 {
  using T = uint16_t;
  static typename V::R load(const uint16_t* p) { return V::load_f16(p); }
};

// NX rows of x times NW rows of w, the whole k range.
template <class V, class L, int NX, int NW, bool kPrefetch>
inline void tile(const float* x, int64_t ldx, const typename L::T* w, int64_t ldw, int64_t k, float* y,
                 int64_t ldy) {
  using R = typename V::R;
  using T = typename L::T;
  R acc[NX][NW];
  for (int i = 0; i < NX; ++i)
    for (int r = 0; r < NW; ++r) acc[i][r] = V::zero();
  const int64_t kv = k - k % V::W;
  int64_t kk = 0;
  for (; kk < kv; kk += V::W) {
    if constexpr (kPrefetch)
      for (int r = 0; r < NW; ++r) V::prefetch(w + r * ldw + kk + kPrefetchElems);
    R xv[NX];
    for (int i = 0; i < NX; ++i) xv[i] = V::load(x + i * ldx + kk);
    for (int r = 0; r < NW; ++r) {
      R wv = L::load(w + r * ldw + kk);
      for (int i = 0; i < NX; ++i) acc[i][r] = V::fma(xv[i], wv, acc[i][r]);
    }
  }
  if (kk < k) {
    const int64_t rem = k - kk;
    float xt[NX][V::W];
    T wt[NW][V::W];
    std::memset(xt, 0, sizeof(xt));
    std::memset(wt, 0, sizeof(wt));
    for (int i = 0; i < NX; ++i)
      std::memcpy(xt[i], x + i * ldx + kk, static_cast<size_t>(rem) * sizeof(float));
    for (int r = 0; r < NW; ++r) std::memcpy(wt[r], w + r * ldw + kk, static_cast<size_t>(rem) * sizeof(T));
    R xv[NX];
    for (int i = 0; i < NX; ++i) xv[i] = V::load(xt[i]);
    for (int r = 0; r < NW; ++r) {
      R wv = L::load(wt[r]);
      for (int i = 0; i < NX; ++i) acc[i][r] = V::fma(xv[i], wv, acc[i][r]);
    }
  }
  for (int i = 0; i < NX; ++i)
    for (int r = 0; r < NW; ++r) y[i * ldy + r] = V::reduce(acc[i][r]);
}

// The same per-lane sequence as tile(), over k in [k0, k1) only: the
// accumulators live in `state` between calls (an exact store and reload), so
// splitting k into L1-sized blocks gives the same bits as one pass.
template <class V, int NX, int NW>
inline void tile_kblock(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t k0, int64_t k1,
                        int64_t k, typename V::R* state, float* y, int64_t ldy) {
  using R = typename V::R;
  R acc[NX][NW];
  for (int i = 0; i < NX; ++i)
    for (int r = 0; r < NW; ++r) acc[i][r] = k0 == 0 ? V::zero() : state[i * NW + r];
  const int64_t kv = imin(k1, k - k % V::W);
  int64_t kk = k0;
  for (; kk < kv; kk += V::W) {
    R xv[NX];
    for (int i = 0; i < NX; ++i) xv[i] = V::load(x + i * ldx + kk);
    for (int r = 0; r < NW; ++r) {
      R wv = V::load(w + r * ldw + kk);
      for (int i = 0; i < NX; ++i) acc[i][r] = V::fma(xv[i], wv, acc[i][r]);
    }
  }
  if (k1 == k && kk < k) {
    const int64_t rem = k - kk;
    float xt[NX][V::W], wt[NW][V::W];
    std::memset(xt, 0, sizeof(xt));
    std::memset(wt, 0, sizeof(wt));
    for (int i = 0; i < NX; ++i)
      std::memcpy(xt[i], x + i * ldx + kk, static_cast<size_t>(rem) * sizeof(float));
    for (int r = 0; r < NW; ++r)
      std::memcpy(wt[r], w + r * ldw + kk, static_cast<size_t>(rem) * sizeof(float));
    R xv[NX];
    for (int i = 0; i < NX; ++i) xv[i] = V::load(xt[i]);
    for (int r = 0; r < NW; ++r) {
      R wv = V::load(wt[r]);
      for (int i = 0; i < NX; ++i) acc[i][r] = V::fma(xv[i], wv, acc[i][r]);
    }
  }
  if (k1 == k) {
    for (int i = 0; i < NX; ++i)
      for (int r = 0; r < NW; ++r) y[i * ldy + r] = V::reduce(acc[i][r]);
  } else {
    for (int i = 0; i < NX; ++i)
      for (int r = 0; r < NW; ++r) state[i * NW + r] = acc[i][r];
  }
}

template <class V, int NW>
inline void tile_kblock_nx(int64_t nx, const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t k0,
                           int64_t k1, int64_t k, typename V::R* state, float* y, int64_t ldy) {
  switch (nx) {
    case 1:
      tile_kblock<V, 1, NW>(x, ldx, w, ldw, k0, k1, k, state, y, ldy);
      return;
    case 2:
      if constexpr (V::PX >= 2) tile_kblock<V, 2, NW>(x, ldx, w, ldw, k0, k1, k, state, y, ldy);
      return;
    case 3:
      if constexpr (V::PX >= 3) tile_kblock<V, 3, NW>(x, ldx, w, ldw, k0, k1, k, state, y, ldy);
      return;
    case 4:
      if constexpr (V::PX >= 4) tile_kblock<V, 4, NW>(x, ldx, w, ldw, k0, k1, k, state, y, ldy);
      return;
    default:
      return;
  }
}

// Rows of x in [0, nx) with nx <= V::MX, chosen at run time.
template <class V, class L, int NW, bool kPrefetch>
inline void tile_nx(int64_t nx, const float* x, int64_t ldx, const typename L::T* w, int64_t ldw, int64_t k,
                    float* y, int64_t ldy) {
  static_assert(V::MX <= 4);
  switch (nx) {
    case 1:
      tile<V, L, 1, NW, kPrefetch>(x, ldx, w, ldw, k, y, ldy);
      return;
    case 2:
      if constexpr (V::MX >= 2) tile<V, L, 2, NW, kPrefetch>(x, ldx, w, ldw, k, y, ldy);
      return;
    case 3:
      if constexpr (V::MX >= 3) tile<V, L, 3, NW, kPrefetch>(x, ldx, w, ldw, k, y, ldy);
      return;
    case 4:
      if constexpr (V::MX >= 4) tile<V, L, 4, NW, kPrefetch>(x, ldx, w, ldw, k, y, ldy);
      return;
    default:
      return;
  }
}

// Few x rows: stream the weights once, several rows of w per pass.
template <class V, class L>
void linear_stream(const LinearBlock& b) {
  using T = typename L::T;
  const T* w = static_cast<const T*>(b.w);
  constexpr int kWide = V::W >= 16 ? 8 : 4;
  for (int64_t i0 = 0; i0 < b.n; i0 += V::MX) {
    const int64_t nx = imin(V::MX, b.n - i0);
    const float* x = b.x + i0 * b.ldx;
    float* y = b.y + i0 * b.ldy;
    int64_t j = 0;
    if (nx <= 2)
      for (; j + kWide <= b.m; j += kWide)
        tile_nx<V, L, kWide, true>(nx, x, b.ldx, w + j * b.ldw, b.ldw, b.k, y + j, b.ldy);
    for (; j + 4 <= b.m; j += 4)
      tile_nx<V, L, 4, true>(nx, x, b.ldx, w + j * b.ldw, b.ldw, b.k, y + j, b.ldy);
    for (; j < b.m; ++j) tile_nx<V, L, 1, true>(nx, x, b.ldx, w + j * b.ldw, b.ldw, b.k, y + j, b.ldy);
  }
}

template <class V>
void convert_rows(const void* src, DType t, int64_t ld, int64_t rows, int64_t k, float* dst, int64_t ldd);

constexpr int64_t kMaxBlockRows = 128;

// Many x rows: each panel of 4 weight rows (as f32) is reused by a block of
// up to 128 x rows; k is walked in blocks so the working set stays in L1/L2.
// 16-bit weights are converted a group of rows at a time (linear_group_rows),
// once per call: every x block passes over the group before the next one is
// converted. The loop order never changes a (row, column) dot.
template <class V>
void linear_panels(const LinearBlock& b, float* scratch) {
  constexpr int64_t kPanel = 4;
  // x rows per block: the whole block (all of k) stays in L2 while every
  // panel of the group passes over it.
  constexpr int64_t kKBlock = 512;
  static_assert(V::PX >= 1 && V::PX <= 4);
  const int64_t nb = imin(kMaxBlockRows / V::PX * V::PX, imax(V::PX, 512 * 1024 / 4 / imax(1, b.k) / V::PX * V::PX));
  typename V::R state[kMaxBlockRows * kPanel];
  const int64_t ldp = b.k + 16;
  const size_t es = b.wdt == DType::F32 ? 4 : 2;
  const int64_t group = b.wdt == DType::F32 ? b.m : linear_group_rows(b.k);
  for (int64_t g0 = 0; g0 < b.m; g0 += group) {
    const int64_t g1 = imin(b.m, g0 + group);
    if (b.wdt != DType::F32)
      convert_rows<V>(static_cast<const uint8_t*>(b.w) + static_cast<size_t>(g0 * b.ldw) * es, b.wdt, b.ldw,
                      g1 - g0, b.k, scratch, ldp);
    for (int64_t x0 = 0; x0 < b.n; x0 += nb) {
      const int64_t x1 = imin(b.n, x0 + nb);
      for (int64_t j = g0; j < g1; j += kPanel) {
        const int64_t rows = imin(kPanel, g1 - j);
        const float* panel = b.wdt == DType::F32 ? static_cast<const float*>(b.w) + j * b.ldw
                                                  : scratch + (j - g0) * ldp;
        const int64_t ld = b.wdt == DType::F32 ? b.ldw : ldp;
        // k in L1-sized blocks: the panel slice stays in L1 while every x tile
        // of the block passes over it.
        for (int64_t k0 = 0; k0 < b.k; k0 += kKBlock) {
          const int64_t k1 = imin(b.k, k0 + kKBlock);
          for (int64_t i = x0; i < x1; i += V::PX) {
            const int64_t nx = imin(V::PX, x1 - i);
            const float* x = b.x + i * b.ldx;
            float* y = b.y + i * b.ldy + j;
            typename V::R* st = state + ((i - x0) / V::PX) * V::PX * kPanel;
            if (rows == kPanel) {
              tile_kblock_nx<V, 4>(nx, x, b.ldx, panel, ld, k0, k1, b.k, st, y, b.ldy);
            } else {
              for (int64_t r = 0; r < rows; ++r)
                tile_kblock_nx<V, 1>(nx, x, b.ldx, panel + r * ld, ld, k0, k1, b.k, st + r * V::PX, y + r,
                                     b.ldy);
            }
          }
        }
      }
    }
  }
}

template <class V>
void linear_block(const LinearBlock& b, float* scratch) {
  if (b.n <= V::MX) {
    switch (b.wdt) {
      case DType::F32:
        linear_stream<V, LoadF32<V>>(b);
        return;
      case DType::BF16:
        linear_stream<V, LoadBF16<V>>(b);
        return;
      case DType::F16:
        linear_stream<V, LoadF16<V>>(b);
        return;
      default:
        return;
    }
  }
  linear_panels<V>(b, scratch);
}

template <class V, class L>
float dot_t(const float* a, const void* b, int64_t k) {
  float out = 0;
  tile<V, L, 1, 1, false>(a, 0, static_cast<const typename L::T*>(b), 0, k, &out, 0);
  return out;
}

template <class V>
float dot(const float* a, const void* b, DType bdt, int64_t k) {
  switch (bdt) {
    case DType::BF16:
      return dot_t<V, LoadBF16<V>>(a, b, k);
    case DType::F16:
      return dot_t<V, LoadF16<V>>(a, b, k);
    default:
      return dot_t<V, LoadF32<V>>(a, b, k);
  }
}

// G rows of dot_rows_t at once: G accumulators, reduced together by the
// level's reduce16 (G = 16) or reduce8_tree (G = 8), each in reduce()'s order.
template <class V, class L, int G>
void dot_rows_group(const float* a, const typename L::T* bb, int64_t ldb, int64_t k, float* out) {
  using R = typename V::R;
  using T = typename L::T;
  R acc[G];
  for (int r = 0; r < G; ++r) acc[r] = V::zero();
  const int64_t kv = k - k % V::W;
  int64_t kk = 0;
  for (; kk < kv; kk += V::W) {
    R xv = V::load(a + kk);
    for (int r = 0; r < G; ++r) acc[r] = V::fma(xv, L::load(bb + r * ldb + kk), acc[r]);
  }
  if (kk < k) {
    const int64_t rem = k - kk;
    float xt[V::W];
    std::memset(xt, 0, sizeof(xt));
    std::memcpy(xt, a + kk, static_cast<size_t>(rem) * sizeof(float));
    R xv = V::load(xt);
    for (int r = 0; r < G; ++r) {
      T wt[V::W];
      std::memset(wt, 0, sizeof(wt));
      std::memcpy(wt, bb + r * ldb + kk, static_cast<size_t>(rem) * sizeof(T));
      acc[r] = V::fma(xv, L::load(wt), acc[r]);
    }
  }
  if constexpr (G == 16)
    V::reduce16(acc, out);
  else
    V::reduce8_tree(acc, out);
}

// out[r] = dot(a, b + r * ldb) for r in [0, rows): attention scores and the
// low-rank expand (k = rank, so the horizontal sums dominate). Levels with
// reduce16 / reduce8_tree sum 16 / 8 rows' accumulators together, each row
// in exactly reduce()'s order, so a row's bits do not depend on its group.
template <class V, class L>
void dot_rows_t(const float* a, const typename L::T* b, int64_t ldb, int64_t rows, int64_t k, float* out) {
  int64_t r0 = 0;
  if constexpr (V::kReduce16)
    for (; r0 + 16 <= rows; r0 += 16) dot_rows_group<V, L, 16>(a, b + r0 * ldb, ldb, k, out + r0);
  if constexpr (V::kReduce8Tree)
    for (; r0 + 8 <= rows; r0 += 8) dot_rows_group<V, L, 8>(a, b + r0 * ldb, ldb, k, out + r0);
  for (; r0 + 4 <= rows; r0 += 4) tile<V, L, 1, 4, false>(a, 0, b + r0 * ldb, ldb, k, out + r0, 0);
  for (; r0 < rows; ++r0) tile<V, L, 1, 1, false>(a, 0, b + r0 * ldb, ldb, k, out + r0, 0);
}

template <class V>
void dot_rows(const float* a, const void* b, DType bdt, int64_t ldb, int64_t rows, int64_t k, float* out) {
  switch (bdt) {
    case DType::BF16:
      dot_rows_t<V, LoadBF16<V>>(a, static_cast<const uint16_t*>(b), ldb, rows, k, out);
      return;
    case DType::F16:
      dot_rows_t<V, LoadF16<V>>(a, static_cast<const uint16_t*>(b), ldb, rows, k, out);
      return;
    default:
      dot_rows_t<V, LoadF32<V>>(a, static_cast<const float*>(b), ldb, rows, k, out);
      return;
  }
}

template <class V, class L>
void axpy_t(float a, const typename L::T* x, float* y, int64_t n) {
  using T = typename L::T;
  const typename V::R av = V::set1(a);
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) V::store(y + i, V::fma(av, L::load(x + i), V::load(y + i)));
  if (i < n) {
    T xt[V::W];
    float yt[V::W];
    std::memset(xt, 0, sizeof(xt));
    std::memset(yt, 0, sizeof(yt));
    std::memcpy(xt, x + i, static_cast<size_t>(n - i) * sizeof(T));
    std::memcpy(yt, y + i, static_cast<size_t>(n - i) * sizeof(float));
    V::store(yt, V::fma(av, L::load(xt), V::load(yt)));
    std::memcpy(y + i, yt, static_cast<size_t>(n - i) * sizeof(float));
  }
}

template <class V>
void axpy(float a, const void* x, DType xdt, float* y, int64_t n) {
  switch (xdt) {
    case DType::BF16:
      axpy_t<V, LoadBF16<V>>(a, static_cast<const uint16_t*>(x), y, n);
      return;
    case DType::F16:
      axpy_t<V, LoadF16<V>>(a, static_cast<const uint16_t*>(x), y, n);
      return;
    default:
      axpy_t<V, LoadF32<V>>(a, static_cast<const float*>(x), y, n);
      return;
  }
}

template <class V>
float sum_squares(const float* x, int64_t n) {
  float out = 0;
  tile<V, LoadF32<V>, 1, 1, false>(x, 0, x, 0, n, &out, 0);
  return out;
}

// Four accumulators: this one only feeds the bandwidth probe and reductions
// where order across calls does not matter.
template <class V>
float sum(const float* x, int64_t n) {
  using R = typename V::R;
  R a0 = V::zero(), a1 = V::zero(), a2 = V::zero(), a3 = V::zero();
  int64_t i = 0;
  for (; i + 4 * V::W <= n; i += 4 * V::W) {
    a0 = V::add(a0, V::load(x + i));
    a1 = V::add(a1, V::load(x + i + V::W));
    a2 = V::add(a2, V::load(x + i + 2 * V::W));
    a3 = V::add(a3, V::load(x + i + 3 * V::W));
  }
  float s = V::reduce(V::add(V::add(a0, a1), V::add(a2, a3)));
  for (; i < n; ++i) s += x[i];
  return s;
}

template <class V>
void scale_by(const float* x, float s, const float* w, bool unit_offset, float* y, int64_t n) {
  const typename V::R sv = V::set1(s), one = V::set1(1.0f);
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) {
    typename V::R v = V::mul(V::load(x + i), sv);
    if (w) v = V::mul(v, unit_offset ? V::add(one, V::load(w + i)) : V::load(w + i));
    V::store(y + i, v);
  }
  for (; i < n; ++i) {
    float v = x[i] * s;
    if (w) v = v * (unit_offset ? 1.0f + w[i] : w[i]);
    y[i] = v;
  }
}

// y = silu(g) * u (u null: y = silu(g)), silu(x) = x / (1 + exp(-x)) with the
// level's vector exp; the tail goes through a zero-padded register.
template <class V>
void silu_mul(const float* g, const float* u, float* y, int64_t n) {
  using R = typename V::R;
  const R one = V::set1(1.0f), zero = V::zero();
  auto f = [&](R gv, const float* up, float* out) {
    R s = V::div(gv, V::add(one, V::exp(V::sub(zero, gv))));
    V::store(out, up ? V::mul(s, V::load(up)) : s);
  };
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) f(V::load(g + i), u ? u + i : nullptr, y + i);
  if (i < n) {
    float gt[V::W], ut[V::W], yt[V::W];
    std::memset(gt, 0, sizeof(gt));
    std::memset(ut, 0, sizeof(ut));
    std::memcpy(gt, g + i, static_cast<size_t>(n - i) * sizeof(float));
    if (u) std::memcpy(ut, u + i, static_cast<size_t>(n - i) * sizeof(float));
    f(V::load(gt), u ? ut : nullptr, yt);
    std::memcpy(y + i, yt, static_cast<size_t>(n - i) * sizeof(float));
  }
}

// Applies f (register -> register) to x[0, n) into y; the tail goes through
// a zero-padded register, so every value takes the same arithmetic.
template <class V, class F>
inline void map_lanes(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) V::store(y + i, f(V::load(x + i)));
  if (i < n) {
    float t[V::W];
    std::memset(t, 0, sizeof(t));
    std::memcpy(t, x + i, static_cast<size_t>(n - i) * sizeof(float));
    V::store(t, f(V::load(t)));
    std::memcpy(y + i, t, static_cast<size_t>(n - i) * sizeof(float));
  }
}

// y = x * Phi(x) (exact GELU), Phi(x) = (1 + erf(x / sqrt 2)) / 2. erfc(a) for
// a = |x| / sqrt 2 by Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7):
// t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^(-a^2), t = 1 / (1 + p a); then
// Phi = 1 - erfc / 2 for x >= 0 and erfc / 2 below.
template <class V>
void gelu_erf(const float* x, float* y, int64_t n) {
  using R = typename V::R;
  const R one = V::set1(1.0f), half = V::set1(0.5f), zero = V::zero();
  map_lanes<V>(x, y, n, [&](R xv) {
    const R z = V::mul(xv, V::set1(0.70710678118654752f));
    const R a = V::max(z, V::sub(zero, z));
    const R t = V::div(one, V::fma(V::set1(0.3275911f), a, one));
    R p = V::set1(1.061405429f);
    p = V::fma(p, t, V::set1(-1.453152027f));
    p = V::fma(p, t, V::set1(1.421413741f));
    p = V::fma(p, t, V::set1(-0.284496736f));
    p = V::fma(p, t, V::set1(0.254829592f));
    const R half_erfc = V::mul(V::mul(V::mul(p, t), V::exp(V::sub(zero, V::mul(a, a)))), half);
    return V::mul(xv, V::select_neg(xv, half_erfc, V::sub(one, half_erfc)));
  });
}

// y = softmax(x) over n values: the maximum, e^(x - max) with the level's
// vector exp, then division by their sum.
template <class V>
void softmax_row(const float* x, float* y, int64_t n) {
  using R = typename V::R;
  float m = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  if (n >= V::W) {
    R mv = V::load(x);
    for (i = V::W; i + V::W <= n; i += V::W) mv = V::max(mv, V::load(x + i));
    float lanes[V::W];
    V::store(lanes, mv);
    for (float v : lanes) m = v > m ? v : m;
  }
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  const R mv = V::set1(m), floor = V::set1(87.0f), zero = V::zero();
  // The vector exp clamps its input at -87: below that (masked -inf scores
  // included) the true value is under FLT_MIN, so it is written as 0.
  auto ex = [&](R v) {
    const R d = V::sub(v, mv);
    return V::select_neg(V::add(d, floor), zero, V::exp(d));
  };
  R acc = V::zero();
  i = 0;
  for (; i + V::W <= n; i += V::W) {
    const R e = ex(V::load(x + i));
    V::store(y + i, e);
    acc = V::add(acc, e);
  }
  float s = V::reduce(acc);
  if (i < n) {
    float t[V::W];
    for (int l = 0; l < V::W; ++l) t[l] = m;
    std::memcpy(t, x + i, static_cast<size_t>(n - i) * sizeof(float));
    V::store(t, ex(V::load(t)));
    for (int64_t l = 0; l < n - i; ++l) s += (y[i + l] = t[l]);
  }
  const R inv = V::set1(1.0f / s);
  map_lanes<V>(y, y, n, [&](R v) { return V::mul(v, inv); });
}

// y = (x - mean) / sqrt(var + eps) * w + b over n values (b may be null).
template <class V>
void layer_norm_row(const float* x, const float* w, const float* b, float eps, float* y, int64_t n) {
  using R = typename V::R;
  const float mean = sum<V>(x, n) / static_cast<float>(n);
  const R mv = V::set1(mean);
  R acc = V::zero();
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) {
    const R c = V::sub(V::load(x + i), mv);
    acc = V::fma(c, c, acc);
  }
  float var = V::reduce(acc);
  for (; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  const float inv = 1.0f / std::sqrt(var / static_cast<float>(n) + eps);
  const R iv = V::set1(inv);
  for (i = 0; i + V::W <= n; i += V::W) {
    R v = V::mul(V::mul(V::sub(V::load(x + i), mv), iv), V::load(w + i));
    if (b) v = V::add(v, V::load(b + i));
    V::store(y + i, v);
  }
  for (; i < n; ++i) y[i] = (x[i] - mean) * inv * w[i] + (b ? b[i] : 0.0f);
}

template <class V, class L>
void to_f32_t(const typename L::T* src, int64_t n, float* dst) {
  using T = typename L::T;
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) V::store(dst + i, L::load(src + i));
  if (i < n) {
    T t[V::W];
    float o[V::W];
    std::memset(t, 0, sizeof(t));
    std::memcpy(t, src + i, static_cast<size_t>(n - i) * sizeof(T));
    V::store(o, L::load(t));
    std::memcpy(dst + i, o, static_cast<size_t>(n - i) * sizeof(float));
  }
}

template <class V>
void to_f32(const void* src, DType t, int64_t n, float* dst) {
  switch (t) {
    case DType::BF16:
      to_f32_t<V, LoadBF16<V>>(static_cast<const uint16_t*>(src), n, dst);
      return;
    case DType::F16:
      to_f32_t<V, LoadF16<V>>(static_cast<const uint16_t*>(src), n, dst);
      return;
    default:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
  }
}

template <class V>
void convert_rows(const void* src, DType t, int64_t ld, int64_t rows, int64_t k, float* dst, int64_t ldd) {
  const size_t es = t == DType::F32 ? 4 : 2;
  for (int64_t r = 0; r < rows; ++r)
    to_f32<V>(static_cast<const uint8_t*>(src) + static_cast<size_t>(r * ld) * es, t, k, dst + r * ldd);
}

// ---- Bulk GEMM (linear_bulk): outer-product form for many rows. Each
// output sums its products in k order (one fused multiply-add per k), a
// block of kBulkK at a time added to the stored partial sum; the tiling
// and thread split never change that order, so a row's bits do not depend
// on n either, but they differ from linear_block's lane order.

constexpr int kBulkMR = 6;  // x rows per micro tile (12 accumulators on AVX2)

// c[MR, 2W] (+)= a[MR, kc] (rows lda apart) * bp[kc, 2W] (packed); `cols`
// of the 2W columns are stored.
template <class V, int MR>
inline void bulk_micro(const float* a, int64_t lda, const float* bp, int64_t kc, float* c, int64_t ldc,
                       bool accumulate, int64_t cols) {
  using R = typename V::R;
  R c0[MR], c1[MR];
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = V::zero();
  for (int64_t kk = 0; kk < kc; ++kk) {
    const R b0 = V::load(bp + kk * 2 * V::W), b1 = V::load(bp + kk * 2 * V::W + V::W);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const R av = V::set1(a[i * lda + kk]);
      c0[i] = V::fma(av, b0, c0[i]);
      c1[i] = V::fma(av, b1, c1[i]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* ci = c + i * ldc;
    if (cols == 2 * V::W) {
      V::store(ci, accumulate ? V::add(V::load(ci), c0[i]) : c0[i]);
      V::store(ci + V::W, accumulate ? V::add(V::load(ci + V::W), c1[i]) : c1[i]);
    } else {
      float t[2 * V::W];
      V::store(t, c0[i]);
      V::store(t + V::W, c1[i]);
      for (int64_t j = 0; j < cols; ++j) ci[j] = accumulate ? ci[j] + t[j] : t[j];
    }
  }
}

template <class V>
inline void bulk_micro_rows(int64_t rows, const float* a, int64_t lda, const float* bp, int64_t kc, float* c,
                            int64_t ldc, bool accumulate, int64_t cols) {
  switch (rows) {
    case 6: return bulk_micro<V, 6>(a, lda, bp, kc, c, ldc, accumulate, cols);
    case 5: return bulk_micro<V, 5>(a, lda, bp, kc, c, ldc, accumulate, cols);
    case 4: return bulk_micro<V, 4>(a, lda, bp, kc, c, ldc, accumulate, cols);
    case 3: return bulk_micro<V, 3>(a, lda, bp, kc, c, ldc, accumulate, cols);
    case 2: return bulk_micro<V, 2>(a, lda, bp, kc, c, ldc, accumulate, cols);
    default: return bulk_micro<V, 1>(a, lda, bp, kc, c, ldc, accumulate, cols);
  }
}

// One block of rows x columns. `scratch` holds bulk_scratch_floats(m)
// floats: the block's weight columns packed k-major, 2W wide, per k block.
template <class V>
void linear_bulk_block(const LinearBlock& b, float* scratch) {
  constexpr int64_t NR = 2 * V::W;
  constexpr int64_t kRowChunk = 16 * kBulkMR;  // x rows x kBulkK stay in L2 while every panel passes
  const int64_t panels = (b.m + NR - 1) / NR;
  float* row = scratch + panels * NR * kBulkK;  // one 16-bit weight row segment as f32
  const size_t es = b.wdt == DType::F32 ? 4 : 2;
  for (int64_t k0 = 0; k0 < b.k; k0 += kBulkK) {
    const int64_t kc = imin(kBulkK, b.k - k0);
    for (int64_t p = 0; p < panels; ++p) {
      float* dst = scratch + p * NR * kc;
      const int64_t cols = imin(NR, b.m - p * NR);
      if (b.wdt == DType::F32) {
        const float* src = static_cast<const float*>(b.w) + p * NR * b.ldw + k0;
        for (int64_t kk = 0; kk < kc; ++kk)
          for (int64_t j = 0; j < NR; ++j) dst[kk * NR + j] = j < cols ? src[j * b.ldw + kk] : 0.0f;
      } else {
        for (int64_t j = 0; j < NR; ++j) {
          if (j < cols)
            to_f32<V>(static_cast<const uint8_t*>(b.w) + static_cast<size_t>((p * NR + j) * b.ldw + k0) * es, b.wdt,
                      kc, row);
          for (int64_t kk = 0; kk < kc; ++kk) dst[kk * NR + j] = j < cols ? row[kk] : 0.0f;
        }
      }
    }
    for (int64_t i0 = 0; i0 < b.n; i0 += kRowChunk) {
      const int64_t i1 = imin(b.n, i0 + kRowChunk);
      for (int64_t p = 0; p < panels; ++p) {
        const int64_t cols = imin(NR, b.m - p * NR);
        for (int64_t i = i0; i < i1; i += kBulkMR)
          bulk_micro_rows<V>(imin(kBulkMR, i1 - i), b.x + i * b.ldx + k0, b.ldx, scratch + p * NR * kc, kc,
                             b.y + i * b.ldy + p * NR, b.ldy, k0 > 0, cols);
      }
    }
  }
}

#include "backend/cpu/attention_impl.h"

template <class V>
KernelTable make_table(const char* name) {
  KernelTable t;
  t.name = name;
  t.lanes = V::W;
  t.linear_block = &linear_block<V>;
  t.linear_bulk_block = &linear_bulk_block<V>;
  t.dot = &dot<V>;
  t.dot_rows = &dot_rows<V>;
  t.axpy = &axpy<V>;
  t.sum_squares = &sum_squares<V>;
  t.sum = &sum<V>;
  t.scale_by = &scale_by<V>;
  t.to_f32 = &to_f32<V>;
  t.silu_mul = &silu_mul<V>;
  t.gelu = &gelu_erf<V>;
  t.softmax = &softmax_row<V>;
  t.layer_norm = &layer_norm_row<V>;
  t.attn_fold = &attn_fold<V>;
  // A block widens each 16-bit tile once for all its vectors, and 8-lane
  // levels score two vectors per key load: larger blocks pay there. AVX-512
  // keeps the 12 it was verified with (docs/cpu-backend.md).
  t.attn_block_vectors = V::W < 16 ? 48 : 12;
  return t;
}
