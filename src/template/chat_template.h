// Chat templates: a Jinja2 interpreter sufficient for real Hugging Face
// chat templates, rendering byte-identically to transformers'
// apply_chat_template (trim_blocks, lstrip_blocks, raise_exception, tojson,
// strftime_now).
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace ingot {

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;
  // Parses the template; a syntax error throws Error(BadFormat) with the line.
  static std::unique_ptr<ChatTemplate> compile(const std::string& source);
  // Renders with `context` as the template's variables (messages, tools,
  // add_generation_prompt, bos_token, ...). raise_exception() in the
  // template throws Error(InvalidArgument) carrying its message.
  virtual std::string render(const nlohmann::json& context) const = 0;
  // The same with key order kept: tojson of tool schemas prints keys in the
  // order the request gave them, as Python's dicts do. Prefer this overload
  // for request data (nlohmann::json sorts object keys).
  virtual std::string render(const nlohmann::ordered_json& context) const = 0;
};

}  // namespace ingot
