#include "kv/kinds.h"

#include <algorithm>
#include <cmath>

#include "kv/contiguous.h"
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

StoreKind parse_store_kind(const std::string& name) {
  if (name == "contiguous") return StoreKind::Contiguous;
  if (name == "paged" || name == "paged-direct") return StoreKind::Paged;
  if (name == "paged-gather") return StoreKind::PagedGather;
  if (name == "kv8") return StoreKind::Kv8;
  if (name == "kv4") return StoreKind::Kv4;
  fail(ErrorKind::InvalidArgument, "unknown KV cache kind '", name, "' (choose ", store_kind_choices(), ")");
}

const char* store_kind_name(StoreKind k) {
  switch (k) {
    case StoreKind::Contiguous: return "contiguous";
    case StoreKind::Paged: return "paged";
    case StoreKind::PagedGather: return "paged-gather";
    case StoreKind::Kv8: return "kv8";
    case StoreKind::Kv4: return "kv4";
  }
  return "?";
}

const char* store_kind_choices() { return "contiguous, paged, paged-gather, kv8 or kv4"; }

bool is_paged(StoreKind k) { return k != StoreKind::Contiguous; }

PoolOptions pool_options(StoreKind k) {
  PoolOptions o;
  switch (k) {
    case StoreKind::Contiguous:
      fail(ErrorKind::InvalidArgument, "the contiguous KV store has no block pool");
    case StoreKind::PagedGather:
      o.path = AttendPath::Gather;
      return o;
    case StoreKind::Paged:
      o.path = AttendPath::Direct;
      return o;
    case StoreKind::Kv8:
      o.path = AttendPath::Direct;
      o.quant = KvQuant::Q8;
      return o;
    case StoreKind::Kv4:
      o.path = AttendPath::Direct;
      o.quant = KvQuant::Q4;
      return o;
  }
  return o;
}

PoolOptions pool_options_for(const std::string& kind) { return pool_options(parse_store_kind(kind)); }

double bytes_per_token_layer(const LayerSpec& s, DType dtype, StoreKind k) {
  if ((k == StoreKind::Kv8 || k == StoreKind::Kv4) && s.window == 0) {
    const PoolOptions o = pool_options(k);
    double row = 0;
    for (int64_t dim : {s.head_dim, s.v_head_dim}) {
      const PlaneGeometry g = plane_geometry(dim, s.kv_heads, o, dtype);
      row += static_cast<double>(g.row_code_bytes + g.row_param_floats * sizeof(float));
    }
    return static_cast<double>(s.kv_heads) * row;
  }
  const double elems = static_cast<double>(s.kv_heads * (s.head_dim + s.v_head_dim));
  return elems * static_cast<double>(dtype_info(dtype).block_bytes);
}

int64_t bytes_for_tokens(const std::vector<LayerSpec>& layers, DType dtype, StoreKind k, int64_t tokens) {
  double total = 0;
  for (const auto& s : layers) {
    if (s.kind == LayerKind::LinearState) continue;
    const int64_t kept = s.window > 0 ? std::min(tokens, s.window) : tokens;
    total += bytes_per_token_layer(s, dtype, k) * static_cast<double>(kept);
  }
  return static_cast<int64_t>(std::ceil(total));
}

int64_t sequence_fixed_bytes(const std::vector<LayerSpec>& layers, StoreKind k) {
  if (k != StoreKind::Kv4) return 0;
  const int64_t bs = pool_options(k).block_size;
  int64_t total = 0;
  for (const auto& s : layers)
    if (s.window == 0 && s.kind == LayerKind::Attention)
      total += s.kv_heads * bs * (s.head_dim + s.v_head_dim) * static_cast<int64_t>(sizeof(float));
  return total;
}

int64_t unpooled_bytes_for_tokens(const std::vector<LayerSpec>& layers, DType dtype, StoreKind k, int64_t tokens) {
  if (!is_paged(k)) return bytes_for_tokens(layers, dtype, k, tokens) + sequence_fixed_bytes(layers, k);
  std::vector<LayerSpec> windowed;
  for (const auto& s : layers)
    if (s.window > 0 && s.kind == LayerKind::Attention) windowed.push_back(s);
  return bytes_for_tokens(windowed, dtype, k, tokens) + sequence_fixed_bytes(layers, k);
}

std::unique_ptr<SequenceCache> make_store(const std::vector<LayerSpec>& layers, DType dtype, Device device,
                                          StoreKind k) {
  if (k == StoreKind::Contiguous) return make_contiguous_cache(layers, dtype, device);
  return Pool::create(layers, dtype, device, pool_options(k))->new_sequence();
}

}  // namespace ingot::kv
