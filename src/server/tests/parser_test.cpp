// Tool-call and reasoning parsing, whole and split at every byte.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/output_parser.h"

namespace ingot::server {
namespace {

using json = nlohmann::json;

// Feeds `text` in pieces of `step` bytes (0: one piece) and merges the deltas;
// also checks that no delta's content contains a fragment of markup.
ParsedDelta run(ToolFormat f, bool think, const std::string& text, size_t step, bool opens = false,
                bool check_leaks = true) {
  OutputParser p(f, think, opens);
  ParsedDelta all;
  if (step == 0) step = text.size();
  for (size_t i = 0; i < text.size(); i += step) {
    ParsedDelta d = p.push(text.substr(i, step));
    if (check_leaks) {
      for (const char* frag : {"<tool_call", "</tool_call", "[TOOL_CALLS", "<think", "</think", "<|python_tag"}) {
        EXPECT_EQ(d.content.find(frag), std::string::npos) << "markup leaked: " << d.content;
      }
    }
    all.append(std::move(d));
  }
  all.append(p.finish());
  return all;
}

json args(const ToolCall& c) { return json::parse(c.arguments); }

TEST(OutputParser, PlainTextPassesThroughUnchanged) {
  for (size_t step : {0, 1, 3}) {
    ParsedDelta d = run(ToolFormat::Hermes, true, "Hello <b>world</b> a < b", step);
    EXPECT_EQ(d.content, "Hello <b>world</b> a < b");
    EXPECT_TRUE(d.reasoning.empty());
    EXPECT_TRUE(d.tool_calls.empty());
  }
}

TEST(OutputParser, HermesToolCallsAtEverySplit) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  for (size_t step = 0; step <= 7; ++step) {
    ParsedDelta d = run(ToolFormat::Hermes, false, text, step);
    EXPECT_EQ(d.content, "Let me check.\n") << step;
    ASSERT_EQ(d.tool_calls.size(), 2u) << step;
    EXPECT_EQ(d.tool_calls[0].name, "get_weather");
    EXPECT_EQ(args(d.tool_calls[0])["city"], "Paris");
    EXPECT_EQ(d.tool_calls[1].name, "get_time");
    EXPECT_EQ(args(d.tool_calls[1]), json::object());
    EXPECT_EQ(d.tool_calls[0].id.rfind("call_", 0), 0u);
    EXPECT_NE(d.tool_calls[0].id, d.tool_calls[1].id);
  }
}

TEST(OutputParser, HermesUnclosedCallAtEndStillParses) {
  ParsedDelta d = run(ToolFormat::Hermes, false, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}", 2);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(args(d.tool_calls[0])["x"], 1);
  EXPECT_EQ(d.content, "");
}

TEST(OutputParser, MalformedHermesCallBecomesContent) {
  ParsedDelta d = run(ToolFormat::Hermes, false, "<tool_call>{not json}</tool_call>", 0, false, false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "<tool_call>{not json}</tool_call>");
}

TEST(OutputParser, ToolsOffLeavesMarkupAsContent) {
  ParsedDelta d = run(ToolFormat::None, false, "<tool_call>{\"name\": \"f\"}</tool_call>", 0, false, false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "<tool_call>{\"name\": \"f\"}</tool_call>");
}

TEST(OutputParser, ThinkingBecomesReasoningAtEverySplit) {
  const std::string text = "<think>\nThe user greets me.\n</think>\n\nHello!";
  for (size_t step = 0; step <= 5; ++step) {
    ParsedDelta d = run(ToolFormat::Hermes, true, text, step);
    EXPECT_EQ(d.reasoning, "\nThe user greets me.\n") << step;
    EXPECT_EQ(d.content, "\n\nHello!") << step;
  }
}

TEST(OutputParser, PromptOpenedThinking) {
  ParsedDelta d = run(ToolFormat::None, true, "step one</think>answer", 1, /*opens=*/true);
  EXPECT_EQ(d.reasoning, "step one");
  EXPECT_EQ(d.content, "answer");
}

TEST(OutputParser, ThinkingThenToolCall) {
  const std::string text = "<think>need weather</think>\n<tool_call>\n{\"name\":\"w\",\"arguments\":{\"c\":\"X\"}}\n</tool_call>";
  for (size_t step : {0, 1, 4}) {
    ParsedDelta d = run(ToolFormat::Hermes, true, text, step);
    EXPECT_EQ(d.reasoning, "need weather");
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0].name, "w");
    EXPECT_EQ(d.content, "\n");
  }
}

