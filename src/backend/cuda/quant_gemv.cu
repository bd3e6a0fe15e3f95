// Quantized weight kernels (see quant_gemv.h). The decode GEMV is memory
// bound like gemv.cu's bf16 one: a warp (or, for long rows / few rows, the 4
// warps of a block) owns an output row, stages the row's packed bytes through
// shared memory in 16-byte loads (GGUF blocks of 18/20/34 bytes are not
// 16-byte aligned, so each load reads aligned granules and the decode skips the
// row's offset), then consecutive lanes take consecutive groups of 4 values
// (8 lanes per 32-value block, 64 per 256-value K block), each dequantizing its
// 4 values in registers and multiplying them with a float4 load of x.
// Every dequantized value is exactly the CPU reference's, so y differs from
// the reference only by float32 summation order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/dispatch_rows.h"
#include "backend/cuda/gemv_epilogue.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_gemv.h"
#include "backend/cuda/quant_gemv_internal.h"
#include "backend/cuda/runtime.h"
#include "util/error.h"

namespace ingot::cuda {

namespace {

constexpr int kWarps = gemv::kWarpsPerBlock;
using gemv::kMulti;
using gemv::kPlain;
using gemv::kResidual;
using gemv::kSwiGlu;
using gemv::silu_f;

__device__ inline float f16_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(p[0] | (p[1] << 8))));
}

// value = a * b + c rounded twice, as the CPU's scalar code computes it (no FMA).
__device__ inline float mul_add(float a, float b, float c) { return __fadd_rn(__fmul_rn(a, b), c); }

// ---- one value anywhere in a row (dequantization, embedding) ----

// 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block (quant/formats.h).
__device__ inline void k_scale_min(const uint8_t* s, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

__device__ float value_at(const QuantMatrix& w, int64_t row, int64_t e) {
  const uint8_t* rp = w.data + row * w.row_bytes;
  switch (w.format) {
    case QuantFormat::Q8_0: {
      const uint8_t* p = rp + (e / 32) * 34;
      return __fmul_rn(f16_at(p), static_cast<float>(static_cast<int8_t>(p[2 + e % 32])));
    }
    case QuantFormat::Q4_0:
    case QuantFormat::Q4_1: {
      const bool has_min = w.format == QuantFormat::Q4_1;
      const uint8_t* p = rp + (e / 32) * (has_min ? 20 : 18);
      const float d = f16_at(p);
      const float m = has_min ? f16_at(p + 2) : __fmul_rn(-8.0f, d);
      const int i = static_cast<int>(e % 32);
      const uint8_t q = p[(has_min ? 4 : 2) + i % 16];
      return mul_add(d, static_cast<float>(i < 16 ? q & 0xF : q >> 4), m);
    }
    case QuantFormat::Q4_K:
    case QuantFormat::Q5_K: {
      const bool five = w.format == QuantFormat::Q5_K;
      const uint8_t* p = rp + (e / 256) * (five ? 176 : 144);
      const float d = f16_at(p), dmin = f16_at(p + 2);
      const int j = static_cast<int>(e % 256) / 32, l = static_cast<int>(e % 32);
      int sc, mn;
      k_scale_min(p + 4, j, &sc, &mn);
      const uint8_t q = p[(five ? 48 : 16) + 32 * (j / 2) + l];
      int v = j % 2 ? q >> 4 : q & 0xF;
      if (five && ((p[16 + l] >> j) & 1)) v += 16;
      return __fsub_rn(__fmul_rn(__fmul_rn(d, static_cast<float>(sc)), static_cast<float>(v)),
                       __fmul_rn(dmin, static_cast<float>(mn)));
    }
    case QuantFormat::Q6_K: {
      const uint8_t* p = rp + (e / 256) * 210;
      const int ee = static_cast<int>(e % 256), h = ee / 128, l = ee % 128;
      const uint8_t* ql = p + 64 * h;
      const uint8_t* qh = p + 128 + 32 * h;
      const int quarter = l / 32, i = l % 32;
      int lo = quarter & 1 ? ql[i + 32] : ql[i];
      lo = quarter >= 2 ? lo >> 4 : lo & 0xF;
      const int v = (lo | (((qh[i] >> (2 * quarter)) & 3) << 4)) - 32;
      const float sc = static_cast<float>(reinterpret_cast<const int8_t*>(p + 192)[ee / 16]);
      return __fmul_rn(__fmul_rn(f16_at(p + 208), sc), static_cast<float>(v));
    }
    case QuantFormat::Affine4:
    case QuantFormat::Affine8: {
      const bool four = w.format == QuantFormat::Affine4;
      const int v = four ? (rp[e / 2] >> (4 * (e % 2))) & 0xF : rp[e];
      const int64_t g = row * w.group_stride + e / w.group_size;
      return mul_add(w.scales[g], static_cast<float>(v), w.biases ? w.biases[g] : 0.0f);
    }
  }
  return 0.0f;
}

template <class T>
__device__ inline void store(T* out, int64_t i, float v) {
  if constexpr (sizeof(T) == 4)
    out[i] = v;
  else
    out[i] = __float2bfloat16_rn(v);
}

template <class T>
__global__ void dequant_rows_kernel(QuantMatrix w, int64_t r0, int64_t rows, T* out) {
  const int64_t total = rows * w.k;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    store(out, i, value_at(w, r0 + i / w.k, i % w.k));
}

__global__ void embedding_kernel(QuantMatrix w, const int32_t* ids, float* out) {
  const int64_t r = blockIdx.y;
  const int32_t id = ids[r];
  const bool ok = id >= 0 && id < w.m;
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < w.k; c += int64_t(gridDim.x) * blockDim.x)
    out[r * w.k + c] = ok ? value_at(w, id, c) : 0.0f;
}

