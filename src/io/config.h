// Hugging Face config.json / generation_config.json, normalised: both the
// transformers-5 `rope_parameters` form (optionally keyed by layer type) and
// the older `rope_theta` + `rope_scaling` form give the same RopeParams.
#pragma once
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ops/rope.h"
#include "tensor/dtype.h"

namespace ingot {

struct ModelConfig {
  std::string model_type;
  std::vector<std::string> architectures;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  bool mlp_bias = false;
  std::string hidden_act = "silu";
  std::optional<DType> dtype;  // "dtype" / "torch_dtype"
  // Rope per layer type ("default" when the config has one set).
  std::map<std::string, RopeParams> rope;
  std::vector<std::string> layer_types;  // empty: all full attention
  int64_t sliding_window = 0;
  std::vector<int32_t> eos_token_ids;
  int32_t bos_token_id = -1;
  int32_t pad_token_id = -1;
  // The whole JSON, for family-specific fields.
  std::shared_ptr<const nlohmann::json> raw;

  const RopeParams& rope_for(const std::string& layer_type) const;

  // Typed lookups into raw (defaults when absent or null).
  double get_double(const std::string& key, double dflt) const;
  int64_t get_int(const std::string& key, int64_t dflt) const;
  bool get_bool(const std::string& key, bool dflt) const;
  std::string get_string(const std::string& key, const std::string& dflt) const;
  bool has(const std::string& key) const;
};

struct GenerationConfig {
  std::vector<int32_t> eos_token_ids;
  int32_t bos_token_id = -1;
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k, max_new_tokens;
  bool do_sample = false;
};

// Parses config.json text. Throws BadFormat / InvalidArgument with the key.
ModelConfig parse_model_config(const std::string& json_text);
ModelConfig load_model_config(const std::string& dir);
GenerationConfig parse_generation_config(const std::string& json_text);
// generation_config.json if present, else the EOS/BOS ids of `cfg`.
GenerationConfig load_generation_config(const std::string& dir, const ModelConfig& cfg);

}  // namespace ingot
