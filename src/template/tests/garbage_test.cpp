// Randomised garbage for the lexer, parser and evaluator: every input either
// renders or throws ingot::Error; nothing else escapes and nothing crashes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "template/chat_template.h"
#include "util/error.h"

namespace ingot {
namespace {

const std::vector<std::string> kPieces = {
    "{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", "{%+", " ", "\n", "for", "in", "endfor", "if",
    "elif", "else", "endif", "set", "endset", "macro", "endmacro", "call", "endcall", "filter", "endfilter", "raw",
    "endraw", "break", "continue", "namespace(", "ns.x", "=", "==", "(", ")", "[", "]", "{", "}", ",", ":", ".", "|",
    "~", "+", "-", "*", "/", "//", "%", "**", "'", "\"", "\\", "x", "messages", "loop", "loop.index", "m.content",
    "tojson", "trim", "length", "is", "not", "defined", "none", "and", "or", "1", "0", "-1", "1.5", "'a'", "\"b\"",
    "range(", "raise_exception(", "caller()", "items()", "[::-1]", "[1:]", "selectattr(", "map(", "join", "é", "\xff",
};

TEST(TemplateGarbage, NeverCrashesOnlyErrors) {
  std::mt19937 rng(1234);
  auto context = nlohmann::ordered_json::parse(
      R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
          "x": [1, 2, {"a": null}], "add_generation_prompt": true, "tools": null})");
  int rendered = 0, errors = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string src;
    int n = static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) {
      if (rng() % 8 == 0) src += static_cast<char>(rng() % 256);
      else src += kPieces[rng() % kPieces.size()];
    }
    try {
      auto t = ChatTemplate::compile(src);
      std::string out = t->render(context);
      ++rendered;
    } catch (const Error&) {
      ++errors;
    } catch (const std::exception& e) {
      FAIL() << "non-ingot exception " << e.what() << " for template: " << src;
    }
  }
  EXPECT_GT(rendered, 100);
  EXPECT_GT(errors, 100);
}

TEST(TemplateGarbage, MutatedRealTemplatesNeverCrash) {
  const std::string base =
      "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- for tool in tools %}{{- tool | tojson }}{%- endfor %}"
      "{%- endif %}{%- set ns = namespace(last=messages|length - 1) %}{%- for message in messages[::-1] %}"
      "{%- set index = (messages|length - 1) - loop.index0 %}{%- if message.role == 'user' %}"
      "{%- set ns.last = index %}{%- endif %}{%- endfor %}{%- for message in messages %}"
      "{{- '<|im_start|>' + message.role + '\\n' + message.content | trim + '<|im_end|>\\n' }}{%- endfor %}"
      "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
  std::mt19937 rng(99);
  auto context = nlohmann::ordered_json::parse(
      R"({"messages": [{"role": "user", "content": " hi "}], "add_generation_prompt": true,
          "tools": [{"type": "function", "function": {"name": "f"}}]})");
  for (int iter = 0; iter < 5000; ++iter) {
    std::string src = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      size_t pos = rng() % src.size();
      switch (rng() % 3) {
        case 0: src.erase(pos, 1 + rng() % 6); break;
        case 1: src.insert(pos, kPieces[rng() % kPieces.size()]); break;
        default: src[pos] = static_cast<char>(rng() % 128); break;
      }
    }
    try {
      ChatTemplate::compile(src)->render(context);
    } catch (const Error&) {
    } catch (const std::exception& e) {
      FAIL() << "non-ingot exception " << e.what() << " for template: " << src;
    }
  }
}

}  // namespace
}  // namespace ingot
