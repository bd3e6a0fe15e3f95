// The KV cache interface every attention layer talks to. A SequenceCache
// holds one LayerCache per layer for one sequence; stores differ in how
// they keep K/V (contiguous, paged, quantized, rotating) but not in what
// attention sees.
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "ops/backend.h"
#include "tensor/tensor.h"

namespace ingot::kv {

class LinearState;

class LayerCache {
 public:
  virtual ~LayerCache() = default;
  // Tokens this layer has seen (the position of the next token).
  virtual int64_t length() const = 0;
  // k [T, KVH, D], v [T, KVH, Dv] for the next T positions.
  virtual void append(const Tensor& k, const Tensor& v) = 0;
  // The keys/values attention may see, contiguous, and the absolute
  // position of their first row.
  virtual std::pair<Tensor, Tensor> fetch(int64_t* first_pos) const = 0;
  // Attention of q [T, H, D] for the T most recently appended tokens. The
  // store fills p.q_offset; the default gathers with fetch() and runs the
  // reference SDPA (the numerical control for direct kernels).
  virtual Tensor attend(const Tensor& q, AttnParams p) const;
  // Drops the last n tokens.
  virtual void trim(int64_t n) = 0;
  // An independent copy: later appends to either never show in the other.
  // Paged stores share blocks copy-on-write; contiguous ones copy.
  virtual std::unique_ptr<LayerCache> clone() const = 0;
  // Recurrent-state layers (gated DeltaNet) expose their state here instead
  // of K/V; attention stores return nullptr.
  virtual LinearState* linear_state() { return nullptr; }

  // ---- Graph-replayable steps (stepgraph/greedy_step.h): storage that never
  // moves, and appends / attention that take the position and the key count
  // from device memory so one captured step serves every token. Stores
  // without them report unsupported.
  // Makes room for `tokens` without moving storage again; false if unsupported.
  virtual bool reserve_fixed(int64_t tokens) { (void)tokens; return false; }
  // Writes k/v rows at the device positions (i32 [T]); the host length is unchanged.
  virtual void append_at(const Tensor& k, const Tensor& v, const Tensor& positions);
  // attend() over the first *kv_len (device i32 [1]) reserved rows.
  virtual Tensor attend_upto(const Tensor& q, AttnParams p, const Tensor& kv_len) const;
  // Host bookkeeping for n tokens that replayed steps appended on the device.
  virtual void advance(int64_t n);
};

class SequenceCache {
 public:
  virtual ~SequenceCache() = default;
  virtual int num_layers() const = 0;
  virtual LayerCache& layer(int i) = 0;
  // Position of the next token.
  int64_t offset() { return num_layers() ? layer(0).length() : 0; }
  virtual void trim(int64_t n) {
    for (int i = 0; i < num_layers(); ++i) layer(i).trim(n);
  }
  virtual std::unique_ptr<SequenceCache> clone() const = 0;
  // Every layer reserve_fixed(tokens); false if one cannot.
  bool reserve_fixed(int64_t tokens) {
    for (int i = 0; i < num_layers(); ++i)
      if (!layer(i).reserve_fixed(tokens)) return false;
    return true;
  }
  void advance(int64_t n) {
    for (int i = 0; i < num_layers(); ++i) layer(i).advance(n);
  }
};

enum class LayerKind { Attention, LinearState };

// Shape of one layer's cache as the model declares it.
struct LayerSpec {
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t window = 0;  // sliding-window layers may keep only this many tokens
  // LinearState layers: a short causal conv over conv_channels with
  // conv_kernel taps, and one [state_k_dim, state_v_dim] matrix per state head.
  LayerKind kind = LayerKind::Attention;
  int64_t conv_channels = 0, conv_kernel = 0;
  int64_t state_heads = 0, state_k_dim = 0, state_v_dim = 0;
};

// A SequenceCache made of per-layer stores.
class LayeredCache final : public SequenceCache {
 public:
  explicit LayeredCache(std::vector<std::unique_ptr<LayerCache>> layers) : layers_(std::move(layers)) {}
  int num_layers() const override { return static_cast<int>(layers_.size()); }
  LayerCache& layer(int i) override { return *layers_.at(static_cast<size_t>(i)); }
  std::unique_ptr<SequenceCache> clone() const override {
    std::vector<std::unique_ptr<LayerCache>> c;
    for (const auto& l : layers_) c.push_back(l->clone());
    return std::make_unique<LayeredCache>(std::move(c));
  }

 private:
  std::vector<std::unique_ptr<LayerCache>> layers_;
};

}  // namespace ingot::kv
