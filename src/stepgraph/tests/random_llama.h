// A small random Llama-shaped model built in memory (bf16 weights on any
// device), for the step-graph tests.
#pragma once
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "models/model.h"
#include "runtime/runtime.h"
#include "util/error.h"

namespace ingot::stepgraph_testing {

constexpr int64_t kHidden = 256, kLayers = 3, kHeads = 8, kKvHeads = 2, kHeadDim = 32, kInter = 512, kVocab = 1000;

inline std::string config_json() {
  char buf[768];
  std::snprintf(buf, sizeof buf,
                R"({"model_type":"llama","architectures":["LlamaForCausalLM"],"vocab_size":%lld,)"
                R"("hidden_size":%lld,"intermediate_size":%lld,"num_hidden_layers":%lld,)"
                R"("num_attention_heads":%lld,"num_key_value_heads":%lld,"head_dim":%lld,)"
                R"("max_position_embeddings":4096,"rms_norm_eps":1e-5,"tie_word_embeddings":false,)"
                R"("rope_theta":10000.0,"torch_dtype":"bfloat16"})",
                (long long)kVocab, (long long)kHidden, (long long)kInter, (long long)kLayers, (long long)kHeads,
                (long long)kKvHeads, (long long)kHeadDim);
  return buf;
}

// Random bf16 matrices and near-one norms, generated on the host, placed on `device`.
class RandomSource final : public WeightSource {
 public:
  explicit RandomSource(Device d) : device_(d) {}
  bool has(const std::string&) const override { return true; }
  Weight matrix(const std::string& n) const override {
    auto [r, c] = dims(n);
    Weight w;
    w.data = random({r, c}, 0.08f).to(DType::BF16).to(device_);
    return w;
  }
  Tensor vector(const std::string&) const override {
    Tensor t = random({kHidden}, 0.1f);
    for (int64_t i = 0; i < kHidden; ++i) t.data<float>()[i] += 1.0f;
    return t.to(device_);
  }
  Tensor raw(const std::string& n) const override { fail(ErrorKind::Unsupported, "raw ", n); }
  size_t total_bytes() const override { return 0; }

 private:
  Tensor random(const Shape& s, float scale) const {
    std::normal_distribution<float> nd(0.0f, scale);
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (float& x : v) x = nd(gen_);
    return Tensor::from_f32(v, s);
  }
  static std::pair<int64_t, int64_t> dims(const std::string& n) {
    auto ends = [&](const char* s) { return n.ends_with(s); };
    if (ends("embed_tokens.weight") || ends("lm_head.weight")) return {kVocab, kHidden};
    if (ends("q_proj.weight")) return {kHeads * kHeadDim, kHidden};
    if (ends("k_proj.weight") || ends("v_proj.weight")) return {kKvHeads * kHeadDim, kHidden};
    if (ends("o_proj.weight")) return {kHidden, kHeads * kHeadDim};
    if (ends("gate_proj.weight") || ends("up_proj.weight")) return {kInter, kHidden};
    if (ends("down_proj.weight")) return {kHidden, kInter};
    fail(ErrorKind::InvalidArgument, "unknown parameter ", n);
  }
  Device device_;
  mutable std::mt19937 gen_{42};
};

inline std::unique_ptr<Model> make_model(Device d) {
  runtime::init_backends();
  RandomSource src(d);
  LoadOptions opt;
  opt.device = d;
  opt.dtype = DType::BF16;
  return build_model(parse_model_config(config_json()), src, opt);
}

}  // namespace ingot::stepgraph_testing
