// Launchers for the CUDA kernels (all on the backend's stream). Pointers are
// device pointers; activations are float32; `n` rows of width `d`.
#pragma once
#include <cstdint>

#include "ops/backend.h"
#include "tensor/dtype.h"

namespace ingot::cuda {

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

// Decode GEMV for bf16 weights (gemv.cu): y[n, m] = x[n, k] · W[m, k]ᵀ.
constexpr int64_t kGemvMaxRows = 8;
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
bool gemv_bf16_multi_applies(const GemvSegments& s, int64_t k);
void launch_gemv_bf16_multi(const GemvSegments& s, const float* x, int64_t n, int64_t k);

}  // namespace ingot::cuda
