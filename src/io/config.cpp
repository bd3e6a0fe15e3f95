#include "io/config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/strings.h"

namespace ingot {

using nlohmann::json;

namespace {

double num(const json& j, const char* key, double dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_number()) fail(ErrorKind::BadFormat, "config: '", key, "' is not a number");
  return it->get<double>();
}

std::vector<int32_t> id_list(const json& j, const char* key) {
  std::vector<int32_t> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  if (it->is_number_integer()) {
    out.push_back(it->get<int32_t>());
  } else if (it->is_array()) {
    for (const json& v : *it)
      if (v.is_number_integer()) out.push_back(v.get<int32_t>());
  }
  return out;
}

RopeParams parse_rope_block(const json& r, double theta_default, double partial_default) {
  RopeParams p;
  p.theta = num(r, "rope_theta", theta_default);
  p.partial_rotary_factor = num(r, "partial_rotary_factor", partial_default);
  std::string type = "default";
  if (r.contains("rope_type") && r["rope_type"].is_string()) type = r["rope_type"].get<std::string>();
  else if (r.contains("type") && r["type"].is_string()) type = r["type"].get<std::string>();
  p.type = type;
  p.factor = num(r, "factor", 1.0);
  p.low_freq_factor = num(r, "low_freq_factor", 1.0);
  p.high_freq_factor = num(r, "high_freq_factor", 4.0);
  p.original_max_position = num(r, "original_max_position_embeddings", 0);
  p.beta_fast = num(r, "beta_fast", 32.0);
  p.beta_slow = num(r, "beta_slow", 1.0);
  p.mscale = num(r, "mscale", 0);
  p.mscale_all_dim = num(r, "mscale_all_dim", 0);
  p.attention_factor = num(r, "attention_factor", 0);
  static const char* known[] = {"default", "linear", "llama3", "yarn", "proportional"};
  bool ok = false;
  for (const char* k : known) ok |= type == k;
  if (!ok) fail(ErrorKind::Unsupported, "config: rope type '", type, "' is not supported");
  return p;
}

}  // namespace

const RopeParams& ModelConfig::rope_for(const std::string& layer_type) const {
  auto it = rope.find(layer_type);
  if (it != rope.end()) return it->second;
  it = rope.find("default");
  if (it != rope.end()) return it->second;
  INGOT_CHECK(!rope.empty(), "config has no rope parameters");
  return rope.begin()->second;
}

double ModelConfig::get_double(const std::string& key, double dflt) const { return num(*raw, key.c_str(), dflt); }
int64_t ModelConfig::get_int(const std::string& key, int64_t dflt) const {
  auto it = raw->find(key);
  if (it == raw->end() || it->is_null()) return dflt;
  if (!it->is_number_integer()) fail(ErrorKind::BadFormat, "config: '", key, "' is not an integer");
  return it->get<int64_t>();
}
bool ModelConfig::get_bool(const std::string& key, bool dflt) const {
  auto it = raw->find(key);
  if (it == raw->end() || it->is_null()) return dflt;
  if (!it->is_boolean()) fail(ErrorKind::BadFormat, "config: '", key, "' is not a boolean");
  return it->get<bool>();
}
std::string ModelConfig::get_string(const std::string& key, const std::string& dflt) const {
  auto it = raw->find(key);
  if (it == raw->end() || !it->is_string()) return dflt;
  return it->get<std::string>();
}
bool ModelConfig::has(const std::string& key) const {
  auto it = raw->find(key);
  return it != raw->end() && !it->is_null();
}

