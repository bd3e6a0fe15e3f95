#include "test_models.h"

#include <cstdio>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "tensor/half.h"
#include "util/error.h"

namespace ingot::testing {

void write_random_llama(const std::string& dir, const LlamaShape& s, uint64_t seed) {
  std::filesystem::create_directories(dir);
  nlohmann::json cfg = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
                        {"vocab_size", s.vocab}, {"hidden_size", s.hidden}, {"intermediate_size", s.inter},
                        {"num_hidden_layers", s.layers}, {"num_attention_heads", s.heads},
                        {"num_key_value_heads", s.kv_heads}, {"head_dim", s.head_dim},
                        {"max_position_embeddings", s.max_pos}, {"rms_norm_eps", 1e-5}, {"hidden_act", "silu"},
                        {"rope_theta", 10000.0}, {"tie_word_embeddings", s.tied},
                        {"dtype", s.bf16 ? "bfloat16" : "float32"}, {"bos_token_id", 1}, {"eos_token_id", 2}};
  {
    FILE* f = std::fopen((dir + "/config.json").c_str(), "w");
    INGOT_CHECK(f);
    std::string t = cfg.dump(2);
    std::fwrite(t.data(), 1, t.size(), f);
    std::fclose(f);
  }
  struct T {
    std::string name;
    std::vector<int64_t> shape;
    bool norm;
  };
  std::vector<T> ts = {{"model.embed_tokens.weight", {s.vocab, s.hidden}, false}, {"model.norm.weight", {s.hidden}, true}};
  if (!s.tied) ts.push_back({"lm_head.weight", {s.vocab, s.hidden}, false});
  for (int64_t i = 0; i < s.layers; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    ts.push_back({p + "input_layernorm.weight", {s.hidden}, true});
    ts.push_back({p + "post_attention_layernorm.weight", {s.hidden}, true});
    ts.push_back({p + "self_attn.q_proj.weight", {s.heads * s.head_dim, s.hidden}, false});
    ts.push_back({p + "self_attn.k_proj.weight", {s.kv_heads * s.head_dim, s.hidden}, false});
    ts.push_back({p + "self_attn.v_proj.weight", {s.kv_heads * s.head_dim, s.hidden}, false});
    ts.push_back({p + "self_attn.o_proj.weight", {s.hidden, s.heads * s.head_dim}, false});
    ts.push_back({p + "mlp.gate_proj.weight", {s.inter, s.hidden}, false});
    ts.push_back({p + "mlp.up_proj.weight", {s.inter, s.hidden}, false});
    ts.push_back({p + "mlp.down_proj.weight", {s.hidden, s.inter}, false});
  }
  const size_t esize = s.bf16 ? 2 : 4;
  nlohmann::json header = nlohmann::json::object();
  size_t off = 0;
  for (const auto& t : ts) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<size_t>(d);
    header[t.name] = {{"dtype", s.bf16 ? "BF16" : "F32"}, {"shape", t.shape}, {"data_offsets", {off, off + n * esize}}};
    off += n * esize;
  }
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';
  FILE* f = std::fopen((dir + "/model.safetensors").c_str(), "wb");
  INGOT_CHECK(f);
  uint64_t hlen = h.size();
  std::fwrite(&hlen, 8, 1, f);
  std::fwrite(h.data(), 1, h.size(), f);
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  std::vector<uint8_t> buf;
  for (const auto& t : ts) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<size_t>(d);
    const float scale = t.norm ? 0.0f : 1.0f / std::sqrt(static_cast<float>(t.shape.back()));
    const size_t chunk = 1 << 20;
    for (size_t b = 0; b < n; b += chunk) {
      const size_t m = std::min(chunk, n - b);
      buf.resize(m * esize);
      for (size_t i = 0; i < m; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        float v = t.norm ? 1.0f : (static_cast<float>(x >> 40) / 16777216.0f * 2.0f - 1.0f) * scale * 1.7f;
        if (s.bf16) {
          uint16_t hv = f32_to_bf16(v);
          std::memcpy(buf.data() + i * 2, &hv, 2);
        } else {
          std::memcpy(buf.data() + i * 4, &v, 4);
        }
      }
      std::fwrite(buf.data(), 1, buf.size(), f);
    }
  }
  INGOT_CHECK(std::fclose(f) == 0, "writing ", dir);
}

}  // namespace ingot::testing
