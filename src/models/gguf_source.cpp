#include "models/gguf_source.h"

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "ops/ops.h"
#include "util/error.h"

namespace ingot {

namespace {

using nlohmann::json;

// Hugging Face per-layer suffix -> llama.cpp suffix.
const std::map<std::string, std::string>& layer_names() {
  static const std::map<std::string, std::string> m = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.bias", "attn_output.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  return m;
}

int64_t need_int(const GgufFile& g, const std::string& key) {
  auto v = g.get_int(key);
  if (!v) fail(ErrorKind::BadFormat, "gguf: missing metadata '", key, "'");
  return *v;
}

bool is_float_dtype(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

class GgufSource final : public WeightSource {
 public:
  GgufSource(std::shared_ptr<const GgufFile> g, const ModelConfig& cfg, const LoadOptions& opt)
      : g_(std::move(g)), cfg_(cfg), opt_(opt) {
    // llama.cpp's converter reorders q/k rows of llama-architecture models so
    // that its rope rotates adjacent pairs; we restore the Hugging Face order.
    unpermute_qk_ = g_->get_string("general.architecture").value_or("") == "llama";
  }

  bool has(const std::string& name) const override {
    std::string n = gguf_tensor_name(name);
    return !n.empty() && g_->tensor_info(n);
  }

  Weight matrix(const std::string& name) const override {
    Tensor t = fetch(name);
    if (t.ndim() != 2) fail(ErrorKind::BadFormat, name, ": expected a matrix, got ", t.describe());
    if (!is_quantized(t.dtype()) && !is_float_dtype(t.dtype()))
      fail(ErrorKind::BadFormat, name, ": unsupported dtype ", dtype_name(t.dtype()));
    if (unpermute_qk_) {
      if (name.ends_with("self_attn.q_proj.weight")) t = unpermute(t, cfg_.num_attention_heads);
      if (name.ends_with("self_attn.k_proj.weight")) t = unpermute(t, cfg_.num_key_value_heads);
    }
    if (!is_quantized(t.dtype()) && opt_.dtype && *opt_.dtype != t.dtype()) t = t.to(*opt_.dtype);
    Weight w;
    w.data = t.to(opt_.device);
    return ops::prepare_weight(w);
  }

  Tensor vector(const std::string& name) const override {
    Tensor t = fetch(name);
    if (!is_float_dtype(t.dtype())) fail(ErrorKind::BadFormat, name, ": unsupported dtype ", dtype_name(t.dtype()));
    if (unpermute_qk_ && name.ends_with("self_attn.q_proj.bias")) t = unpermute(t, cfg_.num_attention_heads);
    if (unpermute_qk_ && name.ends_with("self_attn.k_proj.bias")) t = unpermute(t, cfg_.num_key_value_heads);
    return t.to(DType::F32).contiguous().to(opt_.device);
  }

  Tensor raw(const std::string& name) const override { return fetch(name); }
  size_t total_bytes() const override { return g_->total_bytes(); }

 private:
  Tensor fetch(const std::string& name) const {
    std::string n = gguf_tensor_name(name);
    if (n.empty() || !g_->tensor_info(n))
      fail(ErrorKind::BadFormat, g_->path(), ": no tensor for '", name, "'", n.empty() ? "" : " (looked for '" + n + "')");
    return g_->get(n);
  }

  // Row h*D + 2i + j of the file is row h*D + j*D/2 + i of the original; rows move whole,
  // so block-quantized rows stay intact.
  static Tensor unpermute(const Tensor& t, int64_t heads) {
    const int64_t rows = t.dim(0);
    if (heads <= 0 || rows % (2 * heads) != 0)
      fail(ErrorKind::BadFormat, "gguf: q/k rows ", rows, " do not split into ", heads, " rotary heads");
    const int64_t D = rows / heads, half = D / 2;
    const size_t rb = t.ndim() == 1 ? dtype_bytes(t.dtype(), 1) : dtype_bytes(t.dtype(), t.dim(1));
    Tensor out = Tensor::empty(t.shape(), t.dtype());
    const auto* src = static_cast<const uint8_t*>(t.raw());
    auto* dst = static_cast<uint8_t*>(out.raw());
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < half; ++i)
        for (int64_t j = 0; j < 2; ++j)
          std::memcpy(dst + static_cast<size_t>(h * D + j * half + i) * rb,
                      src + static_cast<size_t>(h * D + 2 * i + j) * rb, rb);
    return out;
  }

  std::shared_ptr<const GgufFile> g_;
  ModelConfig cfg_;
  LoadOptions opt_;
  bool unpermute_qk_ = false;
};

}  // namespace

std::string gguf_tensor_name(const std::string& hf) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  static const std::regex layer(R"(model\.layers\.(\d+)\.(.+))");
  std::smatch m;
  if (!std::regex_match(hf, m, layer)) return "";
  auto it = layer_names().find(m[2].str());
  if (it == layer_names().end()) return "";
  return "blk." + m[1].str() + "." + it->second;
}

