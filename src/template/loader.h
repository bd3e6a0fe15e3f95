// Finding a model's chat template and special tokens on disk, the way
// transformers does: chat_template.jinja, else tokenizer_config.json's
// "chat_template" (a string, or a list of {name, template}), else
// chat_template.json. Needs only the tokenizer files of a model directory.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace ingot {

struct ChatTemplateFiles {
  std::string default_template;  // "" when the model has none by that name
  std::vector<std::pair<std::string, std::string>> named_templates;  // name -> source
  // bos_token, eos_token, unk_token, pad_token, ... as strings (AddedToken
  // objects reduced to their content), plus additional_special_tokens.
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();
};

// Throws Error(NotFound) when `dir` is missing, Error(BadFormat) naming the
// file for malformed JSON.
ChatTemplateFiles load_chat_template_files(const std::string& dir);
// The same from tokenizer_config.json text alone (a GGUF file's metadata
// rewritten as that file); `where` names the source in errors.
ChatTemplateFiles chat_template_files_from_config(const std::string& tokenizer_config_json, const std::string& where);

// The template transformers would pick: `name` if given, else "tool_use"
// when tools are passed and the model has one, else "default". Throws
// Error(NotFound) saying the model has no chat template.
std::string select_chat_template(const ChatTemplateFiles& files, const std::string& name, bool has_tools,
                                 const std::string& dir);

// transformers' apply_chat_template variables: the special tokens, tools and
// documents (None unless given), add_generation_prompt (false unless given),
// then every field of `request` (messages, tools, enable_thinking, ...).
nlohmann::ordered_json chat_template_context(const ChatTemplateFiles& files, const nlohmann::ordered_json& request);

}  // namespace ingot
