// GGUF checkpoints as a WeightSource: llama.cpp tensor names (token_embd,
// blk.N.attn_q, ffn_gate, output_norm, ...) answered under their Hugging Face
// names, and a ModelConfig built from the `<arch>.*` metadata.
#pragma once
#include <memory>
#include <string>

#include "io/gguf.h"
#include "models/model.h"

namespace ingot {

// config.json-equivalent text for a GGUF file (llama, qwen2, qwen3).
std::string gguf_config_json(const GgufFile& g);
ModelConfig gguf_model_config(const GgufFile& g);

// The llama.cpp name for a Hugging Face parameter name ("" when none maps).
std::string gguf_tensor_name(const std::string& hf_name);

std::unique_ptr<WeightSource> open_gguf_source(std::shared_ptr<const GgufFile> file, const ModelConfig& cfg,
                                               const LoadOptions& opt);

bool is_gguf_path(const std::string& path);
std::unique_ptr<Model> load_gguf_model(const std::string& path, const LoadOptions& opt);

}  // namespace ingot