// ---- decode GEMV ----

// Each format: kValues per block of kBytes, kChunk blocks staged per warp at a
// time (a whole number of 16-byte granules, so every chunk starts aligned
// like the row), and decode4: values 4g..4g+3 of one staged block (blk: the
// block's index in its row, for the affine groups).
template <QuantFormat F>
struct Fmt;

template <>
struct Fmt<QuantFormat::Q8_0> {
  static constexpr int kValues = 32, kBytes = 34, kChunk = 32;
  __device__ static void decode4(const uint8_t* b, int g, const QuantMatrix&, int64_t, int64_t, float (&v)[4]) {
    const float d = f16_at(b);
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(b[2 + 4 * g + i])));
  }
};

template <bool kMin>
struct Q4Fmt {
  static constexpr int kValues = 32, kBytes = kMin ? 20 : 18, kChunk = 32;
  __device__ static void decode4(const uint8_t* b, int g, const QuantMatrix&, int64_t, int64_t, float (&v)[4]) {
    const float d = f16_at(b);
    const float m = kMin ? f16_at(b + 2) : __fmul_rn(-8.0f, d);
    const uint8_t* qs = b + (kMin ? 4 : 2) + (4 * g) % 16;
    const int shift = g >= 4 ? 4 : 0;  // values 16..31 are the high nibbles
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = mul_add(d, static_cast<float>((qs[i] >> shift) & 0xF), m);
  }
};
template <>
struct Fmt<QuantFormat::Q4_0> : Q4Fmt<false> {};
template <>
struct Fmt<QuantFormat::Q4_1> : Q4Fmt<true> {};

template <int kBits>
struct AffineFmt {
  static constexpr int kValues = 32, kBytes = 32 * kBits / 8, kChunk = 32;
  __device__ static void decode4(const uint8_t* b, int g, const QuantMatrix& w, int64_t row, int64_t blk,
                                 float (&v)[4]) {
    const int64_t gi = row * w.group_stride + blk * 32 / w.group_size;
    const float sc = w.scales[gi], bi = w.biases ? w.biases[gi] : 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int q = kBits == 4 ? (b[2 * g + i / 2] >> (4 * (i % 2))) & 0xF : b[4 * g + i];
      v[i] = mul_add(sc, static_cast<float>(q), bi);
    }
  }
};
template <>
struct Fmt<QuantFormat::Affine4> : AffineFmt<4> {};
template <>
struct Fmt<QuantFormat::Affine8> : AffineFmt<8> {};

