// POST /v1/embeddings support: how the served model pools its hidden states.
#pragma once
#include <string>

namespace ingot::server {

// The pooling of a model directory: sentence-transformers' 1_Pooling/config.json
// when present ("last", "mean", or the unsupported mode's name, e.g. "cls"),
// otherwise "last" (decoder embedding models such as Qwen3-Embedding).
std::string detect_pooling(const std::string& model_path);

}  // namespace ingot::server
