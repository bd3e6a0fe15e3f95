// The tokenizer and chat template stored in GGUF metadata (tokenizer.ggml.*,
// tokenizer.chat_template), rewritten as the Hugging Face files that
// tokenizer/ reads: tokenizer.json and tokenizer_config.json.
#pragma once
#include <string>

#include "io/gguf.h"

namespace ingot {

struct GgufTokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
};

// Supports tokenizer.ggml.model "gpt2" (byte-level BPE; pre-tokenizers gpt2,
// smollm, llama-bpe, qwen2) and "llama" (SentencePiece BPE with byte fallback,
// merges rebuilt from the scores). Throws Unsupported / BadFormat otherwise.
GgufTokenizerFiles gguf_tokenizer_files(const GgufFile& g);

}  // namespace ingot