// Q4_K / Q5_K: the four values share sub-block j = 4g / 32 (its scale and min).
template <bool kFive>
struct QK45Fmt {
  static constexpr int kValues = 256, kBytes = kFive ? 176 : 144, kChunk = 4;
  __device__ static void decode4(const uint8_t* b, int g, const QuantMatrix&, int64_t, int64_t, float (&v)[4]) {
    const float d = f16_at(b), dmin = f16_at(b + 2);
    const int j = (4 * g) / 32, l = (4 * g) % 32;
    int sc, mn;
    k_scale_min(b + 4, j, &sc, &mn);
    const float dsc = __fmul_rn(d, static_cast<float>(sc)), dmn = __fmul_rn(dmin, static_cast<float>(mn));
    const uint8_t* q = b + (kFive ? 48 : 16) + 32 * (j / 2) + l;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int u = j % 2 ? q[i] >> 4 : q[i] & 0xF;
      if (kFive && ((b[16 + l + i] >> j) & 1)) u += 16;
      v[i] = __fsub_rn(__fmul_rn(dsc, static_cast<float>(u)), dmn);
    }
  }
};
template <>
struct Fmt<QuantFormat::Q4_K> : QK45Fmt<false> {};
template <>
struct Fmt<QuantFormat::Q5_K> : QK45Fmt<true> {};

// Q6_K: the four values share a 16-value group (its int8 scale) and a quarter of a half.
template <>
struct Fmt<QuantFormat::Q6_K> {
  static constexpr int kValues = 256, kBytes = 210, kChunk = 8;
  __device__ static void decode4(const uint8_t* b, int g, const QuantMatrix&, int64_t, int64_t, float (&v)[4]) {
    const int e = 4 * g, h = e / 128, l = e % 128, quarter = l / 32, i0 = l % 32;
    const uint8_t* ql = b + 64 * h + (quarter & 1 ? 32 : 0) + i0;
    const uint8_t* qh = b + 128 + 32 * h + i0;
    const float dsc = __fmul_rn(f16_at(b + 208), static_cast<float>(reinterpret_cast<const int8_t*>(b + 192)[e / 16]));
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int lo = (quarter >= 2 ? ql[i] >> 4 : ql[i]) & 0xF;
      const int u = (lo | (((qh[i] >> (2 * quarter)) & 3) << 4)) - 32;
      v[i] = __fmul_rn(dsc, static_cast<float>(u));
    }
  }
};

template <QuantFormat F>
constexpr int stage_vecs() {
  return (Fmt<F>::kChunk * Fmt<F>::kBytes + 15) / 16 + 1;  // + the row's misalignment
}

// Adds this thread's share of row `row` of w times the N rows of x into acc
// (reduced over the row's threads by reduce_row). WPR warps share a row:
// chunks go round-robin among them.
template <QuantFormat F, int N, int WPR>
__device__ inline void row_partials(const QuantMatrix& w, int64_t row, const float* __restrict__ x, uint4* stage,
                                    int lane, int sub, float (&acc)[N]) {
  using B = Fmt<F>;
  static_assert(B::kChunk * B::kBytes % 16 == 0, "chunks must stay 16-byte aligned");
  constexpr int kGroups = B::kValues / 4;  // 4-value groups per block
  const uint8_t* rp = w.data + row * w.row_bytes;
  const int mis = static_cast<int>(reinterpret_cast<uintptr_t>(rp) & 15);
  // The aligned granules holding the row (never past the granule of its last byte).
  const uint4* base = reinterpret_cast<const uint4*>(rp - mis);
  const int64_t k = w.k, nb = k / B::kValues;
  const uint8_t* s = reinterpret_cast<const uint8_t*>(stage) + mis;
  for (int64_t b0 = int64_t(sub) * B::kChunk; b0 < nb; b0 += int64_t(WPR) * B::kChunk) {
    const int nblk = static_cast<int>(nb - b0 < B::kChunk ? nb - b0 : B::kChunk);
    const int vecs = (mis + nblk * B::kBytes + 15) / 16;
    const uint4* src = base + b0 * B::kBytes / 16;
    for (int v = lane; v < vecs; v += 32) stage[v] = __ldg(src + v);
    __syncwarp();
    // Consecutive lanes take consecutive 4-value groups, so x loads are coalesced float4s.
    for (int t = lane; t < nblk * kGroups; t += 32) {
      const int blk = t / kGroups, g = t % kGroups;
      float wv[4];
      B::decode4(s + blk * B::kBytes, g, w, row, b0 + blk, wv);
      const int64_t xo = (b0 + blk) * B::kValues + 4 * g;
#pragma unroll
      for (int r = 0; r < N; ++r) {
        const float4 xv = __ldg(reinterpret_cast<const float4*>(x + r * k + xo));
        float a = acc[r];
        a = fmaf(wv[0], xv.x, a);
        a = fmaf(wv[1], xv.y, a);
        a = fmaf(wv[2], xv.z, a);
        a = fmaf(wv[3], xv.w, a);
        acc[r] = a;
      }
    }
    __syncwarp();  // the stage is refilled next
  }
}

