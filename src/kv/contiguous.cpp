#include "kv/contiguous.h"

#include <algorithm>

#include "kv/linear_state.h"
#include "ops/ops.h"
#include "util/error.h"

namespace ingot::kv {

ContiguousLayerCache::ContiguousLayerCache(const LayerSpec& spec, DType dtype, Device device)
    : spec_(spec), dtype_(dtype), device_(device) {}

void ContiguousLayerCache::reserve(int64_t tokens) {
  int64_t cap = k_.defined() ? k_.dim(0) : 0;
  if (tokens <= cap) return;
  int64_t ncap = std::max<int64_t>({tokens, cap * 2, 64});
  Tensor nk = Tensor::empty({ncap, spec_.kv_heads, spec_.head_dim}, dtype_, device_);
  Tensor nv = Tensor::empty({ncap, spec_.kv_heads, spec_.v_head_dim}, dtype_, device_);
  if (len_) {
    Tensor dk = nk.slice(0, 0, len_), dv = nv.slice(0, 0, len_);
    copy_into(k_.slice(0, 0, len_), dk);
    copy_into(v_.slice(0, 0, len_), dv);
  }
  k_ = nk;
  v_ = nv;
}

void ContiguousLayerCache::append(const Tensor& k, const Tensor& v) {
  const int64_t t = k.dim(0);
  INGOT_CHECK(k.dim(1) == spec_.kv_heads && k.dim(2) == spec_.head_dim && v.dim(0) == t);
  reserve(len_ + t);
  Tensor kc = ops::cast(k, dtype_), vc = ops::cast(v, dtype_);
  Tensor dk = k_.slice(0, len_, len_ + t), dv = v_.slice(0, len_, len_ + t);
  copy_into(kc.contiguous(), dk);
  copy_into(vc.contiguous(), dv);
  len_ += t;
}

std::pair<Tensor, Tensor> ContiguousLayerCache::fetch(int64_t* first_pos) const {
  *first_pos = 0;
  return {k_.slice(0, 0, len_), v_.slice(0, 0, len_)};
}

void ContiguousLayerCache::trim(int64_t n) {
  INGOT_CHECK(n >= 0 && n <= len_);
  len_ -= n;
}

bool ContiguousLayerCache::reserve_fixed(int64_t tokens) {
  reserve(tokens);
  return true;
}

void ContiguousLayerCache::append_at(const Tensor& k, const Tensor& v, const Tensor& positions) {
  INGOT_CHECK(k.dim(1) == spec_.kv_heads && k.dim(2) == spec_.head_dim && v.dim(0) == k.dim(0));
  INGOT_CHECK(k_.defined(), "append_at needs reserve_fixed first");
  // The backend rounds to the store's dtype as it writes (one kernel, not two).
  ops::write_rows_at_pair(k_, k.contiguous(), v_, v.contiguous(), positions);
}

Tensor ContiguousLayerCache::attend_upto(const Tensor& q, AttnParams p, const Tensor& kv_len) const {
  INGOT_CHECK(k_.defined(), "attend_upto needs reserve_fixed first");
  p.q_offset = 0;
  p.kv_len = kv_len.data<int32_t>();
  return ops::attention(q, k_, v_, p);
}

void ContiguousLayerCache::advance(int64_t n) {
  INGOT_CHECK(n >= 0 && k_.defined() && len_ + n <= k_.dim(0), "advance past the reserved rows");
  len_ += n;
}

std::unique_ptr<LayerCache> ContiguousLayerCache::clone() const {
  auto c = std::make_unique<ContiguousLayerCache>(spec_, dtype_, device_);
  if (len_) {
    c->k_ = k_.slice(0, 0, len_).clone();
    c->v_ = v_.slice(0, 0, len_).clone();
    c->len_ = len_;
  }
  return c;
}

std::unique_ptr<SequenceCache> make_contiguous_cache(const std::vector<LayerSpec>& layers, DType dtype,
                                                     Device device) {
  std::vector<std::unique_ptr<LayerCache>> v;
  for (const auto& s : layers) {
    if (s.kind == LayerKind::LinearState)
      v.push_back(std::make_unique<LinearStateCache>(s, device));
    else
      v.push_back(std::make_unique<ContiguousLayerCache>(s, dtype, device));
  }
  return std::make_unique<LayeredCache>(std::move(v));
}

}  // namespace ingot::kv
