// Block pools for the paged stores. A LayerPool owns the K/V blocks of one
// layer: each block holds `block_size` token rows for every KV head, laid
// out [kv_heads, block_size, row] inside the block, and blocks are grouped
// into slabs ([blocks, kv_heads, block_size, head_dim] per slab). Slabs
// never move, so a block's address is stable for its lifetime; the pool
// grows by adding a slab (~1.5x) when the free list is empty.
//
// Blocks are ref-counted: clone() of a sequence adds a reference, the first
// write into a shared (or frozen, i.e. published) block copies it, and a
// block returns to the free list when its last reference goes.
//
// Threads: the engine thread mutates; other threads (the snapshot writer)
// only drop references and read published blocks, under the pool mutex.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kv/cache.h"

namespace ingot::kv {

enum class KvQuant : uint8_t { None, Q8, Q4 };
enum class AttendPath : uint8_t { Gather, Direct };

const char* kv_quant_name(KvQuant q);

struct PoolOptions {
  int block_size = 16;
  KvQuant quant = KvQuant::None;
  int group_size = 64;           // affine group along head_dim (a narrower head: head_dim / 4)
  int64_t initial_blocks = 64;   // per layer
  double growth = 1.5;           // a new slab adds (growth - 1) x the current blocks
  AttendPath path = AttendPath::Gather;
  int64_t window_slack = 64;     // rotating layers keep this many extra tokens for trim()
};

// Geometry of one plane (K or V) of a block: codes plus, for quantized
// schemes, per-group (scale, bias) pairs in float32.
struct PlaneGeometry {
  int64_t dim = 0;           // values per row (head_dim or v_head_dim)
  int64_t group = 0;         // values per affine group (quantized only)
  size_t row_code_bytes = 0; // bytes of one row's codes
  size_t row_param_floats = 0;
  size_t block_code_bytes = 0;
  size_t block_param_bytes = 0;
};

// The geometry a pool gives one plane of `dim` values per row, `kvh` heads
// per block row set (what memory estimates use too).
PlaneGeometry plane_geometry(int64_t dim, int64_t kvh, const PoolOptions& opt, DType elem);

// The four regions of a slab, in file and memory order.
enum Region : int { kKCodes = 0, kKParams = 1, kVCodes = 2, kVParams = 3 };

class LayerPool {
 public:
  LayerPool(const LayerSpec& spec, DType elem, Device device, const PoolOptions& opt);
  ~LayerPool();
  LayerPool(const LayerPool&) = delete;
  LayerPool& operator=(const LayerPool&) = delete;

  const LayerSpec& spec() const { return spec_; }
  DType elem_dtype() const { return elem_; }  // dtype of unquantized rows
  Device device() const { return device_; }   // where the block memory lives
  const PoolOptions& options() const { return opt_; }
  int block_size() const { return opt_.block_size; }
  const PlaneGeometry& plane(bool v) const { return v ? vg_ : kg_; }
  size_t region_block_bytes(int r) const;

  // A fresh block with one reference.
  int32_t alloc();
  void ref(int32_t id);
  void unref(int32_t id);
  int refcount(int32_t id) const;
  bool writable(int32_t id) const;  // sole owner and not frozen
  void freeze(int32_t id);          // published: every later write copies
  // A private copy of block `src` (whole block), dropping one reference to src.
  int32_t copy_on_write(int32_t src);

  int64_t total_blocks() const;
  int64_t free_blocks() const;
  int64_t used_blocks() const { return total_blocks() - free_blocks(); }
  int64_t slab_count() const;
  // Sum of refcounts (0 when every sequence is gone).
  int64_t total_refs() const;

  // Block memory. Engine-thread hot path: no locking.
  uint8_t* region(int r, int32_t id) const;

  // Adopts `n` blocks already laid out as a slab in `mem` at region offsets
  // `off` (a restored snapshot): they join the pool with one reference each,
  // frozen. Returns the first id; ids are consecutive.
  int32_t adopt_slab(std::shared_ptr<Storage> mem, const std::array<size_t, 4>& off, int64_t n);

  std::mutex& mutex() const { return mu_; }

 private:
  struct Slab {
    std::shared_ptr<Storage> mem;
    std::array<size_t, 4> off{};
    int32_t base = 0;
    int64_t n = 0;
  };
  struct Loc {
    int32_t slab;
    int32_t local;
  };
  void grow_locked(int64_t n);
  // Region r of block id as a byte tensor over its slab (any device).
  Tensor region_view(int r, int32_t id) const;
  int32_t add_slab_locked(Slab s);

  LayerSpec spec_;
  DType elem_;
  Device device_;
  PoolOptions opt_;
  PlaneGeometry kg_, vg_;
  mutable std::mutex mu_;
  std::vector<Slab> slabs_;
  std::vector<Loc> loc_;
  std::vector<int32_t> refs_;
  std::vector<uint8_t> frozen_;
  std::vector<int32_t> free_;
  int64_t grown_bytes_ = 0;  // slab memory this pool allocated itself
};

// Bytes of slab memory every live LayerPool has allocated (adopted snapshot
// slabs excluded): what the KV stores of the process hold, for leak checks.
int64_t live_pool_slab_bytes();

// All layers' pools of one model. Window (sliding) layers have no pool: their
// sequences use a rotating store.
class Pool : public std::enable_shared_from_this<Pool> {
 public:
  static std::shared_ptr<Pool> create(const std::vector<LayerSpec>& layers, DType dtype, Device device,
                                      const PoolOptions& opt = {});
  Pool(const std::vector<LayerSpec>& layers, DType dtype, Device device, const PoolOptions& opt);

  // An empty sequence whose paged layers allocate from this pool.
  std::unique_ptr<SequenceCache> new_sequence();

  const std::vector<LayerSpec>& layout() const { return layout_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const PoolOptions& options() const { return opt_; }
  int num_layers() const { return static_cast<int>(layout_.size()); }
  // nullptr for window layers.
  LayerPool* layer(int i) const { return layers_.at(static_cast<size_t>(i)).get(); }

  // Summed over paged layers (metrics).
  int64_t used_blocks() const;
  int64_t total_blocks() const;
  int64_t free_blocks() const { return total_blocks() - used_blocks(); }
  int64_t total_refs() const;
  // Bytes one block index costs across every paged layer (memory budgets).
  size_t bytes_per_block() const;
  // Bytes of blocks in use / allocated, summed over paged layers.
  int64_t used_bytes() const;
  int64_t allocated_bytes() const;
  // "paged/bf16/bs16", "kv8/g64/bs16": what a snapshot must match.
  std::string scheme() const;

 private:
  std::vector<LayerSpec> layout_;
  DType dtype_;
  Device device_;
  PoolOptions opt_;
  std::vector<std::unique_ptr<LayerPool>> layers_;
};

}  // namespace ingot::kv
