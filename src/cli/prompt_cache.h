// Where `ingot serve` keeps its prompt cache on disk and what identifies a
// model's snapshots there (docs/kv-cache.md, "Prompt cache on disk").
#pragma once
#include <string>

namespace ingot::cli {

// $XDG_CACHE_HOME/ingot/prompt-cache, else ~/.cache/ingot/prompt-cache.
std::string default_prompt_cache_dir();

// A fingerprint of a model's weights (a GGUF file or a checkpoint folder):
// each weight file's name and size and a hash of its first 4 MiB (the GGUF
// header, a safetensors index) plus 64 KiB samples spread over the rest.
// Reads a few MiB, so it is quick for any model size.
std::string weights_fingerprint(const std::string& model_path);

// A fingerprint of the tokenizer files beside the weights (a GGUF file keeps
// them in the header the weights' fingerprint covers) and the chat template.
std::string tokenizer_fingerprint(const std::string& model_path, const std::string& chat_template);

}  // namespace ingot::cli
