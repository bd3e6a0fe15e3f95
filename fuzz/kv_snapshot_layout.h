// The cache layout the KV snapshot fuzzer restores into and its seed writer
// writes from: two paged layers and one sliding-window layer, small blocks.
#pragma once
#include "kv/kinds.h"
#include "kv/pool.h"
#include "kv/snapshot.h"

namespace ingot::fuzz {

inline std::vector<kv::LayerSpec> snapshot_layout() {
  kv::LayerSpec s;
  s.kv_heads = 1;
  s.head_dim = s.v_head_dim = 8;
  kv::LayerSpec w = s;
  w.window = 4;
  return {s, w, s};
}

inline std::shared_ptr<kv::Pool> snapshot_pool(const std::string& kind) {
  kv::PoolOptions o = kv::pool_options_for(kind);
  o.block_size = 4;
  o.initial_blocks = 8;
  return kv::Pool::create(snapshot_layout(), DType::F32, Device::CPU, o);
}

inline kv::SnapshotKey snapshot_key(const kv::Pool& pool) { return {"fuzz-model", "fuzz-tok", pool.scheme()}; }

}  // namespace ingot::fuzz
