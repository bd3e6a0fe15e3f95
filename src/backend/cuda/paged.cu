// Paged K/V on the GPU (the pool layout is kv/'s, docs/kv-cache.md): the
// attention kernels of attention_kernels.cuh reading rows through a block
// table, with KV8/KV4 codes dequantized in the loads; the write kernel that
// stores new rows in their blocks (quantizing them exactly like kv/quant.cpp,
// so a GPU pool holds the same bytes as a CPU pool); and the gather.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/attention_kernels.cuh"
#include "backend/cuda/paged_rows.h"

namespace ingot::cuda {

namespace {

// Block and slot of token j (shifts when the block size is a power of two).
struct BlockIndex {
  int64_t bs;
  int shift;  // < 0: divide
  __device__ int64_t block(int64_t j) const { return shift >= 0 ? j >> shift : j / bs; }
  __device__ int64_t slot(int64_t j) const { return shift >= 0 ? j & (bs - 1) : j % bs; }
};

int shift_of(int64_t n) {
  if (n <= 0 || (n & (n - 1)) != 0) return -1;
  int s = 0;
  while ((int64_t{1} << s) < n) ++s;
  return s;
}

// Region r (0 K codes, 1 K params, 2 V codes, 3 V params) of the row holding
// token j of KV head kh; `rb` bytes (or floats, for params) per row.
__device__ inline const uint8_t* row_of(const uint8_t* const* blocks, const BlockIndex& ix, int r, int64_t j,
                                        int64_t kh, int64_t rb) {
  return blocks[4 * ix.block(j) + r] + (kh * ix.bs + ix.slot(j)) * rb;
}

// Unquantized rows (float32 or bf16) through the block table: the same dot
// and loads as attn::DenseKV, so results equal the contiguous store's.
template <typename T>
struct PagedRowsKV {
  const uint8_t* const* blocks;
  BlockIndex ix;
  int64_t d, krow, vrow_bytes;
  __device__ const T* key(int64_t j, int64_t kh) const {
    return reinterpret_cast<const T*>(row_of(blocks, ix, 0, j, kh, krow));
  }
  __device__ float dot(const float* qs, int64_t j, int64_t kh) const { return attn::dot_row(qs, key(j, kh), d); }
  __device__ void key8(int64_t j, int64_t kh, int64_t c8, float (&f)[8]) const { attn::load8(key(j, kh) + c8 * 8, f); }
  using VRow = const T*;
  __device__ VRow vrow(int64_t j, int64_t kh) const {
    return reinterpret_cast<const T*>(row_of(blocks, ix, 2, j, kh, vrow_bytes));
  }
  __device__ float val(const VRow& r, int64_t c) const { return attn::ld(r, c); }
};

template <int Bits>
__device__ inline float code_at(const uint8_t* c, int64_t x) {
  if (Bits == 8) return static_cast<float>(c[x]);
  return static_cast<float>((c[x >> 1] >> ((x & 1) * 4)) & 15);
}

// KV8 / KV4 rows: codes and their group's (scale, bias), dequantized as they
// load; KV4's open block is read from its exact float32 rows instead.
template <int Bits>
struct PagedQuantKV {
  const uint8_t* const* blocks;
  BlockIndex ix;
  int64_t d, dv, kgroup, vgroup, krow, vrow_bytes, kpar, vpar;
  int kshift, vshift;  // group shifts (< 0: divide)
  int64_t open_block;
  const float* open_k;
  const float* open_v;
  __device__ static int64_t group_of(int64_t x, int64_t g, int s) { return s >= 0 ? x >> s : x / g; }
  // The exact row of token j when it sits in the open block, else nullptr.
  __device__ const float* exact(const float* open, int64_t j, int64_t kh, int64_t dim) const {
    if (Bits != 4 || ix.block(j) != open_block) return nullptr;
    return open + (kh * ix.bs + ix.slot(j)) * dim;
  }
  __device__ float dot(const float* qs, int64_t j, int64_t kh) const {
    if (const float* e = exact(open_k, j, kh, d)) return attn::dot_row(qs, e, d);
    const uint8_t* c = row_of(blocks, ix, 0, j, kh, krow);
    const float* pr = reinterpret_cast<const float*>(row_of(blocks, ix, 1, j, kh, kpar * 4));
    float dot = 0;
    for (int64_t g0 = 0, gi = 0; g0 < d; g0 += kgroup, ++gi) {
      const float sc = pr[2 * gi], bi = pr[2 * gi + 1];
      for (int64_t x = g0; x < g0 + kgroup; ++x) dot = fmaf(qs[x], fmaf(code_at<Bits>(c, x), sc, bi), dot);
    }
    return dot;
  }
  __device__ void key8(int64_t j, int64_t kh, int64_t c8, float (&f)[8]) const {
    if (const float* e = exact(open_k, j, kh, d)) {
#pragma unroll
      for (int x = 0; x < 8; ++x) f[x] = e[c8 * 8 + x];
      return;
    }
    const uint8_t* c = row_of(blocks, ix, 0, j, kh, krow);
    const float* pr = reinterpret_cast<const float*>(row_of(blocks, ix, 1, j, kh, kpar * 4));
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int64_t x = c8 * 8 + e, gi = group_of(x, kgroup, kshift);
      f[e] = fmaf(code_at<Bits>(c, x), pr[2 * gi], pr[2 * gi + 1]);
    }
  }
  // A value row: its codes and group parameters, or (open KV4 block) its exact floats.
  struct VRow {
    const uint8_t* codes;
    const float* params;
    const float* exact;
  };
  __device__ VRow vrow(int64_t j, int64_t kh) const {
    return VRow{row_of(blocks, ix, 2, j, kh, vrow_bytes),
                reinterpret_cast<const float*>(row_of(blocks, ix, 3, j, kh, vpar * 4)), exact(open_v, j, kh, dv)};
  }
  __device__ float val(const VRow& r, int64_t x) const {
    if (Bits == 4 && r.exact) return r.exact[x];
    const int64_t gi = group_of(x, vgroup, vshift);
    return fmaf(code_at<Bits>(r.codes, x), r.params[2 * gi], r.params[2 * gi + 1]);
  }
};

// ---- Quantization, operation for operation as kv/quant.cpp (every product
// and sum rounded on its own: no contraction into FMAs), so the codes and
// parameters equal the CPU store's bit for bit.
__device__ inline uint8_t code_of(float x, float lo, float inv, float levels) {
  const float y = rintf(__fmul_rn(__fsub_rn(x, lo), inv));
  return static_cast<uint8_t>(y < 0.0f ? 0.0f : (levels < y ? levels : y));
}

__device__ float group_error(const float* x, int64_t n, float scale, float bias, float levels) {
  const float inv = scale > 0 ? __fdiv_rn(1.0f, scale) : 0.0f;
  float e = 0;
  for (int64_t c = 0; c < n; ++c) {
    const float d = __fsub_rn(__fadd_rn(__fmul_rn(static_cast<float>(code_of(x[c], bias, inv, levels)), scale), bias), x[c]);
    e = __fadd_rn(e, __fmul_rn(d, d));
  }
  return e;
}

__device__ bool refit(const float* x, int64_t n, float levels, float s, float b, float* ns, float* nb) {
  const float inv = __fdiv_rn(1.0f, s);
  double sq = 0, sx = 0, sqq = 0, sqx = 0;
  for (int64_t c = 0; c < n; ++c) {
    const double q = code_of(x[c], b, inv, levels);
    const double xc = x[c];
    sq = __dadd_rn(sq, q);
    sx = __dadd_rn(sx, xc);
    sqq = __dadd_rn(sqq, __dmul_rn(q, q));
    sqx = __dadd_rn(sqx, __dmul_rn(q, xc));
  }
  const double nd = static_cast<double>(n);
  const double den = __dsub_rn(__dmul_rn(nd, sqq), __dmul_rn(sq, sq));
  if (den <= 0) return false;
  *ns = __double2float_rn(__ddiv_rn(__dsub_rn(__dmul_rn(nd, sqx), __dmul_rn(sq, sx)), den));
  *nb = __double2float_rn(__ddiv_rn(__dsub_rn(sx, __dmul_rn(static_cast<double>(*ns), sq)), nd));
  return *ns > 0;
}

__device__ void fit_group(const float* x, int64_t n, float levels, bool search, float* scale, float* bias) {
  float lo = x[0], hi = x[0];
  for (int64_t c = 1; c < n; ++c) {
    lo = x[c] < lo ? x[c] : lo;
    hi = hi < x[c] ? x[c] : hi;
  }
  *scale = __fdiv_rn(__fsub_rn(hi, lo), levels);
  *bias = lo;
  if (!search || !(*scale > 0)) return;
  float best = group_error(x, n, *scale, *bias, levels);
  constexpr int kSteps = 6;
  constexpr float kSpan = 0.3f;
  for (int j = 0; j <= kSteps; ++j) {
    const float frac = __fdiv_rn(__fmul_rn(kSpan, static_cast<float>(j)), static_cast<float>(kSteps));
    const float s0 = __fdiv_rn(__fsub_rn(hi, lo), __fmul_rn(levels, __fsub_rn(1.0f, frac)));
    const float top = __fmul_rn(levels, s0);
    const float anchors[3] = {lo, __fsub_rn(hi, top), __fmul_rn(0.5f, __fsub_rn(__fadd_rn(lo, hi), top))};
    for (const float b0 : anchors) {
      float ns = 0, nb = 0;
      if (!refit(x, n, levels, s0, b0, &ns, &nb)) continue;
      const float e = group_error(x, n, ns, nb, levels);
      if (e < best) {
        best = e;
        *scale = ns;
        *bias = nb;
      }
    }
  }
}

// Where row i of a write goes: its block's four region addresses and its
// slot, and whether that block is a KV4 pool's open block (kept exact too).
// A sequence's rows from token `pos` on, through its block list ...
struct SeqWrites {
  const uint8_t* const* blocks;  // from the block of `pos`
  BlockIndex ix;
  int64_t pos, open_block;
  __device__ PagedWriteDesc operator()(int64_t i) const {
    return PagedWriteDesc{blocks + 4 * (ix.block(pos + i) - ix.block(pos)), ix.slot(pos + i)};
  }
  __device__ bool open(int64_t i) const { return ix.block(pos + i) == open_block; }
};
// ... or, in a replayed step, row i of every sequence from device memory: its
// table handle and position (pools without an open block).
struct DeviceWrites {
  const uint8_t* const* const* tables;
  const int32_t* positions;
  BlockIndex ix;
  __device__ PagedWriteDesc operator()(int64_t i) const {
    const int64_t pos = positions[i];
    return PagedWriteDesc{tables[i] + 4 * ix.block(pos), ix.slot(pos)};
  }
  __device__ bool open(int64_t) const { return false; }
};

// One thread per (row, group) of both planes: row i of [t, kvh, dim] goes where `at(i)` says.
template <class Where>
__global__ void quantize_rows_kernel(PagedBlocks kv, Where at, const float* k, const float* v, int64_t t) {
  int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nk = t * kv.kv_heads * (kv.k_dim / kv.k_group);
  const int64_t nv = t * kv.kv_heads * (kv.v_dim / kv.v_group);
  const bool is_v = idx >= nk;
  if (is_v) idx -= nk;
  if (idx >= (is_v ? nv : nk)) return;
  const int64_t dim = is_v ? kv.v_dim : kv.k_dim, group = is_v ? kv.v_group : kv.k_group, ng = dim / group;
  const int64_t row = idx / ng, gi = idx % ng, i = row / kv.kv_heads, h = row % kv.kv_heads;
  const float* x = (is_v ? v : k) + row * dim + gi * group;
  const float levels = kv.quant_bits == 8 ? 255.0f : 15.0f;
  float scale = 0, bias = 0;
  fit_group(x, group, levels, kv.quant_bits == 4, &scale, &bias);
  const float inv = scale > 0 ? __fdiv_rn(1.0f, scale) : 0.0f;
  const PagedWriteDesc w = at(i);
  const int64_t r = h * kv.block_size + w.slot;
  uint8_t* codes = const_cast<uint8_t*>(w.block[is_v ? 2 : 0]) + r * (is_v ? kv.v_row_bytes : kv.k_row_bytes);
  float* params = reinterpret_cast<float*>(const_cast<uint8_t*>(w.block[is_v ? 3 : 1])) +
                  r * (is_v ? kv.v_row_params : kv.k_row_params);
  params[2 * gi] = scale;
  params[2 * gi + 1] = bias;
  const int64_t g0 = gi * group;
  if (at.open(i)) {
    float* exact = (is_v ? kv.open_v : kv.open_k) + r * dim + g0;
    for (int64_t c = 0; c < group; ++c) exact[c] = x[c];
  }
  if (kv.quant_bits == 8) {
    for (int64_t c = 0; c < group; ++c) codes[g0 + c] = code_of(x[c], bias, inv, levels);
  } else {
    for (int64_t c = 0; c < group; c += 2)
      codes[(g0 + c) / 2] = static_cast<uint8_t>(code_of(x[c], bias, inv, levels) |
                                                 (code_of(x[c + 1], bias, inv, levels) << 4));
  }
}

// Threads of quantize_rows_kernel for t rows.
template <class Where>
void launch_quantize_rows(const PagedBlocks& kv, const Where& at, const void* k, const void* v, int64_t t) {
  const int64_t n = t * kv.kv_heads * (kv.k_dim / kv.k_group + kv.v_dim / kv.v_group);
  constexpr int kThreads = 128;
  quantize_rows_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream()>>>(
      kv, at, static_cast<const float*>(k), static_cast<const float*>(v), t);
}

// One block per (row, plane): the row's bytes copied into its block.
__global__ void write_rows_kernel(PagedBlocks kv, BlockIndex ix, int64_t pos, const uint8_t* k, const uint8_t* v) {
  const bool is_v = blockIdx.y == 1;
  const int64_t row = blockIdx.x, i = row / kv.kv_heads, h = row % kv.kv_heads;
  const int64_t rb = is_v ? kv.v_row_bytes : kv.k_row_bytes;
  const uint8_t* src = (is_v ? v : k) + row * rb;
  const int64_t p = pos + i, b = ix.block(p) - ix.block(pos);
  uint8_t* dst = const_cast<uint8_t*>(kv.blocks[4 * b + (is_v ? 2 : 0)]) + (h * ix.bs + ix.slot(p)) * rb;
  if (rb % 4 == 0 && (reinterpret_cast<uintptr_t>(src) & 3) == 0) {
    for (int64_t w = threadIdx.x; w < rb / 4; w += blockDim.x)
      reinterpret_cast<uint32_t*>(dst)[w] = reinterpret_cast<const uint32_t*>(src)[w];
  } else {
    for (int64_t w = threadIdx.x; w < rb; w += blockDim.x) dst[w] = src[w];
  }
}

// One block per (token, head): rows of `elem` copied, or codes dequantized as
// kv/quant.cpp's dequantize_row does (code · scale + bias, each rounded).
__global__ void gather_rows_kernel(PagedBlocks kv, BlockIndex ix, bool is_v, uint8_t* out) {
  const int64_t row = blockIdx.x, p = row / kv.kv_heads, h = row % kv.kv_heads;
  const int64_t rb = is_v ? kv.v_row_bytes : kv.k_row_bytes, dim = is_v ? kv.v_dim : kv.k_dim;
  const uint8_t* c = row_of(kv.blocks, ix, is_v ? 2 : 0, p, h, rb);
  if (kv.quant_bits == 0) {
    uint8_t* o = out + row * rb;
    for (int64_t w = threadIdx.x; w < rb; w += blockDim.x) o[w] = c[w];
    return;
  }
  float* o = reinterpret_cast<float*>(out) + row * dim;
  if (ix.block(p) == kv.open_block) {
    const float* exact = (is_v ? kv.open_v : kv.open_k) + (h * ix.bs + ix.slot(p)) * dim;
    for (int64_t x = threadIdx.x; x < dim; x += blockDim.x) o[x] = exact[x];
    return;
  }
  const int64_t group = is_v ? kv.v_group : kv.k_group, np = is_v ? kv.v_row_params : kv.k_row_params;
  const float* pr = reinterpret_cast<const float*>(row_of(kv.blocks, ix, is_v ? 3 : 1, p, h, np * 4));
  for (int64_t x = threadIdx.x; x < dim; x += blockDim.x) {
    const int64_t gi = x / group;
    const float code = kv.quant_bits == 8 ? code_at<8>(c, x) : code_at<4>(c, x);
    o[x] = __fadd_rn(__fmul_rn(code, pr[2 * gi]), pr[2 * gi + 1]);
  }
}

// One block per row: the butterflies of each stage touch disjoint pairs, so
// every value sees the additions of the CPU loop in the same order.
__global__ void hadamard_rows_kernel(float* x, int64_t dim, int64_t n, float norm) {
  extern __shared__ float y[];
  float* row = x + static_cast<int64_t>(blockIdx.x) * dim;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) y[c] = row[c];
  __syncthreads();
  const int64_t half = n / 2, pairs = dim / 2;
  for (int64_t hs = 1; hs < n; hs *= 2) {
    for (int64_t pi = threadIdx.x; pi < pairs; pi += blockDim.x) {
      const int64_t b0 = (pi / half) * n, q = pi % half;
      const int64_t i = b0 + (q / hs) * 2 * hs + q % hs, j = i + hs;
      const float a = y[i], b = y[j];
      y[i] = __fadd_rn(a, b);
      y[j] = __fsub_rn(a, b);
    }
    __syncthreads();
  }
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) row[c] = __fmul_rn(y[c], norm);
}

}  // namespace

