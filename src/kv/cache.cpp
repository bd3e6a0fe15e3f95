#include "kv/cache.h"

#include "ops/ops.h"
#include "util/error.h"

namespace ingot::kv {

Tensor LayerCache::attend(const Tensor& q, AttnParams p) const {
  int64_t first = 0;
  auto [k, v] = fetch(&first);
  // q row 0 sits at absolute position length() - T; keys start at `first`.
  p.q_offset = length() - q.dim(0) - first;
  p.key_base = first;
  return ops::attention(q, k, v, p);
}

void LayerCache::append_at(const Tensor&, const Tensor&, const Tensor&) {
  fail(ErrorKind::Unsupported, "this KV store does not support graph-replayed steps");
}

Tensor LayerCache::attend_upto(const Tensor&, AttnParams, const Tensor&) const {
  fail(ErrorKind::Unsupported, "this KV store does not support graph-replayed steps");
}

void LayerCache::advance(int64_t) {
  fail(ErrorKind::Unsupported, "this KV store does not support graph-replayed steps");
}

}  // namespace ingot::kv
