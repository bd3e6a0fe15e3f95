// Q8_0 / Q4_0 / Q4_1 over rows interleaved by 8 (quant/interleave.h has the
// layout), compiled per instruction set: included by kernels_impl.h inside
// its anonymous namespace, after the helpers it uses.
//
// Each block of a row gives one exact integer dot with the activation block
// (the AVX2 16-bit partial sums stay below 2^15: a Q4 block adds 8 x 2
// products of a nibble and an int8, a Q8_0 run 2 products of two int8; so
// nothing saturates and VNNI gets the same integers); then, per row and block
// in column order:
//   acc = fma(float(dot), d * x.d16, acc)
//   off = fma(m, x.s16, off)                      Q4_1
//   off = fma(d * x.d16, -8 * x.sum, off)         Q4_0
// and the output is acc + off (Q8_0: acc). Every instruction set and every
// number of activation rows computes exactly this, so the bits match.

#if INGOT_QUANT_LEVEL > 0
inline __m256 load_f16x8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
#endif

// Asks for the bytes of the block that comes `kAhead` bytes after pb while
// this one is computed. A group's blocks follow one another in memory, yet
// with the hardware prefetcher alone the products waited on their weight
// loads (bench/RESULTS.md, 2026-12-07 16:40). Prefetches never fault, so
// reading past a weight's end is harmless.
template <int kBlock, int kAhead>
inline void prefetch_ahead(const uint8_t* pb) {
  for (int o = 0; o < kBlock + 64; o += 64) __builtin_prefetch(pb + kAhead + o, 0, 3);
}

struct Q8x8 {
  static constexpr GroupLayout kL = kQ8_0Groups;
  static constexpr int kBlock = kL.group_block();
  // One activation row per pass: a block's 8 runs and their signs would take
  // every register, so each row re-reads them from L1.
  static constexpr int kCols = 1;

#if INGOT_QUANT_LEVEL > 0
  static __m256i dots(const uint8_t* pb, const XBlock& xb) {
    int32_t xw[8];
    std::memcpy(xw, xb.q, 32);
    __m256i s = _mm256_setzero_si256();
    for (int t = 0; t < 8; ++t) {
      const __m256i w = load32(pb + kL.runs_offset() + 32 * t);
      // |w| as unsigned times x with w's sign: w * x in every byte lane.
      const __m256i a = _mm256_sign_epi8(w, w), b = _mm256_sign_epi8(_mm256_set1_epi32(xw[t]), w);
#if INGOT_QUANT_LEVEL == 2
      s = _mm256_dpbusd_epi32(s, a, b);
#else
      s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1)));
#endif
    }
    return s;
  }
#else
  static int32_t dot(const uint8_t* pb, int lane, const XBlock& xb) {
    int32_t s = 0;
    for (int t = 0; t < 8; ++t)
      for (int i = 0; i < 4; ++i)
        s += static_cast<int8_t>(pb[kL.runs_offset() + 32 * t + 4 * lane + i]) * xb.q[4 * t + i];
    return s;
  }
#endif

  template <int C>
  static void group(const uint8_t* p, const XBlock* x, int64_t nb, float* y, int64_t ldy) {
    for (int i = 0; i < C; ++i) {
#if INGOT_QUANT_LEVEL > 0
      __m256 acc = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* pb = p + b * kBlock;
        if (i == 0) prefetch_ahead<kBlock, 4 * kBlock>(pb);
        const XBlock& xb = x[i * nb + b];
        const __m256 dd = _mm256_mul_ps(load_f16x8(pb), _mm256_set1_ps(xb.d16));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots(pb, xb)), dd, acc);
      }
      _mm256_storeu_ps(y + i * ldy, acc);
#else
      for (int r = 0; r < kGroupRows; ++r) {
        float acc = 0;
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* pb = p + b * kBlock;
          const XBlock& xb = x[i * nb + b];
          acc = std::fma(static_cast<float>(dot(pb, r, xb)), f16v(pb + 2 * r) * xb.d16, acc);
        }
        y[i * ldy + r] = acc;
      }