void launch_hadamard_rows(float* x, int64_t rows, int64_t dim, int64_t n, float norm) {
  if (rows == 0 || n < 2) return;
  INGOT_CHECK(dim % n == 0 && (n & (n - 1)) == 0, "Hadamard block ", n, " of a row of ", dim);
  hadamard_rows_kernel<<<static_cast<unsigned>(rows), 64, static_cast<size_t>(dim) * sizeof(float), stream()>>>(
      x, dim, n, norm);
  CUDA_LAUNCH_OK();
}

void launch_paged_attention(const float* q, const PagedBlocks& kv, int64_t length, float* out, int64_t t, int64_t h,
                            const AttnParams& p) {
  if (t == 0) return;
  const BlockIndex ix{kv.block_size, shift_of(kv.block_size)};
  const int64_t d = kv.k_dim, dv = kv.v_dim, kvh = kv.kv_heads;
  if (kv.quant_bits == 0) {
    // Rows start 16-byte aligned (page-aligned regions, rows of a multiple of 8 elements when d % 8 == 0).
    if (kv.elem == DType::F32)
      attn::run(q, PagedRowsKV<float>{kv.blocks, ix, d, kv.k_row_bytes, kv.v_row_bytes}, true, out, t, h, d, length,
                kvh, dv, p);
    else if (kv.elem == DType::BF16)
      attn::run(q, PagedRowsKV<__nv_bfloat16>{kv.blocks, ix, d, kv.k_row_bytes, kv.v_row_bytes}, true, out, t, h, d,
                length, kvh, dv, p);
    else
      fail(ErrorKind::Unsupported, "CUDA paged attention over ", dtype_name(kv.elem), " rows");
    return;
  }
  auto quant = [&](auto bits) {
    constexpr int B = decltype(bits)::value;
    attn::run(q,
              PagedQuantKV<B>{kv.blocks, ix, d, dv, kv.k_group, kv.v_group, kv.k_row_bytes, kv.v_row_bytes,
                              kv.k_row_params, kv.v_row_params, shift_of(kv.k_group), shift_of(kv.v_group),
                              kv.open_block, kv.open_k, kv.open_v},
              true, out, t, h, d, length, kvh, dv, p);
  };
  if (kv.quant_bits == 8) quant(std::integral_constant<int, 8>{});
  else if (kv.quant_bits == 4) quant(std::integral_constant<int, 4>{});
  else fail(ErrorKind::InvalidArgument, "paged KV: ", kv.quant_bits, "-bit codes");
}

