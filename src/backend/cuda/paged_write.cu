// Paged K/V writes on the GPU: new rows stored in their blocks, quantized
// for KV8/KV4 exactly like kv/quant.cpp (so a GPU pool holds the same bytes
// as a CPU pool), one sequence's rows at a time or one row of every sequence
// in one launch (from the host's plan, or from device memory in a replayed step).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/kernels.h"
#include "backend/cuda/paged_index.cuh"
#include "backend/cuda/paged_rows.h"
#include "backend/cuda/runtime.h"

namespace ingot::cuda {

namespace {

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

struct PagedWriteArg {
  PagedWriteDesc r[kMaxBatchedRows];
};

// Where each row goes: from the launch's arguments (planned on the host) ...
struct ArgWrites {
  PagedWriteArg a;
  __device__ PagedWriteDesc operator()(int64_t i) const { return a.r[i]; }
};
// ... or, in a replayed step, from device memory (DeviceWrites, above).

// One block per (row, head, plane): row i's bytes copied to where `rows(i)`
// says (one sequence's rows from a position, or one row of each sequence).
// Float32 source rows (`from_f32`) are rounded to the pool's `elem` on the
// way, as the cast kernel rounds them (round to nearest even).
template <class Writes>
__global__ void write_rows_kernel(Writes rows, int64_t kvh, int64_t bs, int64_t krb, int64_t vrb, const uint8_t* k,
                                  const uint8_t* v, bool from_f32, DType elem) {
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
    write_rows_kernel<<<grid, 64, 0, stream()>>>(
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
  write_rows_kernel<<<grid, 64, 0, stream()>>>(rows, kv.kv_heads, kv.block_size, kv.k_row_bytes, kv.v_row_bytes,
                                               static_cast<const uint8_t*>(k), static_cast<const uint8_t*>(v),
                                               from_f32, kv.elem);
  CUDA_LAUNCH_OK();
}

void launch_paged_write(const PagedBlocks& kv, int64_t pos, const void* k, const void* v, int64_t t) {
  if (t == 0) return;
  const SeqWrites at{kv.blocks, BlockIndex{kv.block_size, shift_of(kv.block_size)}, pos, kv.open_block};
  if (kv.quant_bits == 0) {
    dim3 grid(static_cast<unsigned>(t * kv.kv_heads), 2);
    write_rows_kernel<<<grid, 64, 0, stream()>>>(at, kv.kv_heads, kv.block_size, kv.k_row_bytes, kv.v_row_bytes,
                                                 static_cast<const uint8_t*>(k), static_cast<const uint8_t*>(v), false,
                                                 kv.elem);
  } else {
    launch_quantize_rows(kv, at, k, v, t);
  }
  CUDA_LAUNCH_OK();
}

}  // namespace ingot::cuda
