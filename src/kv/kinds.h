// The store kinds kv/ offers by name (what `--kv` selects). models/ registers
// each with register_cache_kind at start-up; kv/ itself knows nothing of models.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kv/pool.h"

namespace ingot::kv {

using StoreMaker =
    std::function<std::unique_ptr<SequenceCache>(const std::vector<LayerSpec>&, DType, Device)>;

// paged (gather + reference SDPA: bit-identical to contiguous), paged-direct
// (the direct kernel), kv8 and kv4 (direct kernel, fused dequantization).
// Window layers always get a rotating store.
std::vector<std::pair<std::string, StoreMaker>> builtin_store_kinds();

// PoolOptions for a kind name; throws InvalidArgument for an unknown one.
PoolOptions pool_options_for(const std::string& kind);

// A sequence with its own fresh pool.
std::unique_ptr<SequenceCache> make_paged_cache(const std::vector<LayerSpec>& layers, DType dtype,
                                                Device device, const PoolOptions& opt);

}  // namespace ingot::kv