namespace {

// ---- Many sequences' decode rows in one launch (paged_rows.h).
struct PagedRowArg {
  const uint8_t* const* blocks;
  int64_t s, splits;  // keys; key splits of this row (blocks past it return at once)
  int64_t open_block;
  const float* open_k;
  const float* open_v;
};
struct PagedRowsArg {
  PagedRowArg r[kMaxBatchedRows];
};

// Builds a row's accessor from the pool geometry and the row's own table.
template <typename T>
struct MakeRowsKV {
  BlockIndex ix;
  int64_t d, krow, vrow_bytes;
  __device__ PagedRowsKV<T> operator()(const PagedRowArg& r) const { return {r.blocks, ix, d, krow, vrow_bytes}; }
};
template <int Bits>
struct MakeQuantKV {
  BlockIndex ix;
  int64_t d, dv, kgroup, vgroup, krow, vrow_bytes, kpar, vpar;
  int kshift, vshift;
  __device__ PagedQuantKV<Bits> operator()(const PagedRowArg& r) const {
    return {r.blocks, ix, d, dv, kgroup, vgroup, krow, vrow_bytes, kpar, vpar, kshift, vshift, r.open_block,
            r.open_k, r.open_v};
  }
};

// Where a launch finds its rows: in its arguments (planned on the host) ...
struct ArgRows {
  PagedRowsArg a;
  __device__ PagedRowArg operator()(int64_t i) const { return a.r[i]; }
};
// ... or, in a replayed step, in device memory: row i's table handle and key
// count, its splits planned by split_rule as the host plans them.
struct DeviceRows {
  const uint8_t* const* const* tables;
  const int32_t* kv_lens;
  int64_t window, h, split_target;
  __device__ PagedRowArg operator()(int64_t i) const {
    const int64_t s = kv_lens[i], keys = window > 0 && window < s ? window : s;
    return PagedRowArg{tables[i], s, attn::split_rule(split_target, h, keys), -1, nullptr, nullptr};
  }
};

template <class Make, class Rows>
__global__ void paged_rows_attention_kernel(const float* q, Rows rows, Make make, float* out, int64_t h,
                                            int64_t d, int64_t kvh, int64_t dv, AttnParams p, int64_t max_splits,
                                            float* part_ml, float* part_acc) {
  let_next_kernel_start();  // (pdl.cuh)
  extern __shared__ __align__(16) float smem[];
  const int64_t i = blockIdx.x / h, hh = blockIdx.x % h, kh = hh / (h / kvh);
  const PagedRowArg r = rows(i);
  if (static_cast<int64_t>(blockIdx.y) >= r.splits) return;  // the whole block: no barrier is left waiting
  const auto kv = make(r);
  const int64_t slot = (i * h + hh) * max_splits + blockIdx.y;
  // One query per sequence, its last position: q_offset = s - 1 as in the per-sequence launch.
  attn::attend_block(q + (i * h + hh) * d, kv, out + (i * h + hh) * dv, kh, d, dv, r.s, r.s - 1, p, r.splits,
                     blockIdx.y, r.splits > 1 ? part_ml + 2 * slot : nullptr,
                     r.splits > 1 ? part_acc + slot * dv : nullptr, smem);
}

template <class Rows>
__global__ void paged_rows_merge_kernel(const float* part_ml, const float* part_acc, float* out, Rows rows,
                                        int64_t h, int64_t max_splits, int64_t dv) {
  let_next_kernel_start();  // (pdl.cuh)
  const int64_t qh = blockIdx.x, splits = rows(qh / h).splits;
  if (splits <= 1) return;  // written by the attention kernel itself
  attn::merge_block(part_ml + 2 * qh * max_splits, part_acc + qh * max_splits * dv, out + qh * dv, splits, dv);
}

// The attention launch and, with key splits, the merge: `max_splits` bounds
// every row's own splits (blocks past a row's return at once).
template <class KV, class Make, class Rows>
void launch_rows(const float* q, const Make& make, const Rows& rows, int64_t n, int64_t max_splits, float* out,
                 int64_t h, int64_t d, int64_t kvh, int64_t dv, const AttnParams& p) {
  const attn::SplitScratch scratch(n * h, max_splits, dv);
  float *ml_p = scratch.ml(), *acc_p = scratch.acc();
  dim3 grid(static_cast<unsigned>(n * h), static_cast<unsigned>(max_splits));
  const size_t smem = attn::attend_smem_bytes(d, dv, sizeof(typename KV::VRow));
  paged_rows_attention_kernel<Make, Rows><<<grid, attn::kTile, smem, stream()>>>(q, rows, make, out, h, d, kvh, dv,
                                                                                 p, max_splits, ml_p, acc_p);
  CUDA_LAUNCH_OK();
  if (max_splits > 1) {
    paged_rows_merge_kernel<Rows><<<static_cast<unsigned>(n * h), 128, 0, stream()>>>(ml_p, acc_p, out, rows, h,
                                                                                      max_splits, dv);
    CUDA_LAUNCH_OK();
  }
}

template <class Make, class KV>
void paged_rows(const float* q, const Make& make, const PagedRowDesc* rows, int64_t n, float* out, int64_t h,
                int64_t d, int64_t kvh, int64_t dv, const AttnParams& p) {
  ArgRows a{};
  int64_t max_splits = 1;
  for (int64_t i = 0; i < n; ++i) {
    // The plan of attn::run for one query row over s keys (t = 1: one block per head).
    const int64_t keys = p.window > 0 ? std::min(p.window, rows[i].length) : rows[i].length;
    a.a.r[i] = PagedRowArg{rows[i].blocks, rows[i].length, attn::split_count(h, keys), rows[i].open_block,
                           rows[i].open_k, rows[i].open_v};
    max_splits = std::max(max_splits, a.a.r[i].splits);
  }
  launch_rows<KV>(q, make, a, n, max_splits, out, h, d, kvh, dv, p);
}

}  // namespace

