// Launchers for the CUDA kernels (all on the backend's stream). Pointers are
// device pointers; activations are float32; `n` rows of width `d`.
#pragma once
#include <cstdint>

#include "ops/backend.h"
#include "tensor/dtype.h"

namespace ingot::cuda {

// The vector kernels read and write 16-byte pieces.
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

void launch_cast(const void* src, DType st, void* dst, DType dt, int64_t n);
void launch_embedding(const void* table, DType tdt, int64_t row_stride, const int32_t* ids, int64_t n, int64_t d,
                      float* out);
void launch_rms_norm(const float* x, const float* w, float* y, int64_t n, int64_t d, float eps, bool unit_offset);
void launch_layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t d, float eps);
void launch_rope(float* x, const int32_t* pos, int64_t t, int64_t h, int64_t d, const RopeSpec& spec);
// x [t, h, d] and x2 [t, h2, d] rotated at the same positions in one launch.
void launch_rope_pair(float* x, int64_t h, float* x2, int64_t h2, const int32_t* pos, int64_t t, int64_t d,
                      const RopeSpec& spec);
void launch_softmax(const float* x, float* y, int64_t n, int64_t d);
void launch_unary(UnaryOp op, const float* x, float* y, int64_t n);
void launch_binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n, int64_t bn);
void launch_glu(GluOp op, const float* g, const float* u, float* y, int64_t n);
void launch_scale(const float* x, float* y, int64_t n, float s, float softcap);
void launch_add_bias(float* y, const float* b, int64_t n, int64_t m);
void launch_attention(const float* q, const void* k, const void* v, DType kvdt, float* out, int64_t t, int64_t h,
                      int64_t d, int64_t s, int64_t kvh, int64_t dv, const AttnParams& p);
// A paged K/V pool as the paged kernels see it (paged.cu, paged_write.cu; kv/ fills it in and
// owns the layout, docs/kv-cache.md): for each table block, the device
// addresses of its four regions (K codes, K params, V codes, V params), each
// holding [kv_heads, block_size, row]. Quantized rows are affine codes (8-bit,
// or 4-bit two per byte, low nibble first) with float32 (scale, bias) per group.
struct PagedBlocks {
  const uint8_t* const* blocks = nullptr;  // device [n * 4]
  int64_t block_size = 0, kv_heads = 0;
  int quant_bits = 0;       // 0: rows of `elem`; 8 or 4: quantized
  DType elem = DType::F32;  // unquantized rows: F32 or BF16
  int64_t k_dim = 0, v_dim = 0, k_group = 0, v_group = 0;
  int64_t k_row_bytes = 0, v_row_bytes = 0, k_row_params = 0, v_row_params = 0;
  // KV4: table block `open_block` (counted from table block 0, also in a
  // write whose `blocks` start later) is kept exact beside its codes: float32
  // rows [kv_heads, block_size, dim] in the rotated basis, device memory. The
  // write stores them, attention and the gather read them instead of codes.
  int64_t open_block = -1;
  float* open_k = nullptr;
  float* open_v = nullptr;
};
// Attention of q [t, h, k_dim] over the first `length` tokens of the table
// -> out [t, h, v_dim]; the same kernels and launch plan as launch_attention.
void launch_paged_attention(const float* q, const PagedBlocks& kv, int64_t length, float* out, int64_t t, int64_t h,
                            const AttnParams& p);
// Rows [pos, pos + t) of both planes from k [t, kv_heads, k_dim] and v (rows of
// `elem`, or float32 quantized on the way, bit for bit like kv/quant.cpp);
// kv.blocks starts at table block pos / block_size.
void launch_paged_write(const PagedBlocks& kv, int64_t pos, const void* k, const void* v, int64_t t);
// Rows [0, len) of one plane -> out [len, kv_heads, dim]: rows of `elem`, or float32 dequantized.
void launch_paged_gather(const PagedBlocks& kv, bool is_v, void* out, int64_t len);
// In place, each of `rows` rows of `dim` floats: x <- H x per block of `n`
// values (n a power of two dividing dim), H the Sylvester Hadamard matrix
// scaled by `norm` -- bit for bit kv/quant.cpp's hadamard_row.
void launch_hadamard_rows(float* x, int64_t rows, int64_t dim, int64_t n, float norm);

// Ops of the hybrid and MoE families. y = x / sqrt(sum(x^2) + eps) per row of d.
void launch_l2_norm(const float* x, float* y, int64_t n, int64_t d, float eps);
// dst[rows[i]] += w[i] * src[i] for i in order (rows and w are device arrays of n);
// `unique_rows` lets different i run in parallel.
void launch_scatter_add_rows(float* dst, const float* src, const int64_t* rows, const float* w, int64_t n, int64_t d,
                             bool unique_rows);
