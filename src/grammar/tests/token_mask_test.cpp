#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

using namespace ingot::grammar;
using nlohmann::json;

namespace {

std::shared_ptr<const Vocabulary> qwen3_vocabulary() {
  static auto v = [] {
    auto tok = ingot::Tokenizer::from_dir(std::string(INGOT_SHARED_DIR) + "/assets/tokenizers/qwen3");
    return std::make_shared<const Vocabulary>(token_bytes(*tok));
  }();
  return v;
}

// Samples from uniformly random logits under the constraint until complete.
std::string random_walk(const JsonGrammar& g, const Vocabulary& v, uint64_t seed, int64_t max_tokens) {
  auto c = g.start();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> logits(static_cast<size_t>(v.size()));
  auto* jc = static_cast<JsonConstraint*>(c.get());
  for (int64_t left = max_tokens; left > 0; --left) {
    if (c->complete() && u(rng) < 0.2f) break;
    for (auto& x : logits) x = u(rng);
    c->apply(logits.data(), v.size(), left);
    int32_t best = -1;
    for (size_t i = 0; i < logits.size(); ++i)
      if (std::isfinite(logits[i]) && (best < 0 || logits[i] > logits[static_cast<size_t>(best)])) best = static_cast<int32_t>(i);
    if (best < 0) break;
    EXPECT_TRUE(c->accept(best));
  }
  EXPECT_TRUE(c->complete()) << jc->text();
  return jc->text();
}

}  // namespace

TEST(Vocabulary, ByteLevelTokensMapBackToBytes) {
  auto tok = ingot::Tokenizer::from_dir(std::string(INGOT_SHARED_DIR) + "/assets/tokenizers/qwen3");
  auto bytes = token_bytes(*tok);
  auto ids = tok->encode(" hello {\"a\": 1}\n", false);
  std::string joined;
  for (int32_t id : ids) joined += bytes[static_cast<size_t>(id)];
  EXPECT_EQ(joined, " hello {\"a\": 1}\n");
  auto eos = tok->token_to_id("<|im_end|>");
  ASSERT_TRUE(eos.has_value());
  EXPECT_EQ(bytes[static_cast<size_t>(*eos)], "");
}

TEST(JsonConstraint, RandomLogitsAlwaysGiveSchemaValidJson) {
  auto v = qwen3_vocabulary();
  json s = {{"type", "object"},
            {"properties",
             {{"name", {{"type", "string"}, {"maxLength", 12}}},
              {"n", {{"type", "integer"}}},
              {"tags", {{"type", "array"}, {"items", {{"enum", {"x", "y"}}}}, {"maxItems", 3}}}}},
            {"required", {"name", "n", "tags"}},
            {"additionalProperties", false}};
  JsonGrammar g(std::make_shared<Schema>(compile_schema(s)), v);
  for (uint64_t seed = 0; seed < 2; ++seed) {
    std::string text = random_walk(g, *v, seed, 80);
    json j = json::parse(text);  // throws on invalid JSON
    EXPECT_TRUE(j["name"].is_string());
    EXPECT_LE(j["name"].get<std::string>().size(), 12u * 4);
    EXPECT_TRUE(j["n"].is_number_integer());
    EXPECT_LE(j["tags"].size(), 3u);
  }
  JsonGrammar any(std::make_shared<Schema>(any_object_schema()), v);
  for (uint64_t seed = 0; seed < 2; ++seed) EXPECT_TRUE(json::parse(random_walk(any, *v, seed, 40)).is_object());
}

TEST(JsonConstraint, MaskMatchesTheAutomatonTokenByToken) {
  auto v = qwen3_vocabulary();
  auto schema = std::make_shared<Schema>(any_object_schema());
  JsonAutomaton a(schema);
  auto single_byte = [&](char ch) {
    for (int32_t id = 0; id < v->size(); ++id)
      if (v->bytes(id) == std::string(1, ch)) return id;
    return -1;
  };
  // Key position, inside a plain string (the fast path), inside an escape.
  for (std::string prefix : {"{", "{\"a\":\"x", "{\"a\":\"\\"}) {
    JsonConstraint c(std::make_shared<JsonAutomaton>(schema), v);
    for (char ch : prefix) ASSERT_TRUE(c.accept(single_byte(ch))) << prefix;
    EXPECT_EQ(c.text(), prefix);
    const auto& ok = c.allowed(0);
    int64_t allowed = 0;
    FrameArena keep, scratch;
    const Frame* at = a.feed(a.start(keep), prefix, keep);
    for (int32_t id = 0; id < v->size(); ++id) {
      scratch.reset();
      const std::string& b = v->bytes(id);
      bool expect = !b.empty() && a.feed(at, b, scratch) != nullptr;
      ASSERT_EQ(ok[static_cast<size_t>(id)] != 0, expect) << prefix << " token " << id << " '" << b << "'";
      allowed += expect;
    }
    EXPECT_GT(allowed, 5) << prefix;
  }
}

// A draft is allowed up to its first token the grammar refuses, judged from
// the current state, and checking it leaves the state as it was.
TEST(JsonConstraint, AllowedPrefixOfADraftLeavesTheStateAlone) {
  auto v = qwen3_vocabulary();
  JsonConstraint c(std::make_shared<JsonAutomaton>(std::make_shared<Schema>(any_object_schema())), v);
  auto id_of = [&](const std::string& text) {
    for (int32_t id = 0; id < v->size(); ++id)
      if (v->bytes(id) == text) return id;
    ADD_FAILURE() << "no token '" << text << "'";
    return -1;
  };
  ASSERT_TRUE(c.accept(id_of("{")));
  const int32_t quote = id_of("\""), a = id_of("a"), colon = id_of(":"), close = id_of("}"), one = id_of("1");
  EXPECT_EQ(c.allowed_prefix({quote, a, quote, colon, one, close}), 6u);
  EXPECT_EQ(c.allowed_prefix({quote, a, quote, close, one}), 3u);  // '}' cannot follow a key
  EXPECT_EQ(c.allowed_prefix({one}), 0u);                            // nor a number open a key
  EXPECT_EQ(c.allowed_prefix({-1, quote}), 0u);                      // out of range
  EXPECT_EQ(c.allowed_prefix({}), 0u);
  EXPECT_EQ(c.text(), "{");
  EXPECT_TRUE(c.accept(close));  // the state is still right after "{"
  EXPECT_TRUE(c.complete());
}