void launch_paged_attention_rows(const float* q, const PagedBlocks& kv, const PagedRowDesc* rows, int64_t n,
                                 float* out, int64_t h, const AttnParams& p) {
  const BlockIndex ix{kv.block_size, shift_of(kv.block_size)};
  const int64_t d = kv.k_dim, dv = kv.v_dim, kvh = kv.kv_heads;
  INGOT_CHECK(dv <= attn::kTile * attn::kMaxDvPerThread, "attention: value head dim ", dv, " too large");
  INGOT_CHECK(h % kvh == 0, "paged attention rows: ", h, " heads over ", kvh, " KV heads");
  for (int64_t b0 = 0; b0 < n; b0 += kMaxBatchedRows) {
    const int64_t nb = std::min(kMaxBatchedRows, n - b0);
    const float* qb = q + b0 * h * d;
    float* ob = out + b0 * h * dv;
    if (kv.quant_bits == 0) {
      if (kv.elem == DType::F32)
        paged_rows<MakeRowsKV<float>, PagedRowsKV<float>>(qb, MakeRowsKV<float>{ix, d, kv.k_row_bytes, kv.v_row_bytes},
                                                          rows + b0, nb, ob, h, d, kvh, dv, p);
      else if (kv.elem == DType::BF16)
        paged_rows<MakeRowsKV<__nv_bfloat16>, PagedRowsKV<__nv_bfloat16>>(
            qb, MakeRowsKV<__nv_bfloat16>{ix, d, kv.k_row_bytes, kv.v_row_bytes}, rows + b0, nb, ob, h, d, kvh, dv, p);
      else
        fail(ErrorKind::Unsupported, "CUDA paged attention over ", dtype_name(kv.elem), " rows");
      continue;
    }
    auto quant = [&](auto bits) {
      constexpr int B = decltype(bits)::value;
      const MakeQuantKV<B> make{ix, d, dv, kv.k_group, kv.v_group, kv.k_row_bytes, kv.v_row_bytes, kv.k_row_params,
                                kv.v_row_params, shift_of(kv.k_group), shift_of(kv.v_group)};
      paged_rows<MakeQuantKV<B>, PagedQuantKV<B>>(qb, make, rows + b0, nb, ob, h, d, kvh, dv, p);
    };
    if (kv.quant_bits == 8) quant(std::integral_constant<int, 8>{});
    else if (kv.quant_bits == 4) quant(std::integral_constant<int, 4>{});
    else fail(ErrorKind::InvalidArgument, "paged KV: ", kv.quant_bits, "-bit codes");
  }
}

