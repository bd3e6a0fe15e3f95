// The linear-state store: the recurrent state of one gated-DeltaNet layer
// for one sequence. It replaces K/V for such layers: a [conv_kernel - 1,
// conv_channels] window of the last conv inputs and a [heads, k_dim, v_dim]
// float32 state matrix per head. Its size never grows with the sequence.
#pragma once
#include "kv/cache.h"

namespace ingot::kv {

class LinearState {
 public:
  virtual ~LinearState() = default;
  // Tokens folded into the state so far.
  virtual int64_t tokens() const = 0;
  // Mutable state, updated in place by the layer's ops.
  virtual Tensor& conv_state() = 0;  // f32 [conv_kernel - 1, conv_channels]
  virtual Tensor& ssm_state() = 0;   // f32 [heads, k_dim, v_dim]
  // Records that n more tokens were folded in.
  virtual void advance(int64_t n) = 0;
  // Replaces the whole state (snapshot restore); shapes must match.
  virtual void restore(const Tensor& conv, const Tensor& ssm, int64_t tokens) = 0;
};

class LinearStateCache final : public LayerCache, public LinearState {
 public:
  LinearStateCache(const LayerSpec& spec, Device device);
  // LayerCache: length is the tokens seen; K/V calls are errors.
  int64_t length() const override { return tokens_; }
  void append(const Tensor& k, const Tensor& v) override;
  std::pair<Tensor, Tensor> fetch(int64_t* first_pos) const override;
  // A recurrent state cannot be rewound: only trim(0) is allowed (restore a
  // clone taken earlier instead).
  void trim(int64_t n) override;
  std::unique_ptr<LayerCache> clone() const override;
  LinearState* linear_state() override { return this; }

  int64_t tokens() const override { return tokens_; }
  Tensor& conv_state() override { return conv_; }
  Tensor& ssm_state() override { return ssm_; }
  void advance(int64_t n) override { tokens_ += n; }
  void restore(const Tensor& conv, const Tensor& ssm, int64_t tokens) override;

 private:
  LayerSpec spec_;
  Device device_;
  Tensor conv_, ssm_;
  int64_t tokens_ = 0;
};

}  // namespace ingot::kv