// Epilogues (gemv_epilogue.cuh): for SwiGLU w[0] is the gate and w[1] the
// up projection; kMulti numbers the rows of up to three weights on one x
// (q/k/v) one after another.

template <QuantFormat F, int N, int WPR, int MODE>
__global__ void __launch_bounds__(kWarps * 32) quant_gemv_kernel(Segments sg, const float* __restrict__ x,
                                                                 const float* __restrict__ res) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int64_t row = int64_t(blockIdx.x) * (kWarps / WPR) + warp / WPR;
  const int sub = warp % WPR;
  int seg = 0;
  if constexpr (MODE == kMulti) {
    const int64_t m0 = sg.w[0].m, m01 = m0 + sg.w[1].m;
    seg = row < m0 ? 0 : row < m01 ? 1 : 2;
    row -= seg == 0 ? 0 : seg == 1 ? m0 : m01;
  }
  // Copied by constant indices (a dynamic index would move sg to local memory).
  QuantMatrix w = sg.w[0];
  float* y = sg.y[0];
  if (seg == 1) w = sg.w[1], y = sg.y[1];
  if (seg == 2) w = sg.w[2], y = sg.y[2];
  // (WPR > 1: the grid holds whole rows only, so a block never leaves here in part.)
  if (seg >= sg.count || row >= w.m) return;
  __shared__ uint4 stage[kWarps][stage_vecs<F>()];
  float acc[N], acc2[N];
#pragma unroll
  for (int r = 0; r < N; ++r) acc[r] = acc2[r] = 0.0f;
  row_partials<F, N, WPR>(w, row, x, stage[warp], lane, sub, acc);
  if constexpr (MODE == kSwiGlu) row_partials<F, N, WPR>(sg.w[1], row, x, stage[warp], lane, sub, acc2);
  gemv::reduce_and_store<N, WPR, MODE>(acc, acc2, lane, warp, res, y, w.m, row);
}

// ---- direct decode GEMV (Q4_0 / Q4_1 / Q8_0, the default) ----
//
// The staged kernel above spends its time on shared-memory round trips and
// per-value scalar decode. This one reads the weight straight from global
// memory: each lane owns 8 values of one 32-value block (4 lanes a block, so a
// warp's 2-byte loads cover 8 consecutive blocks = 144..272 contiguous bytes),
// the loads of several blocks are issued before any is used, and a warp owns
// one row (SwiGLU: the gate and up rows). Values are decoded without
// int->float conversions: a byte b
// placed in the mantissa of 2^23 reads as 2^23 + b, and one subtraction gives
// the exact quant. The block scale is applied once per block and lane:
// sum_i d*q_i*x_i = d * sum_i q_i*x_i (Q4_1 adds m * sum_i x_i), so y differs
// from the reference by float32 rounding only. Each row's sum depends on no
// other row, so fused forms (residual, SwiGLU, q/k/v) equal the plain ones bit
// for bit.
template <QuantFormat F>
struct Direct;

// Rows a warp of the direct kernel owns.
constexpr int kDirectRows = 1;


// Byte j of w as the float 2^23 + byte, minus `off` (exact for off < 2^23).
template <int J>
__device__ inline float byte_value(uint32_t w, float off) {
  return __int_as_float(static_cast<int>(__byte_perm(w, 0x4B000000u, 0x7540 + J))) - off;
}

// Raw words of one lane's share of a block: a = scale(s), b/c = quant bytes.
struct Raw {
  uint32_t a, b, c;
};

