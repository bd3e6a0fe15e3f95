// CPU decode speed of 1B-class random-weight models: the dense Llama 3.2 1B
// shape against Gemma 3 1B and a Qwen3.5-shaped hybrid (gated DeltaNet +
// gated attention) of the same size — the cost of each architecture's extras.
// Weights are bf16 values generated in memory by a WeightSource.
//
//   family_decode [--prompt 64] [--gen 32] [--runs 3] [--threads 0] [--only llama,gemma3,qwen3_5]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "models/model.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "tensor/half.h"
#include "util/error.h"

using namespace ingot;

namespace {

// Parameters by name and shape; values drawn on request (uniform, scaled by
// 1/sqrt(fan-in) for matrices; norms near their neutral value).
class RandomSource final : public WeightSource {
 public:
  void add(const std::string& name, std::vector<int64_t> shape) { shapes_[name] = std::move(shape); }
  bool has(const std::string& name) const override { return shapes_.count(name) != 0; }
  Weight matrix(const std::string& name) const override {
    const auto& s = shape(name);
    Tensor t = Tensor::empty({s[0], s[1]}, DType::BF16);
    fill_bf16(t.data<uint16_t>(), s[0] * s[1], 1.0f / std::sqrt(static_cast<float>(s[1])));
    Weight w;
    w.data = t;
    return w;
  }
  Tensor vector(const std::string& name) const override {
    const auto& s = shape(name);
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    const bool norm = name.find("norm") != std::string::npos;
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = (norm ? 1.0f : 0.0f) + 0.05f * next();
    return Tensor::from_f32(v, Shape(s));
  }
  Tensor raw(const std::string& name) const override {
    const auto& s = shape(name);
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = 0.3f * next();
    return Tensor::from_f32(v, Shape(s));
  }
  size_t total_bytes() const override {
    size_t b = 0;
    for (const auto& [k, s] : shapes_) {
      int64_t n = 1;
      for (int64_t d : s) n *= d;
      b += static_cast<size_t>(n) * 2;
    }
    return b;
  }

 private:
  const std::vector<int64_t>& shape(const std::string& name) const {
    auto it = shapes_.find(name);
    if (it == shapes_.end()) fail(ErrorKind::NotFound, "bench source has no tensor ", name);
    return it->second;
  }
  float next() const {  // uniform in [-1, 1)
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return static_cast<float>(state_ >> 40) / static_cast<float>(1ull << 23) - 1.0f;
  }
  void fill_bf16(uint16_t* p, int64_t n, float scale) const {
    for (int64_t i = 0; i < n; ++i) p[i] = f32_to_bf16(scale * next());
  }
  std::map<std::string, std::vector<int64_t>> shapes_;
  mutable uint64_t state_ = 0x9E3779B97F4A7C15ull;
};

struct Arch {
  std::string name, config;
  RandomSource src;
};

void add_mlp(RandomSource& s, const std::string& p, int64_t hid, int64_t inter) {
  s.add(p + "mlp.gate_proj.weight", {inter, hid});
  s.add(p + "mlp.up_proj.weight", {inter, hid});
  s.add(p + "mlp.down_proj.weight", {hid, inter});
}

void add_attn(RandomSource& s, const std::string& p, int64_t hid, int64_t qrows, int64_t heads, int64_t kv, int64_t hd,
              bool qk_norm) {
  s.add(p + "self_attn.q_proj.weight", {qrows, hid});
  s.add(p + "self_attn.k_proj.weight", {kv * hd, hid});
  s.add(p + "self_attn.v_proj.weight", {kv * hd, hid});
  s.add(p + "self_attn.o_proj.weight", {hid, heads * hd});
  if (qk_norm) {
    s.add(p + "self_attn.q_norm.weight", {hd});
    s.add(p + "self_attn.k_norm.weight", {hd});
  }
}

// Llama 3.2 1B: 16 layers, hidden 2048, GQA 32/8, tied 128k vocabulary.
void llama(Arch& a) {
  const int64_t V = 128256, hid = 2048, inter = 8192, L = 16;
  a.name = "llama (Llama-3.2-1B shape)";
  a.config = R"({"model_type":"llama","vocab_size":128256,"hidden_size":2048,"intermediate_size":8192,
    "num_hidden_layers":16,"num_attention_heads":32,"num_key_value_heads":8,"head_dim":64,
    "rope_theta":500000.0,"tie_word_embeddings":true,"rms_norm_eps":1e-5})";
  a.src.add("model.embed_tokens.weight", {V, hid});
  a.src.add("model.norm.weight", {hid});
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    a.src.add(p + "input_layernorm.weight", {hid});
    a.src.add(p + "post_attention_layernorm.weight", {hid});
    add_attn(a.src, p, hid, 32 * 64, 32, 8, 64, false);
    add_mlp(a.src, p, hid, inter);
  }
}

