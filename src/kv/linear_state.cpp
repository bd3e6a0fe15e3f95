#include "kv/linear_state.h"

#include "util/error.h"

namespace ingot::kv {

LinearStateCache::LinearStateCache(const LayerSpec& spec, Device device) : spec_(spec), device_(device) {
  INGOT_CHECK(spec.kind == LayerKind::LinearState && spec.conv_kernel >= 1 && spec.conv_channels > 0 &&
                  spec.state_heads > 0 && spec.state_k_dim > 0 && spec.state_v_dim > 0,
              "linear-state layer spec is incomplete");
  conv_ = Tensor::zeros({spec.conv_kernel - 1, spec.conv_channels}, DType::F32, device);
  ssm_ = Tensor::zeros({spec.state_heads, spec.state_k_dim, spec.state_v_dim}, DType::F32, device);
}

void LinearStateCache::append(const Tensor&, const Tensor&) {
  fail(ErrorKind::Internal, "append() on a linear-state layer: it keeps a recurrent state, not K/V");
}

std::pair<Tensor, Tensor> LinearStateCache::fetch(int64_t*) const {
  fail(ErrorKind::Internal, "fetch() on a linear-state layer: it keeps a recurrent state, not K/V");
}

void LinearStateCache::trim(int64_t n) {
  if (n == 0) return;
  fail(ErrorKind::Unsupported, "a recurrent (linear-attention) state cannot drop its last ", n,
       " tokens; restore an earlier snapshot instead");
}

std::unique_ptr<LayerCache> LinearStateCache::clone() const {
  auto c = std::make_unique<LinearStateCache>(spec_, device_);
  c->conv_ = conv_.clone();
  c->ssm_ = ssm_.clone();
  c->tokens_ = tokens_;
  return c;
}

void LinearStateCache::restore(const Tensor& conv, const Tensor& ssm, int64_t tokens) {
  INGOT_CHECK(conv.shape() == conv_.shape() && ssm.shape() == ssm_.shape(), "linear state restore: shape ",
              conv.describe(), " / ", ssm.describe(), " does not match ", conv_.describe(), " / ", ssm_.describe());
  // The state stays float32 on the model's device (the ops update it in place
  // there); a dtype change happens on the host, the only place Tensor::to(DType) runs.
  auto own_f32 = [&](const Tensor& t) {
    const Tensor f = t.dtype() == DType::F32 ? t : t.to(Device::CPU).to(DType::F32);
    return f.to(device_).contiguous().clone();
  };
  conv_ = own_f32(conv);
  ssm_ = own_f32(ssm);
  tokens_ = tokens;
}

}  // namespace ingot::kv