template <bool kMin>
struct DirectQ4 {
  static constexpr int kBytes = kMin ? 20 : 18;
  // Lane quarter q holds qs bytes 4q..4q+3: values 4q.. (low nibbles) and 16+4q.. (high).
  static constexpr int x0(int q) { return 4 * q; }
  static constexpr int x1(int q) { return 16 + 4 * q; }
  __device__ static Raw load(const uint8_t* blk, int q) {
    Raw r;
    r.a = kMin ? ld32_2(blk) : ld16(blk);
    r.b = ld32_2(blk + (kMin ? 4 : 2) + 4 * q);
    r.c = 0;
    return r;
  }
  __device__ static void decode(const Raw& r, float (&v)[8], float& d, float& m) {
    d = __half2float(__ushort_as_half(static_cast<unsigned short>(r.a & 0xFFFF)));
    m = kMin ? __half2float(__ushort_as_half(static_cast<unsigned short>(r.a >> 16))) : 0.0f;
    const float off = 8388608.0f + (kMin ? 0.0f : 8.0f);
    const uint32_t lo = r.b & 0x0F0F0F0Fu, hi = (r.b >> 4) & 0x0F0F0F0Fu;
    v[0] = byte_value<0>(lo, off), v[1] = byte_value<1>(lo, off), v[2] = byte_value<2>(lo, off);
    v[3] = byte_value<3>(lo, off), v[4] = byte_value<0>(hi, off), v[5] = byte_value<1>(hi, off);
    v[6] = byte_value<2>(hi, off), v[7] = byte_value<3>(hi, off);
  }
};
template <>
struct Direct<QuantFormat::Q4_0> : DirectQ4<false> {};
template <>
struct Direct<QuantFormat::Q4_1> : DirectQ4<true> {};

template <>
struct Direct<QuantFormat::Q8_0> {
  static constexpr int kBytes = 34;
  static constexpr int x0(int q) { return 8 * q; }
  static constexpr int x1(int q) { return 8 * q + 4; }
  __device__ static Raw load(const uint8_t* blk, int q) {
    return Raw{ld16(blk), ld32_2(blk + 2 + 8 * q), ld32_2(blk + 6 + 8 * q)};
  }
  __device__ static void decode(const Raw& r, float (&v)[8], float& d, float& m) {
    d = __half2float(__ushort_as_half(static_cast<unsigned short>(r.a)));
    m = 0.0f;
    const float off = 8388608.0f + 128.0f;  // int8 q: byte q ^ 0x80 = q + 128
    const uint32_t b = r.b ^ 0x80808080u, c = r.c ^ 0x80808080u;
    v[0] = byte_value<0>(b, off), v[1] = byte_value<1>(b, off), v[2] = byte_value<2>(b, off);
    v[3] = byte_value<3>(b, off), v[4] = byte_value<0>(c, off), v[5] = byte_value<1>(c, off);
    v[6] = byte_value<2>(c, off), v[7] = byte_value<3>(c, off);
  }
};

constexpr bool direct_format(QuantFormat f) {
  return f == QuantFormat::Q4_0 || f == QuantFormat::Q4_1 || f == QuantFormat::Q8_0;
}

// acc[j][r] += this lane's share of row rows[j] times x row r. RR rows, U
// blocks per row loaded ahead (RR * U loads of each kind in flight per lane).
template <QuantFormat F, int N, int RR, int U>
__device__ inline void direct_rows(const uint8_t* const (&rows)[RR], int64_t k, const float* __restrict__ x,
                                   int lane, float (&acc)[RR][N]) {
  using D = Direct<F>;
  constexpr bool kMin = F == QuantFormat::Q4_1;
  const int q = lane & 3;
  const int64_t nb = k / 32;
  for (int64_t b0 = lane >> 2; b0 < nb; b0 += 8 * U) {
    Raw raw[U][RR];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < RR; ++j)
        if (b0 + 8 * u < nb) raw[u][j] = D::load(rows[j] + (b0 + 8 * u) * D::kBytes, q);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t b = b0 + 8 * u;
      if (b >= nb) break;
      float xv[N][8], xs[N];
#pragma unroll
      for (int r = 0; r < N; ++r) {
        const float4 a = __ldg(reinterpret_cast<const float4*>(x + r * k + b * 32 + D::x0(q)));
        const float4 c = __ldg(reinterpret_cast<const float4*>(x + r * k + b * 32 + D::x1(q)));
        xv[r][0] = a.x, xv[r][1] = a.y, xv[r][2] = a.z, xv[r][3] = a.w;
        xv[r][4] = c.x, xv[r][5] = c.y, xv[r][6] = c.z, xv[r][7] = c.w;
        xs[r] = kMin ? ((a.x + a.y) + (a.z + a.w)) + ((c.x + c.y) + (c.z + c.w)) : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < RR; ++j) {
        float v[8], d, m;
        D::decode(raw[u][j], v, d, m);
#pragma unroll
        for (int r = 0; r < N; ++r) {
          float s = v[0] * xv[r][0];
#pragma unroll
          for (int i = 1; i < 8; ++i) s = fmaf(v[i], xv[r][i], s);
          float a = fmaf(d, s, acc[j][r]);
          if constexpr (kMin) a = fmaf(m, xs[r], a);
          acc[j][r] = a;
        }
      }
    }
  }
}

