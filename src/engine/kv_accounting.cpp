// KV memory accounting for admission and metrics. Paged kinds ask their pool:
// its count of blocks in use holds every block once, however many sequences
// and prefix entries share it, so a sequence forked from a cached prefix is
// charged only for what it adds. The contiguous kind copies on fork and is
// counted per sequence and per prefix entry.
#include "engine/engine_impl.h"

namespace ingot::engine {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

int64_t EngineImpl::kv_need(int64_t total, int64_t shared) const {
  // A draft model's cache for the sequence, counted whether or not the request speculates.
  const int64_t drafter = drafter_ ? drafter_->kv_bytes(total) : 0;
  if (!pool_)
    return kv::bytes_for_tokens(layout_, kv_dtype_, kind_, total) + kv::sequence_fixed_bytes(layout_, kind_) + drafter;
  const int64_t bs = pool_->options().block_size;
  const auto block_bytes = static_cast<int64_t>(pool_->bytes_per_block());
  return (ceil_div(total, bs) - shared / bs) * block_bytes +
         kv::unpooled_bytes_for_tokens(layout_, kv_dtype_, kind_, total) + drafter;
}

int64_t EngineImpl::kv_committed() const {
  if (!pool_) return reserved_ + (prefix_ ? prefix_->bytes() : 0);
  const int64_t bs = pool_->options().block_size;
  const auto block_bytes = static_cast<int64_t>(pool_->bytes_per_block());
  // Held blocks, plus what each sequence may still take beyond the blocks it
  // already holds of its own.
  int64_t c = pool_->used_bytes();
  for (const auto& s : running_) {
    if (!s->cache) continue;
    const int64_t own_blocks = ceil_div(s->cache->offset(), bs) - s->cached_prefix / bs;
    c += s->reserved_bytes - own_blocks * block_bytes;
  }
  return c;
}

int64_t EngineImpl::kv_used_bytes() const {
  if (!pool_) {
    int64_t used = prefix_ ? prefix_->bytes() : 0;
    for (const auto& s : running_)
      if (s->cache) used += kv_need(s->cache->offset(), 0);
    return used;
  }
  int64_t used = pool_->used_bytes();
  for (const auto& s : running_)
    if (s->cache) used += kv::unpooled_bytes_for_tokens(layout_, kv_dtype_, kind_, s->cache->offset());
  return used;
}

}  // namespace ingot::engine
