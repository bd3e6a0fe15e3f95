// The KV store kinds, owned here: what `--kv` names, how each kind is built,
// what its pools look like and what a token costs in it. models/ and the
// engine ask this file; nothing else spells out a kind's layout or bytes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv/pool.h"

namespace ingot::kv {

enum class StoreKind : uint8_t {
  Contiguous,   // one growing buffer per layer: the numerical control
  Paged,        // the block pool, attention reading the blocks in place (the default)
  PagedGather,  // the block pool gathered into contiguous K/V for the reference attention (a control)
  Kv8,          // 8-bit affine blocks, dequantized inside the attention kernel
  Kv4,          // 4-bit affine blocks in a rotated basis, the open block kept exact
};

// "contiguous", "paged", "paged-gather", "kv8", "kv4" ("paged-direct" is an
// older name of "paged"); InvalidArgument naming the choices otherwise.
StoreKind parse_store_kind(const std::string& name);
const char* store_kind_name(StoreKind k);
// "contiguous, paged, paged-gather, kv8 or kv4", for help and errors.
const char* store_kind_choices();
bool is_paged(StoreKind k);

// The pool options of a paged kind (InvalidArgument for contiguous).
PoolOptions pool_options(StoreKind k);
// Kept for callers that hold a name.
PoolOptions pool_options_for(const std::string& kind);

// Bytes one token adds to one layer: the pool's own row geometry for kv8 /
// kv4 (codes plus float32 scale and bias per group); sliding-window layers
// keep unquantized rows in a rotating store whatever the kind.
double bytes_per_token_layer(const LayerSpec& s, DType dtype, StoreKind k);
// Bytes of `tokens` tokens of one sequence (sliding-window layers capped).
int64_t bytes_for_tokens(const std::vector<LayerSpec>& layers, DType dtype, StoreKind k, int64_t tokens);
// Bytes a sequence holds whatever its length: kv4's exact float32 rows of its
// open block (block_size rows per KV head and paged layer); 0 otherwise.
int64_t sequence_fixed_bytes(const std::vector<LayerSpec>& layers, StoreKind k);

// Bytes a sequence of `tokens` tokens keeps outside a pool, fixed part
// included: every layer of the contiguous kind; the sliding-window layers
// (rotating stores) and kv4's open-block rows of a paged kind.
int64_t unpooled_bytes_for_tokens(const std::vector<LayerSpec>& layers, DType dtype, StoreKind k, int64_t tokens);

// A sequence of kind k (a paged kind: on a fresh pool of its own).
std::unique_ptr<SequenceCache> make_store(const std::vector<LayerSpec>& layers, DType dtype, Device device,
                                          StoreKind k);

}  // namespace ingot::kv