#endif
    }
  }
};

template <bool kMin>
struct Q4x8 {
  static constexpr GroupLayout kL = kMin ? kQ4_1Groups : kQ4_0Groups;
  static constexpr int kBlock = kL.group_block();  // one block of a group
  static constexpr int kRuns = kL.runs_offset();   // offset of the nibble runs

#if INGOT_QUANT_LEVEL > 0
  // The 8 rows' nibble runs of one block, low and high nibbles apart.
  struct Unpacked {
    __m256i lo[4], hi[4];
  };
  static Unpacked unpack(const uint8_t* pb) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    Unpacked u;
    for (int t = 0; t < 4; ++t) {
      const __m256i w = load32(pb + kRuns + 32 * t);
      u.lo[t] = _mm256_and_si256(w, m4);
      u.hi[t] = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
    }
    return u;
  }
  // Lane r: the integer dot of row r's block with the activation block.
  static __m256i dots(const Unpacked& u, const XBlock& xb) {
    int32_t xw[8];
    std::memcpy(xw, xb.q, 32);
#if INGOT_QUANT_LEVEL == 2
    __m256i s = _mm256_setzero_si256();
    for (int t = 0; t < 4; ++t) {
      s = _mm256_dpbusd_epi32(s, u.lo[t], _mm256_set1_epi32(xw[t]));
      s = _mm256_dpbusd_epi32(s, u.hi[t], _mm256_set1_epi32(xw[4 + t]));
    }
    return s;
#else
    __m256i s = _mm256_setzero_si256();
    for (int t = 0; t < 4; ++t) {
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(u.lo[t], _mm256_set1_epi32(xw[t])));
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(u.hi[t], _mm256_set1_epi32(xw[4 + t])));
    }
    return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
#endif
  }
  // One block of one activation row into the 8 rows' accumulators.
  static void step(const uint8_t* pb, const Unpacked& u, __m256 d, const XBlock& xb, __m256& acc, __m256& off) {
    const __m256 dd = _mm256_mul_ps(d, _mm256_set1_ps(xb.d16));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots(u, xb)), dd, acc);
    if constexpr (kMin)
      off = _mm256_fmadd_ps(load_f16x8(pb + 2 * kGroupRows), _mm256_set1_ps(xb.s16), off);
    else
      off = _mm256_fmadd_ps(dd, _mm256_set1_ps(-8.0f * static_cast<float>(xb.sum)), off);
  }
#else
  // Row `lane`'s integer dot of one block (scalar).
  static int32_t dot(const uint8_t* pb, int lane, const XBlock& xb) {
    int32_t s = 0;
    for (int t = 0; t < 4; ++t)
      for (int i = 0; i < 4; ++i) {
        const uint8_t v = pb[kRuns + 32 * t + 4 * lane + i];
        s += (v & 0xF) * xb.q[4 * t + i] + (v >> 4) * xb.q[16 + 4 * t + i];
      }
    return s;
  }
  static void step_row(const uint8_t* pb, int lane, const XBlock& xb, float& acc, float& off) {
    const float dd = f16v(pb + 2 * lane) * xb.d16;
    acc = std::fma(static_cast<float>(dot(pb, lane, xb)), dd, acc);
    off = kMin ? std::fma(f16v(pb + 2 * kGroupRows + 2 * lane), xb.s16, off)
               : std::fma(dd, -8.0f * static_cast<float>(xb.sum), off);
  }
