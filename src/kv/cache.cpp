#include "kv/cache.h"

#include "ops/ops.h"

namespace ingot::kv {

Tensor LayerCache::attend(const Tensor& q, AttnParams p) const {
  int64_t first = 0;
  auto [k, v] = fetch(&first);
  // q row 0 sits at absolute position length() - T; keys start at `first`.
  p.q_offset = length() - q.dim(0) - first;
  return ops::attention(q, k, v, p);
}

}  // namespace ingot::kv
