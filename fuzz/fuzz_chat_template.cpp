// Chat templates: arbitrary bytes as the template source, compiled and
// rendered with a fixed chat context (messages with tool calls, tools,
// special tokens, add_generation_prompt).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "template/chat_template.h"
#include "util/error.h"

namespace {

const nlohmann::json& context() {
  static const nlohmann::json ctx = nlohmann::json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "What is 2+2? <b>&</b>"},
      {"role": "assistant", "content": "",
       "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
      {"role": "tool", "content": "4", "tool_call_id": "c1"},
      {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "add", "description": "adds",
               "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}],
    "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true, "enable_thinking": false
  })");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string src(reinterpret_cast<const char*>(data), size);
  try {
    auto t = ingot::ChatTemplate::compile(src);
    t->render(context());
  } catch (const ingot::Error&) {
  }
  return 0;
}