TEST(OutputParser, UnterminatedThinkingIsReasoning) {
  ParsedDelta d = run(ToolFormat::None, true, "<think>still going", 3);
  EXPECT_EQ(d.reasoning, "still going");
  EXPECT_EQ(d.content, "");
}

TEST(OutputParser, Llama3JsonCall) {
  const std::string text = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
  for (size_t step : {0, 1, 5}) {
    ParsedDelta d = run(ToolFormat::Llama3Json, false, text, step);
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0].name, "get_weather");
    EXPECT_EQ(args(d.tool_calls[0])["city"], "Oslo");
    EXPECT_EQ(d.content, "");
  }
  ParsedDelta tagged = run(ToolFormat::Llama3Json, false, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", 2);
  ASSERT_EQ(tagged.tool_calls.size(), 1u);
  ParsedDelta two = run(ToolFormat::Llama3Json, false, "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {}}", 3);
  ASSERT_EQ(two.tool_calls.size(), 2u);
  EXPECT_EQ(two.tool_calls[1].name, "b");
}

TEST(OutputParser, Llama3JsonWithoutNameIsContent) {
  ParsedDelta d = run(ToolFormat::Llama3Json, false, "{\"answer\": 42}", 1);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "{\"answer\": 42}");
  ParsedDelta text = run(ToolFormat::Llama3Json, false, "The answer is 42.", 1);
  EXPECT_EQ(text.content, "The answer is 42.");
}

TEST(OutputParser, MistralFormats) {
  for (size_t step : {0, 1, 6}) {
    ParsedDelta v3 = run(ToolFormat::Mistral, false,
                         "[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]", step);
    ASSERT_EQ(v3.tool_calls.size(), 1u);
    EXPECT_EQ(v3.tool_calls[0].name, "add");
    EXPECT_EQ(args(v3.tool_calls[0])["b"], 2);
    EXPECT_EQ(v3.content, "");
    ParsedDelta bare = run(ToolFormat::Mistral, false, "[{\"name\": \"add\", \"arguments\": {\"a\": 1}}]", step);
    ASSERT_EQ(bare.tool_calls.size(), 1u);  // the marker was a skipped special token
    EXPECT_EQ(bare.content, "");
    ParsedDelta v11 = run(ToolFormat::Mistral, false, "Sure.[TOOL_CALLS]add[ARGS]{\"a\": 3}[TOOL_CALLS]neg[ARGS]{\"x\": 1}", step);
    ASSERT_EQ(v11.tool_calls.size(), 2u);
    EXPECT_EQ(v11.content, "Sure.");
    EXPECT_EQ(v11.tool_calls[1].name, "neg");
  }
}

TEST(OutputParser, GemmaFormats) {
  ParsedDelta fenced = run(ToolFormat::Gemma, false, "```tool_code\nget_weather(city=\"Rome\", days=3)\n```", 2);
  ASSERT_EQ(fenced.tool_calls.size(), 1u);
  EXPECT_EQ(fenced.tool_calls[0].name, "get_weather");
  EXPECT_EQ(args(fenced.tool_calls[0])["city"], "Rome");
  EXPECT_EQ(args(fenced.tool_calls[0])["days"], 3);
  ParsedDelta js = run(ToolFormat::Gemma, false, "{\"name\": \"f\", \"parameters\": {\"on\": true}}", 1);
  ASSERT_EQ(js.tool_calls.size(), 1u);
  EXPECT_EQ(args(js.tool_calls[0])["on"], true);
  ParsedDelta prose = run(ToolFormat::Gemma, false, "Just text.", 1);
  EXPECT_EQ(prose.content, "Just text.");
}

TEST(OutputParser, DetectsFormatFromTemplate) {
  EXPECT_EQ(detect_tool_format("...<tool_call>\\n{{ tool_call | tojson }}..."), ToolFormat::Hermes);
  EXPECT_EQ(detect_tool_format("{{ '[TOOL_CALLS]' }}"), ToolFormat::Mistral);
  EXPECT_EQ(detect_tool_format("<|start_header_id|>ipython<|end_header_id|>"), ToolFormat::Llama3Json);
  EXPECT_EQ(detect_tool_format("<start_of_turn>user"), ToolFormat::Gemma);
  EXPECT_EQ(detect_tool_format("{{ messages }}"), ToolFormat::None);
}

}  // namespace
}  // namespace ingot::server