// Gemma 3 1B: 26 layers (5 sliding of 512 per full), hidden 1152, MQA with
// 256-wide heads, tied 262k vocabulary.
void gemma3(Arch& a) {
  const int64_t V = 262144, hid = 1152, inter = 6912, L = 26;
  a.name = "gemma3 (Gemma-3-1B shape)";
  a.config = R"({"model_type":"gemma3_text","vocab_size":262144,"hidden_size":1152,"intermediate_size":6912,
    "num_hidden_layers":26,"num_attention_heads":4,"num_key_value_heads":1,"head_dim":256,
    "query_pre_attn_scalar":256,"sliding_window":512,"sliding_window_pattern":6,
    "rope_theta":1000000.0,"rope_local_base_freq":10000.0,"hidden_activation":"gelu_pytorch_tanh",
    "tie_word_embeddings":true,"rms_norm_eps":1e-6})";
  a.src.add("model.embed_tokens.weight", {V, hid});
  a.src.add("model.norm.weight", {hid});
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* n : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                          "post_feedforward_layernorm"})
      a.src.add(p + n + ".weight", {hid});
    add_attn(a.src, p, hid, 4 * 256, 4, 1, 256, true);
    add_mlp(a.src, p, hid, inter);
  }
}

// A Qwen3.5-shaped hybrid of the same size: 16 layers (3 DeltaNet : 1 gated
// attention), hidden 2048, 16 DeltaNet heads of 128, tied 152k vocabulary.
void qwen35(Arch& a) {
  const int64_t V = 151936, hid = 2048, inter = 6144, L = 16, nk = 16, nv = 16, dk = 128, dv = 128;
  a.name = "qwen3_5 (1B-class hybrid)";
  a.config = R"({"model_type":"qwen3_5_text","vocab_size":151936,"hidden_size":2048,"intermediate_size":6144,
    "num_hidden_layers":16,"num_attention_heads":8,"num_key_value_heads":2,"head_dim":256,
    "full_attention_interval":4,"linear_num_key_heads":16,"linear_num_value_heads":16,
    "linear_key_head_dim":128,"linear_value_head_dim":128,"linear_conv_kernel_dim":4,
    "rope_parameters":{"rope_type":"default","rope_theta":10000000.0,"partial_rotary_factor":0.25},
    "tie_word_embeddings":true,"rms_norm_eps":1e-6})";
  a.src.add("model.embed_tokens.weight", {V, hid});
  a.src.add("model.norm.weight", {hid});
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    a.src.add(p + "input_layernorm.weight", {hid});
    a.src.add(p + "post_attention_layernorm.weight", {hid});
    if ((i + 1) % 4 == 0) {
      add_attn(a.src, p, hid, 2 * 8 * 256, 8, 2, 256, true);
    } else {
      const std::string q = p + "linear_attn.";
      const int64_t kd = nk * dk, vd = nv * dv;
      a.src.add(q + "in_proj_qkv.weight", {2 * kd + vd, hid});
      a.src.add(q + "in_proj_z.weight", {vd, hid});
      a.src.add(q + "in_proj_b.weight", {nv, hid});
      a.src.add(q + "in_proj_a.weight", {nv, hid});
      a.src.add(q + "conv1d.weight", {2 * kd + vd, 1, 4});
      a.src.add(q + "A_log", {nv});
      a.src.add(q + "dt_bias", {nv});
      a.src.add(q + "norm.weight", {dv});
      a.src.add(q + "out_proj.weight", {hid, vd});
    }
    add_mlp(a.src, p, hid, inter);
  }
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  int prompt = 64, gen = 32, runs = 3, threads = 0;
  std::string only = "llama,gemma3,qwen3_5";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--prompt") prompt = std::stoi(v);
    else if (k == "--gen") gen = std::stoi(v);
    else if (k == "--runs") runs = std::stoi(v);
    else if (k == "--threads") threads = std::stoi(v);
    else if (k == "--only") only = v;
    else { std::fprintf(stderr, "unknown flag %s\n", k.c_str()); return 2; }
  }
  runtime::init_backends();
  if (threads > 0) cpu::set_num_threads(threads);
  std::printf("| model | weights (GB, bf16) | prefill %d tok/s | decode tok/s (median of %d, %d tokens) |\n", prompt,
              runs, gen);
  std::printf("| --- | ---: | ---: | ---: |\n");
  for (const std::string which : {"llama", "gemma3", "qwen3_5"}) {
    if (("," + only + ",").find("," + which + ",") == std::string::npos) continue;
    Arch a;
    if (which == "llama") llama(a);
    if (which == "gemma3") gemma3(a);
    if (which == "qwen3_5") qwen35(a);
    auto model = build_model(parse_model_config(a.config), a.src, {});
    std::vector<int32_t> ids;
    for (int i = 0; i < prompt; ++i) ids.push_back(1 + (i * 7919) % 1000);
    std::vector<double> decode, pre;
    for (int r = 0; r <= runs; ++r) {  // run 0 warms up
      auto cache = new_cache(*model);
      BatchInput in;
      in.add(cache.get(), ids);
      auto t0 = std::chrono::steady_clock::now();
      int32_t tok = ops::argmax(model->forward(in)).to_i32_vector()[0];
      double tp = seconds_since(t0);
      auto t1 = std::chrono::steady_clock::now();
      for (int i = 0; i < gen; ++i) {
        BatchInput step;
        step.add(cache.get(), std::span(&tok, 1));
        tok = ops::argmax(model->forward(step)).to_i32_vector()[0];
      }
      double td = seconds_since(t1);
      if (r > 0) {
        pre.push_back(prompt / tp);
        decode.push_back(gen / td);
      }
    }
    std::sort(decode.begin(), decode.end());
    std::sort(pre.begin(), pre.end());
    std::printf("| %s | %.2f | %.1f | %.2f |\n", a.name.c_str(), static_cast<double>(model->weight_bytes()) / 1e9,
                pre[pre.size() / 2], decode[decode.size() / 2]);
    std::fflush(stdout);
  }
  return 0;
}