void launch_paged_attention_step_rows(const float* q, const PagedBlocks& kv, const uint8_t* const* const* tables,
                                      const int32_t* kv_lens, int64_t n, int64_t max_keys, float* out, int64_t h,
                                      const AttnParams& p) {
  if (n == 0) return;
  const BlockIndex ix{kv.block_size, shift_of(kv.block_size)};
  const int64_t d = kv.k_dim, dv = kv.v_dim, kvh = kv.kv_heads;
  INGOT_CHECK(dv <= attn::kTile * attn::kMaxDvPerThread, "attention: value head dim ", dv, " too large");
  INGOT_CHECK(h % kvh == 0 && (kv.quant_bits == 0 || kv.quant_bits == 8), "paged step rows: ", h, " heads over ",
              kvh, " KV heads, ", kv.quant_bits, "-bit codes");
  const int64_t keys = p.window > 0 ? std::min(p.window, max_keys) : max_keys;
  const DeviceRows rows{tables, kv_lens, p.window, h, attn::split_target()};
  const int64_t max_splits = attn::split_rule(rows.split_target, h, keys);
  if (kv.quant_bits == 8) {  // no open block: every row is read from its codes
    const MakeQuantKV<8> make{ix, d, dv, kv.k_group, kv.v_group, kv.k_row_bytes, kv.v_row_bytes, kv.k_row_params,
                              kv.v_row_params, shift_of(kv.k_group), shift_of(kv.v_group)};
    launch_rows<PagedQuantKV<8>>(q, make, rows, n, max_splits, out, h, d, kvh, dv, p);
  } else if (kv.elem == DType::F32)
    launch_rows<PagedRowsKV<float>>(q, MakeRowsKV<float>{ix, d, kv.k_row_bytes, kv.v_row_bytes}, rows, n, max_splits,
                                    out, h, d, kvh, dv, p);
  else if (kv.elem == DType::BF16)
    launch_rows<PagedRowsKV<__nv_bfloat16>>(q, MakeRowsKV<__nv_bfloat16>{ix, d, kv.k_row_bytes, kv.v_row_bytes}, rows,
                                            n, max_splits, out, h, d, kvh, dv, p);
  else
    fail(ErrorKind::Unsupported, "CUDA paged attention over ", dtype_name(kv.elem), " rows");
}

