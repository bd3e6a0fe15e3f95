// From --model to what the text verbs (serve, generate, run, tokenize,
// chat-template) work with: the tokenizer and chat template from wherever the
// model keeps them (tokenizer files beside the weights, or a GGUF file's
// metadata), the weights, the end-of-sequence ids and a running engine.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/verbs.h"
#include "ingot/engine.h"
#include "io/config.h"
#include "models/model.h"
#include "template/chat_template.h"
#include "template/loader.h"
#include "tokenizer/tokenizer.h"

namespace ingot::cli {

// A GGUF file, or a folder that holds tokenizer.json.
bool has_tokenizer(const std::string& model_path);
// The tokenizer of a model or tokenizer folder, or of a GGUF file. Throws the
// loader's error (naming tokenizer.json) when there is none.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_path);
// Chat templates and special tokens: tokenizer_config.json / chat_template.jinja
// of a folder, or the GGUF file's metadata.
ChatTemplateFiles load_template_files(const std::string& model_path);

// --speculative, --num-speculative-tokens and --draft-model, shared by the text verbs.
struct SpeculationFlags {
  // auto: draft with --draft-model, else ngram where greedy equality is
  // tested (the CPU), else off | ngram | draft | off
  std::string mode = "auto";
  int tokens = 0;  // draft tokens per step; 0: adaptive
  std::string draft_model;
};
void add_speculation_flags(CLI::App* sub, SpeculationFlags& f);

struct TextModelOptions {
  // false: a folder without tokenizer files loads too (token ids in and out).
  bool tokenizer_required = true;
  // A template file or the template text, used instead of the model's own.
  std::string chat_template;
  // The verb's engine settings; kv comes from the model flags, and the device
  // memory from the device the model loads on.
  engine::EngineOptions engine;
  // Sets engine.speculative and engine.num_speculative_tokens once the model
  // is loaded (auto depends on its device).
  SpeculationFlags speculation;
  // When engine.context_length is 0: at most this many tokens of the model's
  // context (0: all of it).
  int64_t context_cap = 0;
};

struct TextModel {
  std::string path;  // the resolved --model
  std::unique_ptr<Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;  // null only when not required and absent
  ChatTemplateFiles templates;
  std::string template_source;                        // "" when the model has no default template
  std::shared_ptr<const ChatTemplate> chat_template;  // compiled template_source; null when none
  GenerationConfig generation;
  std::vector<int32_t> eos;  // generation config's end ids plus the tokenizer's eos token
  int64_t context_length = 0;  // the engine's, in tokens
  std::unique_ptr<Model> draft_model;  // --draft-model (declared first: outlives the engine)
  std::unique_ptr<engine::Engine> engine;

  // The chat template's prompt for `messages`, ready for the assistant's
  // reply (transformers' apply_chat_template variables). Throws NotFound when
  // the model has no chat template.
  std::string render_chat(const nlohmann::ordered_json& messages) const;
  // The rendered prompt's ids (a rendered template holds its special tokens).
  std::vector<int32_t> encode_chat(const nlohmann::ordered_json& messages) const;
};

// Loads the tokenizer side while the weights map, then starts the engine.
TextModel load_text_model(const ModelFlags& flags, const TextModelOptions& options);

// Throws when a finished chunk carries an engine error.
void check_chunk(const engine::Chunk& chunk);

}  // namespace ingot::cli
