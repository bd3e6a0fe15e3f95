#include "kv/kinds.h"

#include "kv/linear_state.h"

#include "kv/paged.h"
#include "kv/rotating.h"
#include "util/error.h"

namespace ingot::kv {

std::unique_ptr<SequenceCache> Pool::new_sequence() {
  std::vector<std::unique_ptr<LayerCache>> layers;
  auto self = shared_from_this();
  for (size_t i = 0; i < layout_.size(); ++i) {
    if (layers_[i]) {
      layers.push_back(std::make_unique<PagedLayerCache>(self, layers_[i].get()));
    } else if (layout_[i].kind == LayerKind::LinearState) {
      layers.push_back(std::make_unique<LinearStateCache>(layout_[i], device_));
    } else {
      layers.push_back(std::make_unique<RotatingLayerCache>(layout_[i], dtype_, device_, opt_.window_slack));
    }
  }
  return std::make_unique<LayeredCache>(std::move(layers));
}

PoolOptions pool_options_for(const std::string& kind) {
  PoolOptions o;
  if (kind == "paged") return o;
  o.path = AttendPath::Direct;
  if (kind == "paged-direct") return o;
  if (kind == "kv8") {
    o.quant = KvQuant::Q8;
    return o;
  }
  if (kind == "kv4") {
    o.quant = KvQuant::Q4;
    return o;
  }
  fail(ErrorKind::InvalidArgument, "unknown paged KV kind '", kind, "'");
}

std::unique_ptr<SequenceCache> make_paged_cache(const std::vector<LayerSpec>& layers, DType dtype,
                                                Device device, const PoolOptions& opt) {
  return Pool::create(layers, dtype, device, opt)->new_sequence();
}

std::vector<std::pair<std::string, StoreMaker>> builtin_store_kinds() {
  std::vector<std::pair<std::string, StoreMaker>> v;
  for (const char* k : {"paged", "paged-direct", "kv8", "kv4"}) {
    PoolOptions o = pool_options_for(k);
    v.emplace_back(k, [o](const std::vector<LayerSpec>& l, DType dt, Device d) {
      return make_paged_cache(l, dt, d, o);
    });
  }
  return v;
}

}  // namespace ingot::kv
