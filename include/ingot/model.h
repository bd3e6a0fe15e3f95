// Loading a model for a program that embeds ingot: the weights (a Hugging Face
// folder, a GGUF file, or a model name `ingot ls` knows), its tokenizer and
// chat template, and a running engine (ingot/engine.h) to submit requests to.
// Link the `ingot::ingot` CMake target (find_package(ingot)); examples/ shows
// a whole program. Failures throw std::runtime_error with a one-line message.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ingot/engine.h"

namespace ingot {

struct ModelOptions {
  std::string device = "auto";  // auto (CUDA when usable and the weights fit, else the CPU) | cpu | cuda
  std::string dtype = "auto";   // auto | float32 | bfloat16 | float16 (dense weights)
  std::string kv = "paged";     // paged | kv8 | kv4 | contiguous
  int threads = 0;              // CPU threads; 0: every core
  std::string chat_template;    // a template file or its text; empty: the model's own
  // auto: prompt-lookup drafts on the CPU, none elsewhere | ngram | off
  std::string speculative = "auto";
  // Scheduling, memory budget and prefix cache; `kv` and `speculative`
  // above take precedence over the fields of the same meaning here.
  engine::EngineOptions engine;
};

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

class LoadedModel {
 public:
  virtual ~LoadedModel() = default;
  // The engine the model runs in: submit(), stats(), shutdown().
  virtual engine::Engine& engine() = 0;
  // Token ids of `text` (no chat formatting); add_special_tokens adds the
  // tokenizer's BOS where it has one.
  virtual std::vector<int32_t> encode(const std::string& text, bool add_special_tokens = false) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = true) const = 0;
  // The chat template's prompt for `messages`, ready for the assistant's
  // reply, as token ids. Throws when the model has no chat template.
  virtual std::vector<int32_t> chat_prompt(const std::vector<ChatMessage>& messages) const = 0;
  // End-of-sequence ids the engine stops at (generation config and tokenizer).
  virtual const std::vector<int32_t>& eos_token_ids() const = 0;
  virtual int64_t context_length() const = 0;  // tokens
  virtual const std::string& path() const = 0;  // the resolved model path
};

std::unique_ptr<LoadedModel> load_model(const std::string& model, const ModelOptions& options = {});

// The library's version, "MAJOR.MINOR.PATCH".
const char* version();

}  // namespace ingot
