// Paged K/V on the GPU (the pool layout is kv/'s, docs/kv-cache.md): the
// attention kernels of attention_kernels.cuh reading rows through a block
// table, with KV8/KV4 codes dequantized in the loads, and the gather. The
// writes are in paged_write.cu.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/attention_kernels.cuh"
#include "backend/cuda/paged_index.cuh"
#include "backend/cuda/paged_rows.h"

namespace ingot::cuda {

namespace {

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

// One block per (token, head): rows of `elem` copied, or codes dequantized as
// kv::dequantize_values does (code · scale + bias in one fused multiply-add).
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
    o[x] = __fmaf_rn(code, pr[2 * gi], pr[2 * gi + 1]);
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

void launch_paged_gather(const PagedBlocks& kv, bool is_v, void* out, int64_t len) {
  if (len == 0) return;
  const BlockIndex ix{kv.block_size, shift_of(kv.block_size)};
  gather_rows_kernel<<<static_cast<unsigned>(len * kv.kv_heads), 64, 0, stream()>>>(kv, ix, is_v,
                                                                                   static_cast<uint8_t*>(out));
  CUDA_LAUNCH_OK();
}

}  // namespace ingot::cuda
