// Turning ModelFlags into a loaded model (shared by logits, generate, serve).
#pragma once
#include <memory>

#include "cli/verbs.h"
#include "models/model.h"

namespace ingot::cli {

// A path as is; a cached repo id or a unique part of a local model name -> its path.
std::string resolve_model_arg(const std::string& arg);

// The device --device names; for "auto" (the default) CUDA when a usable GPU
// is present and the weights fit in it, else the CPU. `why` says which rule
// chose it, for start-up lines.
struct DeviceChoice {
  Device device = Device::CPU;
  std::string why;
};
DeviceChoice resolve_device(const ModelFlags& f);
LoadOptions load_options(const ModelFlags& f);
std::unique_ptr<Model> load_model_from_flags(const ModelFlags& f);
CacheOptions cache_options(const ModelFlags& f);
// Detokenizer for a model directory's tokenizer; without tokenizer files,
// ids print as numbers.
std::function<std::string(const std::vector<int32_t>&)> text_decoder_for(const std::string& dir);

// Throws InvalidArgument naming the first id outside [0, vocab).
void check_token_ids(const std::vector<int32_t>& ids, int64_t vocab);

}  // namespace ingot::cli