namespace {

struct PagedWriteArg {
  PagedWriteDesc r[kMaxBatchedRows];
};

// Where each row goes: from the launch's arguments (planned on the host) ...
struct ArgWrites {
  PagedWriteArg a;
  __device__ PagedWriteDesc operator()(int64_t i) const { return a.r[i]; }
};
// ... or, in a replayed step, from device memory (DeviceWrites, above).

// One block per (row, head, plane), as write_rows_kernel, each row into its own block.
// Float32 source rows (`from_f32`) are rounded to the pool's `elem` on the
// way, as the cast kernel rounds them (round to nearest even).
template <class Writes>
__global__ void write_rows_batched_kernel(Writes rows, int64_t kvh, int64_t bs, int64_t krb, int64_t vrb,
                                          const uint8_t* k, const uint8_t* v, bool from_f32, DType elem) {
  const bool is_v = blockIdx.y == 1;
  const int64_t row = blockIdx.x, i = row / kvh, h = row % kvh;
  const int64_t rb = is_v ? vrb : krb;
  const PagedWriteDesc w = rows(i);
  uint8_t* dst = const_cast<uint8_t*>(w.block[is_v ? 2 : 0]) + (h * bs + w.slot) * rb;
  if (from_f32) {
    const int64_t n = rb / (elem == DType::F32 ? 4 : 2);
    const float* src = reinterpret_cast<const float*>(is_v ? v : k) + row * n;
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
      if (elem == DType::BF16)
        reinterpret_cast<__nv_bfloat16*>(dst)[e] = __float2bfloat16_rn(src[e]);
      else if (elem == DType::F16)
        reinterpret_cast<__half*>(dst)[e] = __float2half_rn(src[e]);
      else
        reinterpret_cast<float*>(dst)[e] = src[e];
    }
    return;
  }
  const uint8_t* src = (is_v ? v : k) + row * rb;
  if (rb % 4 == 0 && (reinterpret_cast<uintptr_t>(src) & 3) == 0) {
    for (int64_t w = threadIdx.x; w < rb / 4; w += blockDim.x)
      reinterpret_cast<uint32_t*>(dst)[w] = reinterpret_cast<const uint32_t*>(src)[w];
  } else {
    for (int64_t w = threadIdx.x; w < rb; w += blockDim.x) dst[w] = src[w];
  }
}

}  // namespace

