// CPU attention: one flash-style kernel behind every KV store. Keys are cut
// into tiles of kAttnTile rows and chunks of kAttnChunk keys, both at fixed
// multiples of their size from key 0. Each chunk is folded tile by tile into
// its own online-softmax state (the query heads that share a KV head read
// each tile once), and a query row's chunks merge left to right.
//
// How the work is spread over threads (chunks of one decode row in parallel,
// or blocks of prompt rows) never changes a number: a row gets the same bits
// alone or inside a prompt, from a contiguous buffer or from a paged block
// table, since all of them present the same tiles.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cpu/kernels.h"
#include "ops/backend.h"
#include "tensor/dtype.h"

namespace ingot::cpu {

constexpr int64_t kAttnChunk = 256;  // keys per independently folded chunk

// Rows [0, n) of one tile of one KV head.
struct KvTile {
  const void* k = nullptr;
  const void* v = nullptr;
  DType dt = DType::F32;     // of both: f32, bf16 or f16
  int64_t k_ld = 0, v_ld = 0;  // elements between rows
};

// Where the keys and values of one attention call live.
class KvTiles {
 public:
  virtual ~KvTiles() = default;
  // Key rows [row0, row0 + n) of KV head h; they never cross a multiple of
  // kAttnTile in absolute position. Rows that have to be converted (quantized
  // stores, rows spread over blocks) are written to `scratch` (kAttnTile *
  // (d + dv) floats) and returned as float32.
  virtual KvTile tile(int64_t row0, int64_t h, int64_t n, float* scratch) const = 0;
  // Asks the memory for the bytes tile() will read for the same rows (a
  // tile's K and V rows sit in their own block, where the hardware's stream
  // prefetch does not follow them); no effect on any result.
  virtual void prefetch(int64_t /*row0*/, int64_t /*h*/, int64_t /*n*/) const {}
};

// Hints every cache line of [p, p + bytes) into the cache.
inline void prefetch_bytes(const void* p, size_t bytes) {
  const auto* b = static_cast<const char*>(p);
  for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(b + o, 0, 3);
}

struct AttnShape {
  int64_t rows = 0;       // query rows T
  int64_t heads = 0;      // query heads H
  int64_t kv_heads = 0;   // H % kv_heads == 0
  int64_t d = 0, dv = 0;  // key and value head dims
  int64_t keys = 0;       // keys in the store
};

// q [T, H, d] float32 -> out [T, H, dv] float32. Query row i sits at key
// row p.q_offset + i; key row j at absolute position p.key_base + j, which
// places the tiles and chunks (p.kv_len is not read: keys is the count).
// Rows that see no key get zeros.
void attention_tiled(const float* q, const AttnShape& s, const KvTiles& kv, const AttnParams& p, float* out);

// Several attention calls (a decode step's sequences) as one parallel job;
// each call gives the same bits as attention_tiled alone.
struct AttnCall {
  const float* q;
  AttnShape s;
  const KvTiles* kv;
  AttnParams p;
  float* out;
};
void attention_tiled_many(const std::vector<AttnCall>& calls);

// A contiguous store: k [keys, kv_heads, d], v [keys, kv_heads, dv], one dtype.
class ContiguousKvTiles final : public KvTiles {
 public:
  ContiguousKvTiles(const void* k, const void* v, DType dt, int64_t kv_heads, int64_t d, int64_t dv)
      : k_(static_cast<const uint8_t*>(k)), v_(static_cast<const uint8_t*>(v)), dt_(dt), kvh_(kv_heads), d_(d),
        dv_(dv), es_(dtype_size(dt)) {}
  KvTile tile(int64_t row0, int64_t h, int64_t n, float* scratch) const override;

 private:
  const uint8_t* k_;
  const uint8_t* v_;
  DType dt_;
  int64_t kvh_, d_, dv_;
  size_t es_;
};

}  // namespace ingot::cpu
