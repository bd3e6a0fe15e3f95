// Attention on the GPU over contiguous K/V (the kernels and their launch
// plan live in attention_kernels.cuh, shared with the paged stores): one
// block per (query, head, key split), keys in tiles of the block size with
// an online softmax, so any context length fits. With few query rows
// (decode) and many keys the key range is split across blocks
// (flash-decoding): each split writes its running max, sum and unnormalised
// output, and a second kernel merges the splits.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/attention_kernels.cuh"
#include "backend/cuda/tuning.h"

namespace ingot::cuda {

namespace attn {

// Splits so that a decode step fills the GPU: about Tuning::split_blocks_per_sm
// blocks per SM, never a split of less than one tile of keys.
int64_t split_target() {
  static const int sms = [] {
    int dev = 0, n = 0;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  return tuning().split_blocks_per_sm * static_cast<int64_t>(sms);
}

int64_t split_count(int64_t rows, int64_t keys) { return split_rule(split_target(), rows, keys); }

}  // namespace attn

void launch_attention(const float* q, const void* k, const void* v, DType kvdt, float* out, int64_t t, int64_t h,
                      int64_t d, int64_t s, int64_t kvh, int64_t dv, const AttnParams& p) {
  if (t == 0) return;
  if (kvdt != DType::F32 && kvdt != DType::BF16)
    fail(ErrorKind::Unsupported, "CUDA attention over ", dtype_name(kvdt), " keys");
  const bool aligned = ((reinterpret_cast<uintptr_t>(k) | reinterpret_cast<uintptr_t>(v)) & 15) == 0;
  if (kvdt == DType::F32)
    attn::run(q, attn::DenseKV<float>{static_cast<const float*>(k), static_cast<const float*>(v), kvh, d, dv}, aligned,
              out, t, h, d, s, kvh, dv, p);
  else
    attn::run(q,
              attn::DenseKV<__nv_bfloat16>{static_cast<const __nv_bfloat16*>(k), static_cast<const __nv_bfloat16*>(v),
                                           kvh, d, dv},
              aligned, out, t, h, d, s, kvh, dv, p);
}

}  // namespace ingot::cuda
