// The contiguous store: one growing [capacity, KVH, D] buffer per layer.
// The numerical control that every other store is checked against.
#pragma once
#include "kv/cache.h"

namespace ingot::kv {

class ContiguousLayerCache final : public LayerCache {
 public:
  ContiguousLayerCache(const LayerSpec& spec, DType dtype, Device device);
  int64_t length() const override { return len_; }
  void append(const Tensor& k, const Tensor& v) override;
  std::pair<Tensor, Tensor> fetch(int64_t* first_pos) const override;
  void trim(int64_t n) override;
  std::unique_ptr<LayerCache> clone() const override;
  bool reserve_fixed(int64_t tokens) override;
  void append_at(const Tensor& k, const Tensor& v, const Tensor& positions) override;
  Tensor attend_upto(const Tensor& q, AttnParams p, const Tensor& kv_len) const override;
  void advance(int64_t n) override;

  // For kv/batched_rows: the store's shape and buffers ([capacity, KVH, D];
  // undefined before the first append or reserve), and room for `tokens`
  // (may move storage, as append does).
  const LayerSpec& spec() const { return spec_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Tensor& keys() const { return k_; }
  const Tensor& values() const { return v_; }
  void make_room(int64_t tokens) { reserve(tokens); }

 private:
  void reserve(int64_t tokens);
  LayerSpec spec_;
  DType dtype_;
  Device device_;
  Tensor k_, v_;
  int64_t len_ = 0;
};

std::unique_ptr<SequenceCache> make_contiguous_cache(const std::vector<LayerSpec>& layers, DType dtype,
                                                     Device device);

}  // namespace ingot::kv
