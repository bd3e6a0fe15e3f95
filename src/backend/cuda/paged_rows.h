// Decode rows of many sequences over paged K/V in one attention launch
// (paged.cu): every row reads the same layer pool (one geometry) through its
// own block table, with its own key count, by the kernel body and split plan
// that launch_paged_attention uses for that row alone, so each row's output
// is bit-identical to the per-sequence launch.
#pragma once
#include <cstdint>

#include "backend/cuda/kernels.h"

namespace ingot::cuda {

struct PagedRowDesc {
  const uint8_t* const* blocks = nullptr;  // device region addresses of the row's table
  int64_t length = 0;                      // keys (the row's query is the last of them)
  int64_t open_block = -1;                 // KV4: as PagedBlocks
  const float* open_k = nullptr;
  const float* open_v = nullptr;
};

// q [n, h, geo.k_dim] -> out [n, h, geo.v_dim]; geo.blocks and its open block
// fields are unused (each row has its own).
void launch_paged_attention_rows(const float* q, const PagedBlocks& geo, const PagedRowDesc* rows, int64_t n,
                                 float* out, int64_t h, const AttnParams& p);

// One decode row's destination: the device address of its block's four
// region addresses, and its slot in the block.
struct PagedWriteDesc {
  const uint8_t* const* block = nullptr;
  int64_t slot = 0;
};
// Row i of k [n, kv_heads, k_dim] / v (rows of the pool's unquantized dtype,
// or float32 with `from_f32`: rounded to it as a cast rounds) into rows[i]:
// the bytes launch_paged_write stores, one launch for all rows.
void launch_paged_write_rows(const PagedBlocks& geo, const PagedWriteDesc* rows, int64_t n, const void* k,
                             const void* v, bool from_f32 = false);

// A graph-replayable step's rows: row i's table is tables[i] (device memory:
// the device address of its blocks' region addresses), written at
// positions[i], attending kv_lens[i] keys (device i32 [n]); every key count
// at most `max_keys`, which plans the launch. Unquantized and KV8 pools (KV8:
// float32 k / v rows, quantized as launch_paged_write quantizes them; KV4
// keeps an open block the step cannot address). Each row gets what the
// per-sequence write and launch_paged_attention_rows give it.
void launch_paged_write_step_rows(const PagedBlocks& geo, const uint8_t* const* const* tables,
                                  const int32_t* positions, int64_t n, const void* k, const void* v, bool from_f32);
void launch_paged_attention_step_rows(const float* q, const PagedBlocks& geo, const uint8_t* const* const* tables,
                                      const int32_t* kv_lens, int64_t n, int64_t max_keys, float* out, int64_t h,
                                      const AttnParams& p);

}  // namespace ingot::cuda