#endif

  // Activation rows per pass over a group's blocks (each block unpacked once).
  static constexpr int kCols = INGOT_QUANT_LEVEL == 2 ? 4 : 2;

  // y[i * ldy + r] for activation rows i < C (x + i * nb) and the group's rows r.
  template <int C>
  static void group(const uint8_t* p, const XBlock* x, int64_t nb, float* y, int64_t ldy) {
#if INGOT_QUANT_LEVEL > 0
    __m256 acc[C], off[C];
    for (int i = 0; i < C; ++i) acc[i] = _mm256_setzero_ps(), off[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* pb = p + b * kBlock;
      prefetch_ahead<kBlock, 8 * kBlock>(pb);
      const Unpacked u = unpack(pb);
      const __m256 d = load_f16x8(pb);
      for (int i = 0; i < C; ++i) step(pb, u, d, x[i * nb + b], acc[i], off[i]);
    }
    for (int i = 0; i < C; ++i) _mm256_storeu_ps(y + i * ldy, _mm256_add_ps(acc[i], off[i]));
#else
    for (int i = 0; i < C; ++i)
      for (int r = 0; r < kGroupRows; ++r) {
        float acc = 0, off = 0;
        for (int64_t b = 0; b < nb; ++b) step_row(p + b * kBlock, r, x[i * nb + b], acc, off);
        y[i * ldy + r] = acc + off;
      }
#endif
  }
};

// The last c < F::kCols activation rows of a pass, in one pass too (each
// block unpacked once for all of them, as group<kCols> does).
template <class F, int C = F::kCols - 1, class XB>
void group_rest(int64_t c, const uint8_t* p, const XB* x, int64_t nb, float* y, int64_t ldy) {
  if constexpr (C >= 1) {
    if (c == C) return F::template group<C>(p, x, nb, y, ldy);
    group_rest<F, C - 1>(c, p, x, nb, y, ldy);
  }
}

// Several weights of one format and width against the same x (q/k/v, gate
// and up): x is quantized once and one parallel pass covers every weight's
// tiles. Each output is the one linear_x8 gives for that weight alone.
template <class F>
void linear_many_x8(const float* x, int64_t n, const Weight* const* ws, int count, float* const* ys) {
  const int64_t k = ws[0]->cols(), nb = k / 32;
  constexpr int64_t kTile = 2;  // groups (16 rows) that stay in L1 while every x row passes
  std::vector<int64_t> first(static_cast<size_t>(count) + 1, 0);  // each weight's first tile
  for (int w = 0; w < count; ++w) {
    check_linear_shape(*ws[w], 32);
    if (ws[w]->cols() != k) fail(ErrorKind::InvalidArgument, "linear_many: weights of different widths");
    first[w + 1] = first[w] + (ws[w]->rows() / kGroupRows + kTile - 1) / kTile;
  }
  XRows xq(x, n, k);
  const size_t group_bytes = static_cast<size_t>(nb) * F::kBlock;
  cpu::pool().parallel_for(first[count], 1, [&](int64_t tb, int64_t te) {
    int w = 0;
    for (int64_t t = tb; t < te; ++t) {
      while (t >= first[w + 1]) ++w;
      const auto* data = static_cast<const uint8_t*>(ws[w]->data.raw());
      const int64_t m = ws[w]->rows(), groups = m / kGroupRows;
      const int64_t g0 = (t - first[w]) * kTile, g1 = groups < g0 + kTile ? groups : g0 + kTile;
      float* y = ys[w];
      int64_t i = 0;
      for (; i + F::kCols <= n; i += F::kCols)
        for (int64_t g = g0; g < g1; ++g)
          F::template group<F::kCols>(data + g * group_bytes, xq.blocks + i * nb, nb, y + i * m + g * kGroupRows, m);
      if (i < n)
        for (int64_t g = g0; g < g1; ++g)
          group_rest<F>(n - i, data + g * group_bytes, xq.blocks + i * nb, nb, y + i * m + g * kGroupRows, m);
    }
  });
}

template <class F>
void linear_x8(const float* x, int64_t n, const Weight& w, float* y) {
  const Weight* ws[] = {&w};
  linear_many_x8<F>(x, n, ws, 1, &y);
}
