// Structured-output mask cost: vocabulary trie build time and ms per step of
// the token mask in typical JSON states, on a real tokenizer.
// Usage: grammar_bench TOKENIZER_DIR [reps]
#include <chrono>
#include <cstdio>
#include <string>

#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

using namespace ingot::grammar;
using Clock = std::chrono::steady_clock;

static double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: grammar_bench TOKENIZER_DIR [reps]\n");
    return 2;
  }
  const int reps = argc > 2 ? std::stoi(argv[2]) : 20;
  auto tok = ingot::Tokenizer::from_dir(argv[1]);
  auto t0 = Clock::now();
  auto vocab = std::make_shared<const Vocabulary>(token_bytes(*tok));
  std::printf("vocabulary: %lld tokens, %zu trie nodes, built in %.1f ms\n", static_cast<long long>(vocab->size()),
              vocab->all.byte_.size(), ms_since(t0));
  nlohmann::json person = {{"type", "object"},
                           {"properties",
                            {{"name", {{"type", "string"}}},
                             {"age", {{"type", "integer"}}},
                             {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
                           {"required", {"name", "age", "tags"}},
                           {"additionalProperties", false}};
  struct Case {
    const char* label;
    nlohmann::json schema;  // null: json_object
    std::string prefix;
    int64_t tokens_left;
  };
  Case cases[] = {{"json_object, start", nullptr, "", 0},
                  {"json_object, inside a string", nullptr, "{\"text\": \"Hello wor", 0},
                  {"json_object, after a value", nullptr, "{\"a\": 1", 0},
                  {"schema, key position", person, "{", 0},
                  {"schema, inside a string", person, "{\"name\":\"Al", 0},
                  {"schema, inside a string, near the token budget", person, "{\"name\":\"Al", 100},
                  {"schema, in a number", person, "{\"name\":\"Al\",\"age\":4", 0}};
  for (const auto& c : cases) {
    auto schema = std::make_shared<Schema>(c.schema.is_null() ? any_object_schema() : compile_schema(c.schema));
    JsonConstraint jc(std::make_shared<JsonAutomaton>(schema), vocab);
    // Feed the prefix byte by byte through single-byte tokens.
    for (char ch : c.prefix)
      for (int32_t id = 0; id < vocab->size(); ++id)
        if (vocab->bytes(id) == std::string(1, ch)) {
          jc.accept(id);
          break;
        }
    size_t allowed = 0;
    auto t = Clock::now();
    for (int r = 0; r < reps; ++r) {
      const auto& ok = jc.allowed(c.tokens_left);
      allowed = 0;
      for (uint8_t x : ok) allowed += x;
    }
    std::printf("%-50s %8.2f ms/step  (%zu tokens allowed)\n", c.label, ms_since(t) / reps, allowed);
  }
  return 0;
}