// Warp w owns row w' of its segment (w' its index there); SwiGLU loads the
// gate row then the up row (RR = 2R) against the same x. R = 1: four rows a
// warp, sharing each x float4, measured slower on the H200 (1B Q4_0 decode
// 681 against 1032 tok/s, bench/RESULTS.md).
template <QuantFormat F, int N, int MODE>
__global__ void __launch_bounds__(kWarps * 32) direct_gemv_kernel(Segments sg, const float* __restrict__ x,
                                                                  const float* __restrict__ res) {
  constexpr int R = kDirectRows;
  constexpr int RR = MODE == kSwiGlu ? 2 * R : R;
  constexpr int U = RR >= 8 ? 1 : 8 / RR;
  const int lane = threadIdx.x & 31;
  int64_t group = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  int seg = 0;
  if constexpr (MODE == kMulti) {
    const int64_t g0 = (sg.w[0].m + R - 1) / R, g1 = (sg.w[1].m + R - 1) / R;
    seg = group < g0 ? 0 : group < g0 + g1 ? 1 : 2;
    group -= seg == 0 ? 0 : seg == 1 ? g0 : g0 + g1;
  }
  QuantMatrix w = sg.w[0];
  float* y = sg.y[0];
  if (seg == 1) w = sg.w[1], y = sg.y[1];
  if (seg == 2) w = sg.w[2], y = sg.y[2];
  const int64_t row0 = group * R;
  if (seg >= sg.count || row0 >= w.m) return;
  // Rows past the end repeat row0 (loaded, never stored) so the loads stay unconditional.
  const uint8_t* rows[RR];
#pragma unroll
  for (int j = 0; j < R; ++j) {
    const int64_t rr = row0 + j < w.m ? row0 + j : row0;
    rows[j] = w.data + rr * w.row_bytes;
    if constexpr (MODE == kSwiGlu) rows[R + j] = sg.w[1].data + rr * sg.w[1].row_bytes;
  }
  float acc[RR][N];
#pragma unroll
  for (int j = 0; j < RR; ++j)
#pragma unroll
    for (int r = 0; r < N; ++r) acc[j][r] = 0.0f;
  direct_rows<F, N, RR, U>(rows, w.k, x, lane, acc);
#pragma unroll
  for (int j = 0; j < RR; ++j)
#pragma unroll
    for (int r = 0; r < N; ++r)
      for (int o = 16; o > 0; o >>= 1) acc[j][r] += __shfl_xor_sync(0xffffffff, acc[j][r], o);
  if (lane != 0) return;
#pragma unroll
  for (int j = 0; j < R; ++j) {
    if (row0 + j >= w.m) break;
#pragma unroll
    for (int r = 0; r < N; ++r) {
      const int64_t o = r * w.m + row0 + j;
      float v = acc[j][r];
      if constexpr (MODE == kResidual) v = res[o] + v;
      if constexpr (MODE == kSwiGlu) v = silu_f(v) * acc[R + j][r];
      y[o] = v;
    }
  }
}

// Q8_0 / Q4_0 / Q4_1 take the int8-activation GEMV (quant_gemv_int8.cu) where
// it applies; with float32 x they take the direct kernel (measured fastest on
// the H200: 1B Q4_0 decode 1032 tok/s against 726 staged, bench/RESULTS.md)
// unless their rows are not 2-byte aligned.
template <QuantFormat F, int N, int MODE>
void launch_direct(const Segments& sg, const float* x, const float* res) {
  constexpr int R = kDirectRows;
  int64_t groups = 0;
  const int segs = MODE == kSwiGlu ? 1 : sg.count;
  for (int i = 0; i < segs; ++i) groups += (sg.w[i].m + R - 1) / R;
  const unsigned grid = static_cast<unsigned>((groups + kWarps - 1) / kWarps);
  direct_gemv_kernel<F, N, MODE><<<grid, kWarps * 32, 0, stream()>>>(sg, x, res);
}