void launch_paged_write_rows(const PagedBlocks& kv, const PagedWriteDesc* rows, int64_t n, const void* k,
                             const void* v, bool from_f32) {
  INGOT_CHECK(kv.quant_bits == 0, "batched paged write of ", kv.quant_bits, "-bit codes");
  const int64_t src_elem = from_f32 ? 4 : (kv.elem == DType::F32 ? 4 : 2);
  const int64_t k_src_row = kv.k_dim * src_elem, v_src_row = kv.v_dim * src_elem;
  for (int64_t b0 = 0; b0 < n; b0 += kMaxBatchedRows) {
    const int64_t nb = std::min(kMaxBatchedRows, n - b0);
    ArgWrites a{};
    for (int64_t i = 0; i < nb; ++i) a.a.r[i] = rows[b0 + i];
    dim3 grid(static_cast<unsigned>(nb * kv.kv_heads), 2);
    write_rows_batched_kernel<<<grid, 64, 0, stream()>>>(
        a, kv.kv_heads, kv.block_size, kv.k_row_bytes, kv.v_row_bytes,
        static_cast<const uint8_t*>(k) + b0 * kv.kv_heads * k_src_row,
        static_cast<const uint8_t*>(v) + b0 * kv.kv_heads * v_src_row, from_f32, kv.elem);
    CUDA_LAUNCH_OK();
  }
}