std::string gguf_config_json(const GgufFile& g) {
  const std::string arch = g.get_string("general.architecture").value_or("");
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3")
    fail(ErrorKind::Unsupported, "gguf: architecture '", arch, "' is not supported (llama, qwen2, qwen3)");
  if (g.tensor_info("rope_freqs.weight"))
    fail(ErrorKind::Unsupported, "gguf: per-dimension rope factors (rope_freqs.weight) are not supported");
  const std::string a = arch + ".";
  json c;
  c["model_type"] = arch;
  c["architectures"] = json::array({arch});
  const int64_t hidden = need_int(g, a + "embedding_length");
  const int64_t heads = need_int(g, a + "attention.head_count");
  c["hidden_size"] = hidden;
  c["intermediate_size"] = need_int(g, a + "feed_forward_length");
  c["num_hidden_layers"] = need_int(g, a + "block_count");
  c["num_attention_heads"] = heads;
  c["num_key_value_heads"] = g.get_int(a + "attention.head_count_kv").value_or(heads);
  if (heads <= 0) fail(ErrorKind::BadFormat, "gguf: ", a, "attention.head_count must be positive");
  c["head_dim"] = g.get_int(a + "attention.key_length").value_or(hidden / heads);
  c["max_position_embeddings"] = g.get_int(a + "context_length").value_or(4096);
  c["rms_norm_eps"] = g.get_double(a + "attention.layer_norm_rms_epsilon").value_or(1e-6);
  c["rope_theta"] = g.get_double(a + "rope.freq_base").value_or(10000.0);
  std::string scaling = g.get_string(a + "rope.scaling.type").value_or("none");
  if (scaling == "linear" || scaling == "yarn") {
    json rs = {{"type", scaling}, {"factor", g.get_double(a + "rope.scaling.factor").value_or(1.0)}};
    if (auto o = g.get_int(a + "rope.scaling.original_context_length")) rs["original_max_position_embeddings"] = *o;
    c["rope_scaling"] = rs;
  } else if (scaling != "none") {
    fail(ErrorKind::Unsupported, "gguf: rope scaling '", scaling, "' is not supported");
  }
  int64_t vocab = g.get_int(a + "vocab_size").value_or(0);
  if (vocab == 0) {
    if (const auto* t = g.tensor_info("token_embd.weight")) vocab = t->shape[0];
  }
  c["vocab_size"] = vocab;
  c["tie_word_embeddings"] = g.tensor_info("output.weight") == nullptr;
  c["hidden_act"] = "silu";
  if (auto b = g.get_int("tokenizer.ggml.bos_token_id")) c["bos_token_id"] = *b;
  if (auto e = g.get_int("tokenizer.ggml.eos_token_id")) c["eos_token_id"] = *e;
  if (auto p = g.get_int("tokenizer.ggml.padding_token_id")) c["pad_token_id"] = *p;
  return c.dump(2);
}

ModelConfig gguf_model_config(const GgufFile& g) { return parse_model_config(gguf_config_json(g)); }

std::unique_ptr<WeightSource> open_gguf_source(std::shared_ptr<const GgufFile> file, const ModelConfig& cfg,
                                               const LoadOptions& opt) {
  return std::make_unique<GgufSource>(std::move(file), cfg, opt);
}

bool is_gguf_path(const std::string& path) {
  std::error_code ec;
  return path.ends_with(".gguf") && std::filesystem::is_regular_file(path, ec);
}

std::unique_ptr<Model> load_gguf_model(const std::string& path, const LoadOptions& opt) {
  std::shared_ptr<const GgufFile> g = GgufFile::open(path);
  ModelConfig cfg = gguf_model_config(*g);
  auto src = open_gguf_source(g, cfg, opt);
  return build_model(cfg, *src, opt);
}

}  // namespace ingot
