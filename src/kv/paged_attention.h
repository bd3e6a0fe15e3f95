// Device kernels of the paged stores. Direct paged attention reads K/V
// straight from a layer pool through a block table (no gather), with an
// online (flash-style) softmax, GQA, and KV8/KV4 dequantization fused into
// the block loads; the write kernel puts new rows into their blocks
// (quantizing them on the way for KV8/KV4); the gather kernel copies a
// table's rows out into contiguous K/V. The interface names no device: each
// backend registers its kernels for the pools of its device, and a pool on a
// device without kernels is refused when it is created.
//
// Online softmax rescales partial sums block by block; on the CPU that
// differs from the reference SDPA in the last bits, so the gather path stays
// the bit-exact control there and tests bound the difference. (The CUDA
// reference attention is itself an online softmax over the same key tiles,
// so its direct kernel is bit-identical to the contiguous store:
// docs/kv-cache.md.)
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kv/pool.h"
#include "ops/backend.h"

namespace ingot::kv {

// What a device's kernels keep for one sequence's layer between calls (the
// CUDA kernels: the device copy of its block addresses, so a decode step
// uploads only blocks that changed). The store owns it and never looks inside.
struct TableMirror {
  virtual ~TableMirror() = default;
};
using TableMirrorSlot = std::unique_ptr<TableMirror>;

// One sequence's K/V in a pool: blocks table[0..n_blocks) hold `length` tokens.
struct PagedKV {
  const LayerPool* pool = nullptr;
  const int32_t* table = nullptr;  // host memory
  int64_t n_blocks = 0;
  int64_t length = 0;
  // KV4: block `open_block` is read from these exact float32 rows
  // ([kv_heads, block_size, dim], rotated basis, on the pool's device)
  // instead of its codes.
  int64_t open_block = -1;
  const float* open_k = nullptr;
  const float* open_v = nullptr;
  TableMirrorSlot* mirror = nullptr;  // may be null
};

// q [T, H, D] -> [T, H, Dv] float32; p.q_offset is the position of query row 0.
Tensor paged_attention(const Tensor& q, const PagedKV& kv, const AttnParams& p);

// Where the write kernel keeps KV4's exact rows of a sequence's open block
// (see PagedKV): `block` < 0 when there is none.
struct OpenBlock {
  int64_t block = -1;
  float* k = nullptr;
  float* v = nullptr;
};

using PagedAttentionFn = Tensor (*)(const Tensor& q, const PagedKV& kv, const AttnParams& p);
// Writes rows [pos, pos + T) of both planes of `table` (host memory; the
// blocks are already private) from k [T, KVH, D] and v [T, KVH, Dv],
// contiguous on the pool's device: the cache dtype, or float32 for KV8/KV4
// (quantized here), and for KV4 the open block's exact rows.
using PagedWriteFn = void (*)(const LayerPool& lp, const int32_t* table, int64_t pos, const Tensor& k,
                              const Tensor& v, const OpenBlock& open, TableMirrorSlot* mirror);
// Rows [0, len) of plane K or V as [len, KVH, dim] on the pool's device: the
// cache dtype, or float32 dequantized.
// For KV4, rows of block `open_block` come from `open` (that plane's exact rows).
using PagedGatherFn = Tensor (*)(const LayerPool& lp, bool is_v, const int32_t* table, int64_t len,
                                 int64_t open_block, const float* open, TableMirrorSlot* mirror);

// Row i of q [N, H, D] (the last token of its sequence) over kvs[i], every
// row in one job -> [N, H, Dv] float32; each row as paged_attention alone.
using PagedAttentionRowsFn = Tensor (*)(const Tensor& q, const std::vector<PagedKV>& kvs, const AttnParams& p);

// Where one decode row of a sequence goes: token `pos` of `table` (host
// memory; the block is already private), through the table's mirror.
struct PagedRowSlot {
  const int32_t* table = nullptr;
  int64_t pos = 0;
  TableMirrorSlot* mirror = nullptr;
};
// Row i of k [N, KVH, D] and v [N, KVH, Dv] (the pool's row dtype or
// float32, contiguous, on its device) into slots[i], every row in one job: an
// unquantized pool's rows, byte for byte what PagedWriteFn writes after a
// cast to the row dtype (float32 rows are rounded in the same launch).
using PagedWriteRowsFn = void (*)(const LayerPool& lp, const std::vector<PagedRowSlot>& slots, const Tensor& k,
                                  const Tensor& v);

// Pools whose step rows are addressed by table handles alone: all but KV4,
// whose open block (kept exact beside its codes) the host plans per step.
inline bool step_rows_read(KvQuant q) { return q != KvQuant::Q4; }

// Decode rows of a graph-replayable step (kv/batched_rows.h StepRows), in a
// pool step_rows_read() takes: row i of k [N, KVH, D] / v [N, KVH, Dv] is written at
// position positions[i] of the table whose handle is tables[i], then q row i
// attends the first kv_lens[i] = positions[i] + 1 keys of that table. The
// handles, positions and key counts are read from device memory when the
// kernels run, so a captured step replays over other rows and tables; no
// count may pass `max_keys`, which sizes the launch. Each row's output equals
// attend_rows over the same table.
using PagedStepRowsFn = Tensor (*)(const LayerPool& lp, const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& positions, const Tensor& kv_lens, const Tensor& tables,
                                   int64_t max_keys, const AttnParams& p);
// The handle step rows read for the first n_blocks blocks of `table` (host
// memory, every block private): valid until the table or its mirror
// changes, i.e. for the step it is taken for.
using PagedTableHandleFn = int64_t (*)(const LayerPool& lp, const int32_t* table, int64_t n_blocks,
                                       TableMirrorSlot* mirror);

struct PagedKernels {
  PagedAttentionFn attend = nullptr;
  PagedWriteFn write = nullptr;
  PagedGatherFn gather = nullptr;
  PagedAttentionRowsFn attend_rows = nullptr;  // optional
  PagedWriteRowsFn write_rows = nullptr;       // optional
  PagedStepRowsFn step_rows = nullptr;         // optional, with table_handle
  PagedTableHandleFn table_handle = nullptr;
};
void register_paged_kernels(Device d, const PagedKernels& k);
// nullptr when device `d` has no paged kernels.
const PagedKernels* paged_kernels(Device d);

// The CPU kernels (registered for Device::CPU by default).
Tensor paged_attention_cpu(const Tensor& q, const PagedKV& kv, const AttnParams& p);
Tensor paged_attention_rows_cpu(const Tensor& q, const std::vector<PagedKV>& kvs, const AttnParams& p);
void paged_write_cpu(const LayerPool& lp, const int32_t* table, int64_t pos, const Tensor& k, const Tensor& v,
                     const OpenBlock& open, TableMirrorSlot* mirror = nullptr);
Tensor paged_gather_cpu(const LayerPool& lp, bool is_v, const int32_t* table, int64_t len, int64_t open_block,
                        const float* open, TableMirrorSlot* mirror = nullptr);
// On the CPU a table's handle is its host address.
Tensor paged_step_rows_cpu(const LayerPool& lp, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& positions, const Tensor& kv_lens, const Tensor& tables, int64_t max_keys,
                           const AttnParams& p);
int64_t paged_table_handle_cpu(const LayerPool& lp, const int32_t* table, int64_t n_blocks, TableMirrorSlot* mirror);

}  // namespace ingot::kv
