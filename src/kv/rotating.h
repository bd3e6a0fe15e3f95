// The rotating store for sliding-window layers: it keeps only the last
// window - 1 tokens (plus a slack for trim()) before each append, so memory
// stays bounded however long the sequence grows. Live rows sit in one buffer
// that slides forward and is compacted when it reaches its end (amortised
// O(1) per token), so fetch() is always a zero-copy view. Attention sees
// exactly the keys the window lets it see, in the same order as the
// contiguous store: results are bit-identical to it.
#pragma once
#include "kv/cache.h"

namespace ingot::kv {

class RotatingLayerCache final : public LayerCache {
 public:
  RotatingLayerCache(const LayerSpec& spec, DType dtype, Device device, int64_t slack = 64);
  int64_t length() const override { return len_; }
  void append(const Tensor& k, const Tensor& v) override;
  std::pair<Tensor, Tensor> fetch(int64_t* first_pos) const override;
  void trim(int64_t n) override;
  std::unique_ptr<LayerCache> clone() const override;
  // Rows held now (bounded by window - 1 + slack + the last append).
  int64_t kept() const { return kept_; }
  int64_t capacity() const { return k_.defined() ? k_.dim(0) : 0; }
  // Takes kept rows k [n, KVH, D], v [n, KVH, Dv] (e.g. a mapped snapshot) as
  // the last n of `length` tokens. The buffer is replaced on the next append
  // that does not fit, so adopted memory is written only after a trim.
  void adopt(Tensor k, Tensor v, int64_t length);

 private:
  LayerSpec spec_;
  DType dtype_;
  Device device_;
  int64_t slack_;
  Tensor k_, v_;
  int64_t head_ = 0;  // buffer row of the oldest kept token
  int64_t kept_ = 0;
  int64_t len_ = 0;
};

}  // namespace ingot::kv
