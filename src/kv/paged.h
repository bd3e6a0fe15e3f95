// The paged store: one layer's view of a LayerPool through a block table.
// Rows are written into the block that holds their position; a block that is
// shared (after clone()) or frozen (published) is copied first.
//
// KV4 also keeps the open (not yet full) last block exact: its rows, in the
// rotated basis, are held in float32 by this sequence (on the pool's device)
// beside their codes, and
// attention reads them from there; once the block fills only its codes stay.
// The codes are always written, so blocks are valid on their own (clone,
// copy-on-write, snapshots, trim back into a closed block all see codes).
#pragma once
#include <memory>
#include <vector>

#include "kv/paged_attention.h"
#include "kv/pool.h"
#include "tensor/tensor.h"

namespace ingot::kv {

class PagedLayerCache final : public LayerCache {
 public:
  PagedLayerCache(std::shared_ptr<Pool> pool, LayerPool* layer);
  ~PagedLayerCache() override;
  PagedLayerCache(const PagedLayerCache&) = delete;
  PagedLayerCache& operator=(const PagedLayerCache&) = delete;

  int64_t length() const override { return len_; }
  void append(const Tensor& k, const Tensor& v) override;
  // Gathers the blocks into contiguous K/V: the cache dtype, or float32
  // (dequantized) for KV8/KV4.
  std::pair<Tensor, Tensor> fetch(int64_t* first_pos) const override;
  // Gather + reference SDPA, or the direct paged kernel (PoolOptions::path).
  Tensor attend(const Tensor& q, AttnParams p) const override;
  void trim(int64_t n) override;
  std::unique_ptr<LayerCache> clone() const override;

  // What the direct kernels read: the block table, the length, the open block.
  PagedKV view() const;
  // Freezes every block holding [0, length()): later writes copy them.
  void publish();
  const std::vector<int32_t>& block_table() const { return table_; }
  LayerPool& layer_pool() const { return *lp_; }
  const std::shared_ptr<Pool>& pool() const { return pool_; }
  // Takes ownership of one reference to each block of `table` (a restored
  // snapshot) holding `tokens` tokens; `open_k`/`open_v` (or null) are the
  // exact rows of the open last block, laid out as open_rows(), in the
  // pool's device memory.
  void adopt(std::vector<int32_t> table, int64_t tokens, const float* open_k = nullptr,
             const float* open_v = nullptr);

  // A decode row written by a batched kernel (kv/batched_rows.cpp), for
  // stores without an open block: claim_row() owns the block that token
  // length() lands in and says where it goes; once the row is written,
  // count_claimed_row() makes it part of the store.
  PagedRowSlot claim_row();
  void count_claimed_row();
  // The same for a graph-replayed step (stepgraph/decode_steps.h): claims the
  // row and returns the handle of the table holding it, which the step's
  // kernels read from device memory (PagedKernels::table_handle).
  int64_t claim_step_row();

  // Whether this store keeps its open block exact (KV4).
  bool keeps_open_block() const;
  // The block index whose exact rows are held, or -1.
  int64_t open_block() const { return open_block_; }
  // float32 [kv_heads, block_size, dim] rows of the open block (rotated basis).
  // On the pool's device.
  const float* open_rows(bool v) const { return (v ? open_v_ : open_k_).data<float>(); }
  size_t open_floats(bool v) const { return static_cast<size_t>((v ? open_v_ : open_k_).numel()); }

 private:
  void release_from(size_t first_block);
  std::shared_ptr<Pool> pool_;
  LayerPool* lp_;
  std::vector<int32_t> table_;
  int64_t len_ = 0;
  int64_t open_block_ = -1;
  Tensor open_k_, open_v_;  // float32, allocated once when keeps_open_block()
  // The kernels' state for this table (not copied by clone(): a fork's table
  // differs as soon as either side copies a block).
  mutable TableMirrorSlot mirror_;
};

// Freezes every paged layer of `seq` (a prefix that others may now share).
void publish(SequenceCache& seq);

}  // namespace ingot::kv
