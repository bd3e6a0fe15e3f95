// Loader details, errors and metadata (encoding parity itself is proven
// against the reference library by tests/test_tokenizer*.py).
#include <thread>

#include "tokenizer/tests/test_util.h"
#include "util/error.h"

namespace ingot {
namespace {

TEST(Tokenizer, MissingDirectoryIsNotFound) {
  try {
    Tokenizer::from_dir("/nonexistent/tokenizer/dir");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tokenizer/dir"), std::string::npos);
  }
}

TEST(Tokenizer, UnknownTypesAreNamed) {
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0}, "merges": []})";
  struct Case {
    std::string json, needle;
  } cases[] = {
      {R"({"model": {"type": "WordPiece", "vocab": {}}})", "WordPiece"},
      {"{" + model + R"(, "normalizer": {"type": "Sparkle"}})", "Sparkle"},
      {"{" + model + R"(, "pre_tokenizer": {"type": "Chop"}})", "Chop"},
      {"{" + model + R"(, "decoder": {"type": "Unchop"}})", "Unchop"},
      {"{" + model + R"(, "post_processor": {"type": "Glue"}})", "Glue"},
      {"{" + model + R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(("}, "behavior": "Isolated"}})",
       "(("},
  };
  for (const Case& c : cases) {
    try {
      Tokenizer::from_json(c.json, "");
      FAIL() << "expected an error for " << c.json;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
    }
  }
}

TEST(Tokenizer, InvalidUtf8TextIsRejected) {
  const Tokenizer& tok = test::real_tokenizer("mistral-7b");
  try {
    tok.encode("ok \xC3\x28 bad", false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("byte 3"), std::string::npos) << e.what();
  }
}

TEST(Tokenizer, MetadataOfRealTokenizers) {
  const Tokenizer& q = test::real_tokenizer("qwen3");
  EXPECT_EQ(q.vocab_size(), 151669);
  EXPECT_EQ(q.token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(q.id_to_token(151645), "<|im_end|>");
  EXPECT_TRUE(q.is_special(151645));
  EXPECT_FALSE(q.is_special(9707));
  EXPECT_EQ(q.config().eos_token, "<|im_end|>");
  EXPECT_FALSE(q.config().chat_template.empty());
  EXPECT_EQ(q.config().model_max_length, 131072);
  EXPECT_EQ(q.config().add_bos_token, false);

  const Tokenizer& m = test::real_tokenizer("mistral-7b");
  EXPECT_EQ(m.vocab_size(), 32000);
  EXPECT_EQ(m.config().bos_token, "<s>");
  EXPECT_EQ(m.config().add_bos_token, true);
  EXPECT_EQ(m.config().model_max_length, INT64_MAX);  // 1e30 in the file
  EXPECT_EQ(m.encode("", true), (std::vector<int32_t>{1}));
  EXPECT_EQ(m.encode("", false), std::vector<int32_t>{});
}

TEST(Tokenizer, ConfigVariants) {
  const std::string tj = R"({"model": {"type": "BPE", "vocab": {"a": 0, "<s>": 1}, "merges": []},
                             "added_tokens": [{"id": 1, "content": "<s>", "special": true}]})";
  auto t = Tokenizer::from_json(tj, R"({"chat_template": [{"name": "default", "template": "D"},
                                                          {"name": "tool_use", "template": "T"}],
                                       "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": null})");
  EXPECT_EQ(t->config().chat_template, "D");
  ASSERT_EQ(t->config().named_templates.size(), 2u);
  EXPECT_EQ(t->config().named_templates[1].second, "T");
  EXPECT_EQ(t->config().bos_token, "<s>");
  EXPECT_EQ(t->config().eos_token, "");
  // No decoder: tokens are joined with spaces, like the reference.
  EXPECT_EQ(t->decode({1, 0, 0}, false), "<s> a a");
  EXPECT_EQ(t->decode({1, 0, 0}, true), "a a");
  // A character outside the vocab with neither unk nor byte fallback is dropped.
  EXPECT_EQ(t->encode("aza", false), (std::vector<int32_t>{0, 0}));
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

TEST(Tokenizer, ConcurrentEncodingMatchesSerial) {
  // The per-word cache is shared between threads; results must not depend on it.
  const Tokenizer& tok = test::real_tokenizer("qwen3");
  const auto& texts = test::corpus();
  std::vector<std::vector<int32_t>> serial;
  for (size_t i = 0; i < 1000; ++i) serial.push_back(tok.encode(texts[i], true));
  std::vector<std::vector<std::vector<int32_t>>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < 1000; ++i) got[t].push_back(tok.encode(texts[(i * 7 + t) % 1000], true));
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t)
    for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(got[t][i], serial[(i * 7 + t) % 1000]);
}

}  // namespace
}  // namespace ingot