// A block per row when a row has more than one chunk to share and rows are long
// or few (so the GPU still has enough loads in flight), as gemv.cu decides
// for bf16; a row of one chunk would leave three of the four warps idle.
template <QuantFormat F>
bool block_per_row(int64_t m, int64_t k) {
  return k > int64_t(Fmt<F>::kChunk) * Fmt<F>::kValues && m < 16384 && (k >= 4096 || m < 4096);
}

template <QuantFormat F, int N, int MODE>
void launch_fn(const Segments& sg, const float* x, const float* res) {
  if constexpr (direct_format(F)) {
    bool even = true;  // the direct kernel's 2-byte loads
    for (int i = 0; i < (MODE == kSwiGlu ? 2 : sg.count); ++i)
      even = even && (reinterpret_cast<uintptr_t>(sg.w[i].data) & 1) == 0 && sg.w[i].row_bytes % 2 == 0;
    if (even) return launch_direct<F, N, MODE>(sg, x, res);
  }
  int64_t rows = 0;
  for (int i = 0; i < sg.count; ++i) rows += sg.w[i].m;
  if (block_per_row<F>(sg.w[0].m, sg.w[0].k)) {
    quant_gemv_kernel<F, N, kWarps, MODE><<<static_cast<unsigned>(rows), kWarps * 32, 0, stream()>>>(sg, x, res);
  } else {
    const unsigned grid = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
    quant_gemv_kernel<F, N, 1, MODE><<<grid, kWarps * 32, 0, stream()>>>(sg, x, res);
  }
}

template <QuantFormat F, int MODE>
void launch_f(const Segments& sg, const float* x, const float* res, int64_t n) {
  dispatch_rows(n, "quantized gemv", [&](auto nc) { launch_fn<F, decltype(nc)::value, MODE>(sg, x, res); });
}

template <int MODE>
void launch_mode(const Segments& sg, const float* x, const float* res, int64_t n) {
  const QuantMatrix& w = sg.w[0];
  INGOT_CHECK(n >= 1 && n <= kGemvMaxRows && w.k % quant_block_values(w.format) == 0 &&
                  (reinterpret_cast<uintptr_t>(x) & 15) == 0,
              "quantized gemv: bad shape or alignment");
  int64_t rows = 0;
  for (int i = 0; i < sg.count; ++i) rows += sg.w[i].m;
  if (rows == 0) return;
  if (int8x_gemv_applies(sg, MODE, n)) return launch_int8x_gemv(sg, MODE, x, res, n);
  switch (w.format) {
    case QuantFormat::Q8_0: launch_f<QuantFormat::Q8_0, MODE>(sg, x, res, n); break;
    case QuantFormat::Q4_0: launch_f<QuantFormat::Q4_0, MODE>(sg, x, res, n); break;
    case QuantFormat::Q4_1: launch_f<QuantFormat::Q4_1, MODE>(sg, x, res, n); break;
    case QuantFormat::Affine4: launch_f<QuantFormat::Affine4, MODE>(sg, x, res, n); break;
    case QuantFormat::Affine8: launch_f<QuantFormat::Affine8, MODE>(sg, x, res, n); break;
    case QuantFormat::Q4_K: launch_f<QuantFormat::Q4_K, MODE>(sg, x, res, n); break;
    case QuantFormat::Q5_K: launch_f<QuantFormat::Q5_K, MODE>(sg, x, res, n); break;
    case QuantFormat::Q6_K: launch_f<QuantFormat::Q6_K, MODE>(sg, x, res, n); break;
  }
  CUDA_LAUNCH_OK();
}

