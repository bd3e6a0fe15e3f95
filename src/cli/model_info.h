// What `ingot ls` and `ingot fit` read from a checkpoint without loading its
// weights: a safetensors directory or a GGUF file.
#pragma once
#include <string>

#include "engine/memory.h"

namespace ingot::cli {

struct ModelSummary {
  std::string architecture;  // "LlamaForCausalLM", or the GGUF general.architecture
  std::string quantization;  // the storage type holding most weight bytes ("bf16", "q4_k", ...)
  int64_t parameters = 0;
  int64_t context_length = 0;
};
ModelSummary summarize_model(const std::string& path);

// engine::predict_memory for either format (GGUF: K/V in bfloat16, as the decoder keeps them).
engine::MemoryPrediction predict_model_memory(const std::string& path, const engine::FitQuery& q);

}  // namespace ingot::cli
