// CPU compute kernels on raw pointers. The backend (cpu_backend.cpp) adapts
// Tensors to these. Rows of the result never depend on how many other rows
// are computed with them: a sequence gets the same numbers alone or batched.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/weight.h"
#include "tensor/dtype.h"

namespace ingot::cpu {

// What the running CPU offers, read once at start-up.
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512bf16 = false,
       avx512vnni = false, avxvnni = false;
};
const CpuFeatures& cpu_features();

// Instruction-set levels with their own kernels, lowest first.
enum class Isa { Portable, Avx2, Avx512 };
const char* isa_name(Isa isa);
// Levels this CPU can run (Portable always), lowest first.
std::vector<Isa> supported_isas();
// The level kernels use now: the best supported one, or the INGOT_CPU_ISA
// environment variable (portable | avx2 | avx512) read at start-up, or an override.
Isa active_isa();
// Forces a level (tests, benchmarks); throws if the CPU lacks it. Not thread-safe
// against kernels running at the same time.
void set_isa(Isa isa);
// Back to the start-up choice.
void reset_isa();

// y[n, m] = sum_k x[n, k] * w[m, k] for a dense weight (f32 / bf16 / f16),
// rows of w `ldw` elements apart. Runs on the compute pool.
void linear_dense(const float* x, int64_t n, int64_t k, const void* w, DType wdt, int64_t ldw,
                  int64_t m, float* y);

// The same product for many rows in outer-product form, at a higher rate.
// Each output sums its products in k order (blocks of 256 added in turn),
// so a row's bits do not depend on n, but they are not linear_dense's: for
// callers that never compare a row with the decode path (audio and vision
// encoders, cross-attention keys and values).
void linear_bulk(const float* x, int64_t n, int64_t k, const void* w, DType wdt, int64_t ldw, int64_t m, float* y);

// Quantized formats register their kernels here (GGUF blocks, MLX affine).
// linear: same contract as linear_dense for weight `w`;
// dequant_row: writes row `r` of `w` as k floats (embedding lookups);
// relayout (optional): `w` in the layout another key's faster kernels read
// (or `w` itself), made once when a weight is loaded;
// linear_many (optional): linear for `count` weights of this key and one
// width against the same x, into ys[i] (each output as linear gives it).
using QuantLinearFn = void (*)(const float* x, int64_t n, const Weight& w, float* y);
using QuantRowFn = void (*)(const Weight& w, int64_t r, float* out);
using QuantRelayoutFn = Weight (*)(const Weight& w);
using QuantLinearManyFn = void (*)(const float* x, int64_t n, const Weight* const* ws, int count, float* const* ys);
struct QuantKernels {
  QuantLinearFn linear = nullptr;
  QuantRowFn dequant_row = nullptr;
  QuantRelayoutFn relayout = nullptr;
  QuantLinearManyFn linear_many = nullptr;
};
// key: the weight's data dtype for GGUF blocks, or DType::U32 for affine.
void register_quant_kernels(DType key, QuantKernels k);
const QuantKernels* quant_kernels(DType key);

// Converts n values of a dense float type to f32.
void to_f32(const void* src, DType t, int64_t n, float* dst);

// Single-threaded vector helpers in the active level's fixed summation order.
float dot(const float* a, const void* b, DType bdt, int64_t k);      // b: f32 / bf16 / f16
void axpy(float a, const void* x, DType xdt, float* y, int64_t n);   // y += a * x
// out[r] = dot(a, b + r * ldb) for r < rows (bit-identical to dot() per row).
void dot_rows(const float* a, const void* b, DType bdt, int64_t ldb, int64_t rows, int64_t k, float* out);
float sum_squares(const float* x, int64_t n);
float sum(const float* x, int64_t n);
// y = silu(g) * u (u null: y = silu(g)), vectorised exp.
void silu_mul(const float* g, const float* u, float* y, int64_t n);
// y = gelu(x) = x * Phi(x) with a vector erf (absolute error of erf <= 1.5e-7).
void gelu(const float* x, float* y, int64_t n);
// One row of n values: y = softmax(x), vectorised exp.
void softmax_row(const float* x, float* y, int64_t n);
// One row of n values: y = (x - mean) / sqrt(var + eps) * w + b (b may be null).
void layer_norm_row(const float* x, const float* w, const float* b, float eps, float* y, int64_t n);
// Keys per attention tile: the unit every CPU attention path folds at once.
constexpr int64_t kAttnTile = 16;
// One attention tile folded into an online-softmax state (isa_table.h).
struct AttnFold;
void attn_fold(const AttnFold& f);
// Query vectors a prompt block of attention holds on the active level.
int attn_block_vectors();
// y = x * s * w (w null: y = x * s); unit_offset applies (1 + w).
void scale_by(const float* x, float s, const float* w, bool unit_offset, float* y, int64_t n);

}  // namespace ingot::cpu
