#include "kv/rotating.h"

#include <algorithm>

#include "ops/ops.h"
#include "util/error.h"

namespace ingot::kv {

RotatingLayerCache::RotatingLayerCache(const LayerSpec& spec, DType dtype, Device device, int64_t slack)
    : spec_(spec), dtype_(dtype), device_(device), slack_(std::max<int64_t>(0, slack)) {
  INGOT_CHECK(spec.window > 0, "rotating store needs a window");
}

void RotatingLayerCache::append(const Tensor& k, const Tensor& v) {
  const int64_t t = k.dim(0);
  INGOT_CHECK(k.dim(1) == spec_.kv_heads && k.dim(2) == spec_.head_dim && v.dim(0) == t);
  // The next query sees at most window - 1 earlier tokens; keep those and the slack.
  const int64_t keep = std::min(kept_, spec_.window - 1 + slack_);
  head_ += kept_ - keep;
  kept_ = keep;
  const int64_t cap = capacity();
  if (head_ + kept_ + t > cap) {
    const int64_t need = kept_ + t;
    const int64_t ncap = need > cap ? std::max<int64_t>(2 * need, 2 * (spec_.window + slack_)) : cap;
    Tensor nk = ncap == cap ? k_ : Tensor::empty({ncap, spec_.kv_heads, spec_.head_dim}, dtype_, device_);
    Tensor nv = ncap == cap ? v_ : Tensor::empty({ncap, spec_.kv_heads, spec_.v_head_dim}, dtype_, device_);
    if (kept_) {
      // Same buffer: the source lies after the destination, so a clone first keeps the copy safe.
      Tensor sk = k_.slice(0, head_, head_ + kept_).clone(), sv = v_.slice(0, head_, head_ + kept_).clone();
      Tensor dk = nk.slice(0, 0, kept_), dv = nv.slice(0, 0, kept_);
      copy_into(sk, dk);
      copy_into(sv, dv);
    }
    k_ = nk;
    v_ = nv;
    head_ = 0;
  }
  Tensor kc = ops::cast(k, dtype_), vc = ops::cast(v, dtype_);
  Tensor dk = k_.slice(0, head_ + kept_, head_ + kept_ + t), dv = v_.slice(0, head_ + kept_, head_ + kept_ + t);
  copy_into(kc.contiguous(), dk);
  copy_into(vc.contiguous(), dv);
  kept_ += t;
  len_ += t;
}

std::pair<Tensor, Tensor> RotatingLayerCache::fetch(int64_t* first_pos) const {
  *first_pos = len_ - kept_;
  if (!kept_) {
    Tensor k = Tensor::empty({0, spec_.kv_heads, spec_.head_dim}, dtype_, device_);
    return {k, Tensor::empty({0, spec_.kv_heads, spec_.v_head_dim}, dtype_, device_)};
  }
  return {k_.slice(0, head_, head_ + kept_), v_.slice(0, head_, head_ + kept_)};
}

void RotatingLayerCache::trim(int64_t n) {
  if (n < 0 || n > len_) fail(ErrorKind::InvalidArgument, "cannot trim ", n, " of ", len_, " cached tokens");
  const int64_t dropped = len_ - kept_;
  if (n > kept_ || (dropped > 0 && kept_ - n < spec_.window - 1))
    fail(ErrorKind::InvalidArgument, "cannot trim ", n, " tokens from a sliding-window cache that keeps ",
         kept_ - (spec_.window - 1), " spare tokens");
  kept_ -= n;
  len_ -= n;
}

void RotatingLayerCache::adopt(Tensor k, Tensor v, int64_t length) {
  INGOT_CHECK(len_ == 0 && k.dim(0) == v.dim(0) && k.dim(0) <= length && k.dtype() == dtype_);
  kept_ = k.dim(0);
  k_ = std::move(k);
  v_ = std::move(v);
  head_ = 0;
  len_ = length;
}

std::unique_ptr<LayerCache> RotatingLayerCache::clone() const {
  auto c = std::make_unique<RotatingLayerCache>(spec_, dtype_, device_, slack_);
  if (kept_) {
    c->k_ = k_.slice(0, head_, head_ + kept_).clone();
    c->v_ = v_.slice(0, head_, head_ + kept_).clone();
  }
  c->kept_ = kept_;
  c->len_ = len_;
  return c;
}

}  // namespace ingot::kv