// recurrent.cu. Depthwise causal conv: x [T, C], w [C, K], state [K-1, C]
// (replaced by the last K-1 inputs) -> y [T, C].
void launch_causal_conv1d(const float* x, const float* w, float* state, float* y, int64_t T, int64_t C, int64_t K);
// Gated delta rule (ops/backend.h): q, k [T, hk, dk], v [T, hv, dv], g, beta [T, hv],
// state [hv, dk, dv] updated in place -> out [T, hv, dv]; chunked or token by token.
void launch_gated_delta_rule(const float* q, const float* k, const float* v, const float* g, const float* beta,
                             float* state, float* out, int64_t T, int64_t hk, int64_t hv, int64_t dk, int64_t dv,
                             bool chunked);

void launch_argmax(const float* x, int32_t* out, int64_t n, int64_t v);
void launch_gather_rows(const void* x, void* y, const int64_t* rows, int64_t nrows, int64_t row_bytes);

// Graph-replayable steps (step.cu): dst[rows[i]] = src[i] for rows of row_bytes
// (rows outside [0, dst_rows) are skipped); x[i] += v.
void launch_write_rows_at(void* dst, const void* src, const int32_t* rows, int64_t nrows, int64_t row_bytes,
                          int64_t dst_rows);
void launch_write_rows_at_f32_bf16(void* dst, const float* src, const int32_t* rows, int64_t nrows, int64_t row_elems,
                                   int64_t dst_rows);
// Two f32 -> bf16 row writes at the same rows in one launch (K and V).
void launch_write_rows_pair_f32_bf16(void* dst0, const float* src0, void* dst1, const float* src1, const int32_t* rows,
                                     int64_t nrows, int64_t row_elems, int64_t dst_rows);
void launch_add_i32(int32_t* x, int64_t n, int32_t v);

// Decode rows of several sequences at once (batched_rows.cu): row i of a
// launch belongs to a sequence with its own contiguous K/V buffers
// ([s, kv_heads, dim] rows of the store dtype). Descriptors travel as kernel
// arguments (a captured graph keeps them), at most kMaxBatchedRows a launch.
constexpr int64_t kMaxBatchedRows = 64;
struct KvRowsDesc {
  void* k = nullptr;
  void* v = nullptr;
  // Graph-replayed steps: the device key count of the row (then `s` is the
  // reserved rows); null: `s` keys.
  const int32_t* kv_len = nullptr;
  int64_t s = 0;
};
// k [n, kvh * d] and v [n, kvh * dv] (float32 or the store dtype) -> row
// positions[i] (device i32 [n]) of row i's buffers, rounded as the plain
// write rounds; false (nothing launched) for a dtype pair it does not take.
bool launch_write_kv_rows(const KvRowsDesc* rows, int64_t n, const void* k, const void* v, DType src, DType store,
                          const int32_t* positions, int64_t k_elems, int64_t v_elems);
// Attention of q [n, h, d] (one query row per sequence, the last of its
// keys) -> out [n, h, dv]: row i gets exactly what launch_attention gives
// for that row alone (same kernel body, same split plan per row).
void launch_attention_rows(const float* q, const KvRowsDesc* rows, int64_t n, DType store, float* out, int64_t h,
                           int64_t d, int64_t kvh, int64_t dv, const AttnParams& p);

// Decode products of bf16 weights (gemv.cu): y[n, m] = x[n, k] · W[m, k]ᵀ,
// on the CUDA-core GEMV (up to kGemvMaxRows rows) or the tensor-core kernel
// (gemv_mma.cu, up to kGemvMmaMaxRows), as Tuning picks for n.
constexpr int64_t kGemvMaxRows = 8;
constexpr int64_t kGemvMmaMaxRows = 64;
bool gemv_bf16_applies(const void* w, int64_t ldw, const float* x, int64_t n, int64_t k);
void launch_gemv_bf16(const void* w, int64_t ldw, const float* x, float* y, int64_t n, int64_t m, int64_t k);
// Fused epilogues, equal bit for bit to the separate ops: y = res + x·Wᵀ;
// y = silu(x·Gᵀ) * (x·Uᵀ) (G and U share shape and row stride).
void launch_gemv_bf16_residual(const void* w, int64_t ldw, const float* x, const float* res, float* y, int64_t n,
                               int64_t m, int64_t k);
void launch_gemv_bf16_swiglu(const void* gate, const void* up, int64_t ldw, const float* x, float* y, int64_t n,
                             int64_t m, int64_t k);
// Up to three bf16 weights read by one launch for the same x (q/k/v): y[i] = x · w[i]ᵀ, each
// bit-identical to launch_gemv_bf16 alone. Applies when all matrices take the same GEMV shape.
struct GemvSegments {
  const void* w[3];
  int64_t ldw[3];
  float* y[3];
  int64_t m[3];
  int count;
};
// One matrix as segments (the plain, residual and SwiGLU forms).
inline GemvSegments one_matrix(const void* w, int64_t ldw, float* y, int64_t m) {
  GemvSegments s{};
  s.w[0] = w;
  s.ldw[0] = ldw;
  s.y[0] = y;
  s.m[0] = m;
  s.count = 1;
  return s;
}
bool gemv_bf16_multi_applies(const GemvSegments& s, int64_t n, int64_t k);
void launch_gemv_bf16_multi(const GemvSegments& s, const float* x, int64_t n, int64_t k);

}  // namespace ingot::cuda
