// A deterministic tiny Model for scheduler tests: one layer of 1x1 K/V (so
// caches really grow), logits a fixed pseudo-random function of the input
// token and its position.
#pragma once
#include <atomic>
#include <functional>

#include "ingot/types.h"
#include "models/model.h"

namespace ingot::testing {

// Live counting caches (contiguous stores that count themselves: what a
// FakeModel with `counting` set makes).
std::atomic<int64_t>& live_counting_caches();
// Token positions held by all live counting caches.
std::atomic<int64_t>& resident_counting_tokens();

// Token t decodes to the letter 'a' + t % 26.
class LetterDecoder final : public engine::TextDecoder {
 public:
  class S final : public Stream {
   public:
    std::string push(int32_t t) override { return std::string(1, static_cast<char>('a' + t % 26)); }
    std::string flush() override { return ""; }
  };
  std::unique_ptr<Stream> stream(bool) const override { return std::make_unique<S>(); }
};

class FakeModel final : public Model {
 public:
  explicit FakeModel(int64_t vocab = 32, int64_t max_pos = 4096);
  const ModelConfig& config() const override { return cfg_; }
  Tensor forward(const BatchInput& in) override;
  std::vector<kv::LayerSpec> cache_layout() const override { return {kv::LayerSpec{1, 1, 1, 0}}; }
  DType kv_dtype() const override { return DType::F32; }
  Device device() const override { return device_; }
  size_t weight_bytes() const override { return weight_bytes_; }
  // Counting caches for the contiguous kind when `counting` is set.
  std::unique_ptr<kv::SequenceCache> make_cache(const CacheOptions& opt) const override;
  bool counting = false;
  // When > 0 the logits see the position only modulo this period, so greedy
  // text falls into cycles a prompt-lookup drafter can predict.
  int64_t position_period = 0;
  // What the model reports for memory accounting (it still computes on the CPU).
  void report(Device d, size_t weight_bytes) {
    device_ = d;
    weight_bytes_ = weight_bytes;
  }

  // The logits row after `token` at `position`.
  void logits_row(int32_t token, int64_t position, float* out) const;
  // Called after each forward pass (the caches already hold the new tokens).
  std::function<void(const BatchInput&)> on_forward;
  std::atomic<int64_t> forward_calls{0}, tokens_computed{0};

 private:
  ModelConfig cfg_;
  Device device_ = Device::CPU;
  size_t weight_bytes_ = 0;
};

}  // namespace ingot::testing
