// A decode step's K/V append and attention for all sequences at once: when
// every sequence brings one token and keeps its layer in a contiguous store
// of one shape and dtype, or in paged stores read in place, one write and
// one attention launch (one parallel job on the CPU) serve the whole batch
// (each query row reads its own sequence's buffers and key count).
// Devices register the kernels; where none are registered, or the rows do
// not fit (other stores, mixed shapes), each sequence runs alone, which
// gives the same numbers.
#pragma once
#include <cstdint>
#include <vector>

#include "kv/cache.h"

namespace ingot::kv {

// One sequence's contiguous K/V as a device kernel sees it.
struct RowsKV {
  void* k = nullptr;  // [rows, kv_heads, head_dim] of `dtype`
  void* v = nullptr;  // [rows, kv_heads, v_head_dim]
  // Graph-replayed steps: the device key count; `keys` is then the reserved rows.
  const int32_t* kv_len = nullptr;
  int64_t keys = 0;
};

// Writes row i of k [N, KVH, D] / v [N, KVH, Dv] at positions[i] (device i32
// [N]) of rows[i], then attends q [N, H, D] (float32, row i the last token of
// sequence i) -> [N, H, Dv] float32. Returns an undefined tensor, having done
// nothing, when the kernels do not take the batch.
using RowsStepFn = Tensor (*)(const std::vector<RowsKV>& rows, DType dtype, const LayerSpec& spec, const Tensor& q,
                              const Tensor& k, const Tensor& v, const Tensor& positions, const AttnParams& p);
void register_rows_kernels(Device d, RowsStepFn fn);

// What a graph-replayable step reads from device memory for one layer.
struct StepRows {
  const Tensor* kv_lens = nullptr;  // i32 [N]: keys row i attends after this step
  // Paged stores: i64 [N], row i's table handle (PagedKernels::table_handle),
  // and the most keys any row may have (sizes the launch). Undefined for
  // contiguous stores, which keep fixed reserved rows instead.
  Tensor tables;
  int64_t max_keys = 0;
};

// append(k[i], v[i]) + attend(q[i]) on each layers[i] (plain steps, `step`
// null), or, for graph-replayed steps, writes at the device positions and
// attention over the device key counts of `step` (contiguous stores: their
// reserved rows; paged stores: the tables of step->tables), in one launch
// each. Undefined result (nothing done) when it does not apply.
Tensor append_attend_rows(const std::vector<LayerCache*>& layers, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& positions, const StepRows* step, const AttnParams& p);

// A forward pass's appends and attention, sequence i bringing n_tokens[i]
// consecutive rows of q [N, H, D] / k / v / positions: each run of two or
// more one-token sequences (decode rows) goes through append_attend_rows,
// so a step that also carries prefill chunks or drafts keeps its decode rows
// in one launch; every other sequence appends and attends alone. -> the
// attention rows in batch order (the same numbers as one sequence at a time).
Tensor append_attend_batch(const std::vector<LayerCache*>& layers, const std::vector<int64_t>& n_tokens,
                           const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& positions,
                           const AttnParams& p);

}  // namespace ingot::kv