void launch_paged_write_step_rows(const PagedBlocks& kv, const uint8_t* const* const* tables, const int32_t* positions,
                                  int64_t n, const void* k, const void* v, bool from_f32) {
  INGOT_CHECK(kv.quant_bits == 0 || kv.quant_bits == 8, "paged step write of ", kv.quant_bits, "-bit codes");
  if (n == 0) return;
  const DeviceWrites rows{tables, positions, BlockIndex{kv.block_size, shift_of(kv.block_size)}};
  if (kv.quant_bits == 8) {  // float32 rows, quantized as launch_paged_write quantizes them
    launch_quantize_rows(kv, rows, k, v, n);
    CUDA_LAUNCH_OK();
    return;
  }
  dim3 grid(static_cast<unsigned>(n * kv.kv_heads), 2);
  write_rows_batched_kernel<<<grid, 64, 0, stream()>>>(rows, kv.kv_heads, kv.block_size, kv.k_row_bytes,
                                                       kv.v_row_bytes, static_cast<const uint8_t*>(k),
                                                       static_cast<const uint8_t*>(v), from_f32, kv.elem);
  CUDA_LAUNCH_OK();
}

void launch_paged_write(const PagedBlocks& kv, int64_t pos, const void* k, const void* v, int64_t t) {
  if (t == 0) return;
  const BlockIndex ix{kv.block_size, shift_of(kv.block_size)};
  if (kv.quant_bits == 0) {
    dim3 grid(static_cast<unsigned>(t * kv.kv_heads), 2);
    write_rows_kernel<<<grid, 64, 0, stream()>>>(kv, ix, pos, static_cast<const uint8_t*>(k),
                                                 static_cast<const uint8_t*>(v));
  } else {
    launch_quantize_rows(kv, SeqWrites{kv.blocks, ix, pos, kv.open_block}, k, v, t);
  }
  CUDA_LAUNCH_OK();
}

void launch_paged_gather(const PagedBlocks& kv, bool is_v, void* out, int64_t len) {
  if (len == 0) return;
  const BlockIndex ix{kv.block_size, shift_of(kv.block_size)};
  gather_rows_kernel<<<static_cast<unsigned>(len * kv.kv_heads), 64, 0, stream()>>>(kv, ix, is_v,
                                                                                   static_cast<uint8_t*>(out));
  CUDA_LAUNCH_OK();
}

}  // namespace ingot::cuda