ModelConfig parse_model_config(const std::string& text) {
  json top;
  try {
    top = json::parse(text);
  } catch (const std::exception& e) {
    fail(ErrorKind::BadFormat, "config.json is not valid JSON: ", e.what());
  }
  if (!top.is_object()) fail(ErrorKind::BadFormat, "config.json is not a JSON object");
  // Multimodal wrappers keep the language model under text_config.
  json j = top;
  if (top.contains("text_config") && top["text_config"].is_object()) {
    j = top["text_config"];
    for (const char* k : {"tie_word_embeddings", "eos_token_id", "bos_token_id"})
      if (!j.contains(k) && top.contains(k)) j[k] = top[k];
  }
  ModelConfig c;
  c.raw = std::make_shared<const json>(j);
  try {
    c.model_type = j.value("model_type", std::string());
    if (j.contains("architectures") && j["architectures"].is_array())
      for (const json& a : j["architectures"])
        if (a.is_string()) c.architectures.push_back(a.get<std::string>());
    c.vocab_size = c.get_int("vocab_size", 0);
    c.hidden_size = c.get_int("hidden_size", 0);
    c.intermediate_size = c.get_int("intermediate_size", 0);
    c.num_hidden_layers = c.get_int("num_hidden_layers", 0);
    c.num_attention_heads = c.get_int("num_attention_heads", 0);
    c.num_key_value_heads = c.get_int("num_key_value_heads", c.num_attention_heads);
    c.head_dim = c.get_int("head_dim", c.num_attention_heads ? c.hidden_size / c.num_attention_heads : 0);
    c.max_position_embeddings = c.get_int("max_position_embeddings", 0);
    c.rms_norm_eps = c.get_double("rms_norm_eps", c.get_double("layer_norm_eps", 1e-6));
    c.tie_word_embeddings = c.get_bool("tie_word_embeddings", false);
    c.attention_bias = c.get_bool("attention_bias", false);
    c.mlp_bias = c.get_bool("mlp_bias", false);
    c.hidden_act = c.get_string("hidden_act", c.get_string("hidden_activation", "silu"));
    std::string dt = c.get_string("dtype", c.get_string("torch_dtype", ""));
    if (!dt.empty()) c.dtype = parse_dtype(dt);
    c.sliding_window = c.get_int("sliding_window", 0);
    if (j.contains("layer_types") && j["layer_types"].is_array())
      for (const json& t : j["layer_types"])
        if (t.is_string()) c.layer_types.push_back(t.get<std::string>());
    c.eos_token_ids = id_list(j, "eos_token_id");
    auto bos = id_list(j, "bos_token_id");
    if (!bos.empty()) c.bos_token_id = bos[0];
    auto pad = id_list(j, "pad_token_id");
    if (!pad.empty()) c.pad_token_id = pad[0];

    double theta = c.get_double("rope_theta", 10000.0);
    double partial = c.get_double("partial_rotary_factor", 1.0);
    auto rp = j.find("rope_parameters");
    if (rp != j.end() && rp->is_object()) {
      bool nested = !rp->empty() && rp->begin()->is_object();
      if (nested) {
        for (auto it = rp->begin(); it != rp->end(); ++it)
          if (it->is_object()) c.rope[it.key()] = parse_rope_block(*it, theta, partial);
      } else {
        c.rope["default"] = parse_rope_block(*rp, theta, partial);
      }
    } else {
      json block = json::object();
      auto rs = j.find("rope_scaling");
      if (rs != j.end() && rs->is_object()) block = *rs;
      block["rope_theta"] = theta;
      c.rope["default"] = parse_rope_block(block, theta, partial);
      if (j.contains("rope_local_base_freq")) {  // Gemma 3 (older form): sliding layers' base
        json local = json::object();
        local["rope_theta"] = c.get_double("rope_local_base_freq", 10000.0);
        c.rope["sliding_attention"] = parse_rope_block(local, theta, partial);
        c.rope["full_attention"] = c.rope["default"];
      }
    }
  } catch (const json::exception& e) {
    fail(ErrorKind::BadFormat, "config.json: ", e.what());
  }
  if (c.model_type.empty()) fail(ErrorKind::BadFormat, "config.json has no model_type");
  return c;
}

ModelConfig load_model_config(const std::string& dir) {
  std::string path = (std::filesystem::path(dir) / "config.json").string();
  if (!is_directory(dir)) fail(ErrorKind::NotFound, "model directory not found: ", dir);
  if (!file_exists(path)) fail(ErrorKind::NotFound, "no config.json in ", dir);
  try {
    return parse_model_config(read_text_file(path));
  } catch (const Error& e) {
    fail(e.kind(), path, ": ", e.what());
  }
}

GenerationConfig parse_generation_config(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    fail(ErrorKind::BadFormat, "generation_config.json is not valid JSON: ", e.what());
  }
  GenerationConfig g;
  if (!j.is_object()) return g;
  g.eos_token_ids = id_list(j, "eos_token_id");
  auto bos = id_list(j, "bos_token_id");
  if (!bos.empty()) g.bos_token_id = bos[0];
  auto opt = [&](const char* k) -> std::optional<double> {
    auto it = j.find(k);
    if (it != j.end() && it->is_number()) return it->get<double>();
    return std::nullopt;
  };
  g.temperature = opt("temperature");
  g.top_p = opt("top_p");
  g.min_p = opt("min_p");
  g.repetition_penalty = opt("repetition_penalty");
  if (auto v = opt("top_k")) g.top_k = static_cast<int64_t>(*v);
  if (auto v = opt("max_new_tokens")) g.max_new_tokens = static_cast<int64_t>(*v);
  if (j.contains("do_sample") && j["do_sample"].is_boolean()) g.do_sample = j["do_sample"].get<bool>();
  return g;
}

GenerationConfig load_generation_config(const std::string& dir, const ModelConfig& cfg) {
  std::string path = (std::filesystem::path(dir) / "generation_config.json").string();
  GenerationConfig g;
  if (file_exists(path)) g = parse_generation_config(read_text_file(path));
  if (g.eos_token_ids.empty()) g.eos_token_ids = cfg.eos_token_ids;
  if (g.bos_token_id < 0) g.bos_token_id = cfg.bos_token_id;
  return g;
}

}  // namespace ingot
