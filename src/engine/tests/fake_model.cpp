#include "fake_model.h"

#include "kv/contiguous.h"

namespace ingot::testing {

std::atomic<int64_t>& live_counting_caches() {
  static std::atomic<int64_t> n{0};
  return n;
}

std::atomic<int64_t>& resident_counting_tokens() {
  static std::atomic<int64_t> n{0};
  return n;
}

namespace {
class CountingLayer final : public kv::LayerCache {
 public:
  explicit CountingLayer(std::unique_ptr<kv::LayerCache> inner) : inner_(std::move(inner)) {
    resident_counting_tokens() += inner_->length();
  }
  ~CountingLayer() override { resident_counting_tokens() -= inner_->length(); }
  int64_t length() const override { return inner_->length(); }
  void append(const Tensor& k, const Tensor& v) override {
    inner_->append(k, v);
    resident_counting_tokens() += k.dim(0);
  }
  std::pair<Tensor, Tensor> fetch(int64_t* first) const override { return inner_->fetch(first); }
  void trim(int64_t n) override {
    inner_->trim(n);
    resident_counting_tokens() -= n;
  }
  std::unique_ptr<kv::LayerCache> clone() const override { return std::make_unique<CountingLayer>(inner_->clone()); }

 private:
  std::unique_ptr<kv::LayerCache> inner_;
};

class CountingCache final : public kv::SequenceCache {
 public:
  explicit CountingCache(std::unique_ptr<kv::SequenceCache> inner) : inner_(std::move(inner)) { ++live_counting_caches(); }
  ~CountingCache() override { --live_counting_caches(); }
  int num_layers() const override { return inner_->num_layers(); }
  kv::LayerCache& layer(int i) override { return inner_->layer(i); }
  std::unique_ptr<kv::SequenceCache> clone() const override { return std::make_unique<CountingCache>(inner_->clone()); }

 private:
  std::unique_ptr<kv::SequenceCache> inner_;
};
}  // namespace

std::unique_ptr<kv::SequenceCache> FakeModel::make_cache(const CacheOptions& opt) const {
  if (!counting || opt.kind != "contiguous") return nullptr;
  std::vector<std::unique_ptr<kv::LayerCache>> layers;
  for (const auto& spec : cache_layout())
    layers.push_back(std::make_unique<CountingLayer>(std::make_unique<kv::ContiguousLayerCache>(spec, kv_dtype(), device_)));
  return std::make_unique<CountingCache>(std::make_unique<kv::LayeredCache>(std::move(layers)));
}

FakeModel::FakeModel(int64_t vocab, int64_t max_pos) {
  cfg_.model_type = "fake";
  cfg_.vocab_size = vocab;
  cfg_.hidden_size = 4;
  cfg_.intermediate_size = 4;
  cfg_.num_hidden_layers = 1;
  cfg_.num_attention_heads = 1;
  cfg_.num_key_value_heads = 1;
  cfg_.head_dim = 1;
  cfg_.max_position_embeddings = max_pos;
}

void FakeModel::logits_row(int32_t token, int64_t pos, float* out) const {
  if (position_period > 0) pos %= position_period;
  for (int64_t j = 0; j < cfg_.vocab_size; ++j) {
    uint64_t h = (static_cast<uint64_t>(token) * 1000003u + static_cast<uint64_t>(pos)) * 0x9e3779b97f4a7c15ULL +
                 static_cast<uint64_t>(j) * 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 29;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 32;
    out[j] = static_cast<float>(h % 4000) / 1000.0f - 2.0f;
  }
}

Tensor FakeModel::forward(const BatchInput& in) {
  ++forward_calls;
  tokens_computed += static_cast<int64_t>(in.tokens.size());
  int64_t rows = 0;
  for (const auto& s : in.seqs) rows += s.all_logits ? s.n_tokens : 1;
  const int64_t V = cfg_.vocab_size;
  Tensor out = Tensor::empty({rows, V}, DType::F32);
  float* o = out.data<float>();
  int64_t t = 0, r = 0;
  for (const auto& s : in.seqs) {
    const int64_t base = s.cache->offset();
    Tensor kv = Tensor::zeros({s.n_tokens, 1, 1}, DType::F32);
    s.cache->layer(0).append(kv, kv);
    for (int64_t i = 0; i < s.n_tokens; ++i, ++t)
      if (s.all_logits || i == s.n_tokens - 1) logits_row(in.tokens[static_cast<size_t>(t)], base + i, o + (r++) * V);
  }
  if (on_forward) on_forward(in);
  return out;
}

}  // namespace ingot::testing
