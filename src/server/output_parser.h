// Splits streamed model text into content, reasoning (<think>...</think>) and
// tool calls for the tool-call formats of the families we serve. Text that
// might still turn into markup is held back, so a partial tag never reaches a
// client as content.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ingot::server {

enum class ToolFormat { None, Hermes, Llama3Json, Mistral, Gemma };

// From the chat template source (the markup it teaches the model).
ToolFormat detect_tool_format(std::string_view chat_template);
const char* tool_format_name(ToolFormat f);

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object, serialised
};

struct ParsedDelta {
  std::string content, reasoning;
  std::vector<ToolCall> tool_calls;
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
  void append(ParsedDelta&& o);
};

class OutputParser {
 public:
  // tools: the format to parse (None: all text is content). reasoning: parse
  // <think> blocks; start_in_reasoning: the prompt already opened one.
  OutputParser(ToolFormat tools, bool reasoning, bool start_in_reasoning = false);
  ParsedDelta push(std::string_view text);
  ParsedDelta finish();

 private:
  enum class State { Start, Reasoning, Content, ToolBlock, ToolTail };
  void step(ParsedDelta& out, bool final);
  bool start_state(ParsedDelta& out, bool final);
  void emit_content(ParsedDelta& out, std::string text);
  void parse_tail(ParsedDelta& out);

  ToolFormat tools_;
  bool reasoning_;
  bool reasoning_done_ = false;
  bool after_tool_ = false;
  State state_ = State::Start;
  std::string pending_;
  int call_count_ = 0;
};

// Parsers of complete tool-call text, exposed for tests. Each returns false
// (and leaves `calls` untouched) when the text is not a well-formed call.
bool parse_hermes_call(std::string_view body, std::vector<ToolCall>& calls);
bool parse_llama3_calls(std::string_view text, std::vector<ToolCall>& calls);
bool parse_mistral_calls(std::string_view text, std::vector<ToolCall>& calls);
bool parse_gemma_calls(std::string_view text, std::vector<ToolCall>& calls);
std::string new_tool_call_id();

}  // namespace ingot::server