bool block_per_row_of(const QuantMatrix& w) {
  switch (w.format) {
    case QuantFormat::Q8_0: return block_per_row<QuantFormat::Q8_0>(w.m, w.k);
    case QuantFormat::Q4_0: return block_per_row<QuantFormat::Q4_0>(w.m, w.k);
    case QuantFormat::Q4_1: return block_per_row<QuantFormat::Q4_1>(w.m, w.k);
    case QuantFormat::Affine4: return block_per_row<QuantFormat::Affine4>(w.m, w.k);
    case QuantFormat::Affine8: return block_per_row<QuantFormat::Affine8>(w.m, w.k);
    case QuantFormat::Q4_K: return block_per_row<QuantFormat::Q4_K>(w.m, w.k);
    case QuantFormat::Q5_K: return block_per_row<QuantFormat::Q5_K>(w.m, w.k);
    case QuantFormat::Q6_K: return block_per_row<QuantFormat::Q6_K>(w.m, w.k);
  }
  return false;
}

Segments one(const QuantMatrix& w, float* y) {
  Segments sg{};
  sg.w[0] = w;
  sg.y[0] = y;
  sg.count = 1;
  return sg;
}

unsigned grid_for(int64_t total) { return static_cast<unsigned>(std::clamp<int64_t>((total + 255) / 256, 1, 65535)); }

}  // namespace

int64_t quant_block_values(QuantFormat f) {
  return f == QuantFormat::Q4_K || f == QuantFormat::Q5_K || f == QuantFormat::Q6_K ? 256 : 32;
}

bool quant_gemv_supported(QuantFormat) { return true; }

void launch_quant_gemv(const QuantMatrix& w, const float* x, float* y, int64_t n) {
  launch_mode<kPlain>(one(w, y), x, nullptr, n);
}

void launch_quant_gemv_residual(const QuantMatrix& w, const float* x, const float* res, float* y, int64_t n) {
  launch_mode<kResidual>(one(w, y), x, res, n);
}

bool quant_gemv_pair_applies(const QuantMatrix& a, const QuantMatrix& b) {
  return a.format == b.format && a.m == b.m && a.k == b.k && a.group_size == b.group_size;
}

void launch_quant_gemv_swiglu(const QuantMatrix& gate, const QuantMatrix& up, const float* x, float* y, int64_t n) {
  INGOT_CHECK(quant_gemv_pair_applies(gate, up), "quantized swiglu: gate and up differ in format or shape");
  Segments sg = one(gate, y);
  sg.w[1] = up;  // read by the SwiGLU epilogue; the grid covers gate's rows only
  launch_mode<kSwiGlu>(sg, x, nullptr, n);
}

bool quant_gemv_multi_applies(const QuantMatrix* w, int count) {
  if (count < 1 || count > 3) return false;
  for (int i = 0; i < count; ++i)
    if (w[i].format != w[0].format || w[i].k != w[0].k || w[i].m <= 0 || block_per_row_of(w[i]) != block_per_row_of(w[0]))
      return false;
  return true;
}

void launch_quant_gemv_multi(const QuantMatrix* w, float* const* y, int count, const float* x, int64_t n) {
  INGOT_CHECK(quant_gemv_multi_applies(w, count), "quantized multi gemv: weights differ in format, width or layout");
  Segments sg{};
  for (int i = 0; i < count; ++i) {
    sg.w[i] = w[i];
    sg.y[i] = y[i];
  }
  sg.count = count;
  launch_mode<kMulti>(sg, x, nullptr, n);
}

void launch_quant_dequant_rows(const QuantMatrix& w, int64_t r0, int64_t rows, void* out, DType out_dtype) {
  const int64_t total = rows * w.k;
  if (total == 0) return;
  if (out_dtype == DType::F32)
    dequant_rows_kernel<float><<<grid_for(total), 256, 0, stream()>>>(w, r0, rows, static_cast<float*>(out));
  else if (out_dtype == DType::BF16)
    dequant_rows_kernel<__nv_bfloat16>
        <<<grid_for(total), 256, 0, stream()>>>(w, r0, rows, static_cast<__nv_bfloat16*>(out));
  else
    fail(ErrorKind::Internal, "dequantize into ", dtype_name(out_dtype));
  CUDA_LAUNCH_OK();
}

void launch_quant_embedding(const QuantMatrix& w, const int32_t* ids, int64_t n, float* out) {
  if (n == 0 || w.k == 0) return;
  dim3 grid(static_cast<unsigned>(std::min<int64_t>((w.k + 255) / 256, 64)), static_cast<unsigned>(n));
  embedding_kernel<<<grid, 256, 0, stream()>>>(w, ids, out);
  CUDA_LAUNCH_OK();
}

}  // namespace ingot::cuda
