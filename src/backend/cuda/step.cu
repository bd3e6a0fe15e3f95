// Kernels of graph-replayable steps: K/V rows written at device positions,
// and in-place int32 increments (positions and key counts advance on the device).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/kernels.h"
#include "backend/cuda/runtime.h"

namespace ingot::cuda {

namespace {

// One block row per source row; 16-byte words when both sides allow.
template <typename W>
__global__ void write_rows_kernel(W* dst, const W* src, const int32_t* rows, int64_t row_words, int64_t dst_rows) {
  const int64_t r = blockIdx.y;
  const int64_t at = rows[r];
  if (at < 0 || at >= dst_rows) return;  // never write outside the reserved rows
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < row_words; i += int64_t(gridDim.x) * blockDim.x)
    dst[at * row_words + i] = src[r * row_words + i];
}

// float32 rows rounded to bf16 as they are written (the cast fused in).
__global__ void write_rows_f32_bf16_kernel(__nv_bfloat16* dst, const float* src, const int32_t* rows, int64_t row_elems,
                                           int64_t dst_rows) {
  const int64_t r = blockIdx.y;
  const int64_t at = rows[r];
  if (at < 0 || at >= dst_rows) return;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < row_elems; i += int64_t(gridDim.x) * blockDim.x)
    dst[at * row_elems + i] = __float2bfloat16_rn(src[r * row_elems + i]);
}

// Two (dst, src) pairs of the same row size written at the same rows (K and V): blockIdx.z picks the pair.
__global__ void write_rows_pair_f32_bf16_kernel(__nv_bfloat16* dst0, const float* src0, __nv_bfloat16* dst1,
                                                const float* src1, const int32_t* rows, int64_t row_elems,
                                                int64_t dst_rows) {
  const int64_t r = blockIdx.y;
  const int64_t at = rows[r];
  if (at < 0 || at >= dst_rows) return;
  __nv_bfloat16* dst = blockIdx.z ? dst1 : dst0;
  const float* src = blockIdx.z ? src1 : src0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < row_elems; i += int64_t(gridDim.x) * blockDim.x)
    dst[at * row_elems + i] = __float2bfloat16_rn(src[r * row_elems + i]);
}

__global__ void add_i32_kernel(int32_t* x, int64_t n, int32_t v) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] += v;
}

}  // namespace

void launch_write_rows_at(void* dst, const void* src, const int32_t* rows, int64_t nrows, int64_t row_bytes,
                          int64_t dst_rows) {
  if (nrows == 0 || row_bytes == 0) return;
  const bool wide = row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(src) % 16 == 0;
  const int64_t words = wide ? row_bytes / 16 : row_bytes;
  dim3 grid(static_cast<unsigned>(std::min<int64_t>((words + 127) / 128, 64)), static_cast<unsigned>(nrows));
  if (wide)
    write_rows_kernel<uint4><<<grid, 128, 0, stream()>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src),
                                                        rows, words, dst_rows);
  else
    write_rows_kernel<uint8_t><<<grid, 128, 0, stream()>>>(static_cast<uint8_t*>(dst),
                                                          static_cast<const uint8_t*>(src), rows, words, dst_rows);
  CUDA_LAUNCH_OK();
}

void launch_write_rows_at_f32_bf16(void* dst, const float* src, const int32_t* rows, int64_t nrows, int64_t row_elems,
                                   int64_t dst_rows) {
  if (nrows == 0 || row_elems == 0) return;
  dim3 grid(static_cast<unsigned>(std::min<int64_t>((row_elems + 127) / 128, 64)), static_cast<unsigned>(nrows));
  write_rows_f32_bf16_kernel<<<grid, 128, 0, stream()>>>(static_cast<__nv_bfloat16*>(dst), src, rows, row_elems,
                                                         dst_rows);
  CUDA_LAUNCH_OK();
}

void launch_write_rows_pair_f32_bf16(void* dst0, const float* src0, void* dst1, const float* src1, const int32_t* rows,
                                     int64_t nrows, int64_t row_elems, int64_t dst_rows) {
  if (nrows == 0 || row_elems == 0) return;
  dim3 grid(static_cast<unsigned>(std::min<int64_t>((row_elems + 127) / 128, 64)), static_cast<unsigned>(nrows), 2);
  write_rows_pair_f32_bf16_kernel<<<grid, 128, 0, stream()>>>(static_cast<__nv_bfloat16*>(dst0), src0,
                                                              static_cast<__nv_bfloat16*>(dst1), src1, rows, row_elems,
                                                              dst_rows);
  CUDA_LAUNCH_OK();
}

void launch_add_i32(int32_t* x, int64_t n, int32_t v) {
  if (n == 0) return;
  add_i32_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream()>>>(x, n, v);
  CUDA_LAUNCH_OK();
}

}  // namespace ingot::cuda
