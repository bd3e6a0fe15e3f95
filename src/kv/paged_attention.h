// Direct paged attention: reads K/V straight from a layer pool through a
// block table (no gather), with an online (flash-style) softmax, GQA, and
// KV8/KV4 dequantization fused into the block loads. The interface names no
// device: each backend registers its kernel for the pool's device.
//
// Online softmax rescales partial sums block by block, so the result differs
// from the reference SDPA in the last bits; the gather path stays the
// bit-exact control and tests bound the difference.
#pragma once
#include <cstdint>

#include "kv/pool.h"
#include "ops/backend.h"

namespace ingot::kv {

// One sequence's K/V in a pool: blocks table[0..n_blocks) hold `length` tokens.
struct PagedKV {
  const LayerPool* pool = nullptr;
  const int32_t* table = nullptr;
  int64_t n_blocks = 0;
  int64_t length = 0;
  // KV4: block `open_block` is read from these exact float32 rows
  // ([kv_heads, block_size, dim], rotated basis) instead of its codes.
  int64_t open_block = -1;
  const float* open_k = nullptr;
  const float* open_v = nullptr;
};

// q [T, H, D] -> [T, H, Dv] float32; p.q_offset is the position of query row 0.
Tensor paged_attention(const Tensor& q, const PagedKV& kv, const AttnParams& p);

using PagedAttentionFn = Tensor (*)(const Tensor& q, const PagedKV& kv, const AttnParams& p);
void register_paged_attention(Device d, PagedAttentionFn fn);

// The CPU kernel (registered for Device::CPU by default).
Tensor paged_attention_cpu(const Tensor& q, const PagedKV& kv, const AttnParams& p);

}  // namespace ingot::kv
