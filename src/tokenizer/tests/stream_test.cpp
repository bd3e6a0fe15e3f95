// Streaming detokenization: every chunk is valid UTF-8 and the chunks add up
// to the full decode, with and without skip_special_tokens.
#include "tokenizer/tests/test_util.h"
#include "tokenizer/text_decoder.h"
#include "tokenizer/unicode.h"

namespace ingot {
namespace {

std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip, int* chunks_with_text) {
  auto s = tok.stream(skip);
  std::string out;
  for (int32_t id : ids) {
    std::string chunk = s->push(id);
    EXPECT_EQ(tok::find_invalid_utf8(chunk), std::string::npos) << "broken UTF-8 chunk";
    if (!chunk.empty() && chunks_with_text) ++*chunks_with_text;
    out += chunk;
  }
  std::string last = s->flush();
  EXPECT_EQ(tok::find_invalid_utf8(last), std::string::npos);
  return out + last;
}

class StreamCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamCorpus, ConcatenationEqualsFullDecode) {
  const Tokenizer& tok = test::real_tokenizer(GetParam());
  int checked = 0, chunks = 0;
  for (const std::string& text : test::corpus()) {
    std::vector<int32_t> ids = tok.encode(text, true);
    for (bool skip : {false, true}) {
      ASSERT_EQ(stream_all(tok, ids, skip, &chunks), tok.decode(ids, skip)) << "text: " << text;
      ++checked;
    }
  }
  EXPECT_GE(checked, 10000);
  EXPECT_GT(chunks, 10000);  // text really arrives incrementally
}

INSTANTIATE_TEST_SUITE_P(Real, StreamCorpus, ::testing::Values("qwen3", "mistral-7b"));

TEST(Stream, HoldsBackPartialCharacters) {
  const Tokenizer& tok = test::real_tokenizer("mistral-7b");
  // U+1F600 is four byte-fallback tokens in this vocab.
  std::vector<int32_t> ids;
  for (const char* b : {"<0xF0>", "<0x9F>", "<0x98>", "<0x80>"}) ids.push_back(*tok.token_to_id(b));
  auto s = tok.stream(false);
  EXPECT_EQ(s->push(*tok.token_to_id("▁a")), "a");  // Strip removes the first leading space
  EXPECT_EQ(s->push(ids[0]), "");
  EXPECT_EQ(s->push(ids[1]), "");
  EXPECT_EQ(s->push(ids[2]), "");
  EXPECT_EQ(s->push(ids[3]), "\xF0\x9F\x98\x80");
  EXPECT_EQ(s->flush(), "");
}

TEST(Stream, InvalidBytesEndAsReplacementLikeFullDecode) {
  const Tokenizer& tok = test::real_tokenizer("mistral-7b");
  std::vector<int32_t> ids = {*tok.token_to_id("<0xFF>"), *tok.token_to_id("<0xE2>"), *tok.token_to_id("▁b"),
                              *tok.token_to_id("<0xF0>")};
  std::string full = tok.decode(ids, false);
  EXPECT_EQ(full, "\xEF\xBF\xBD\xEF\xBF\xBD b\xEF\xBF\xBD");
  EXPECT_EQ(stream_all(tok, ids, false, nullptr), full);
}

TEST(Stream, ByteLevelSplitsMultibyteCharacters) {
  const Tokenizer& tok = test::real_tokenizer("qwen3");
  std::vector<int32_t> ids = tok.encode("🧑🏿‍💻 👨‍👩‍👧‍👦 ᐃᓄᒃᑎᑐᑦ", false);
  ASSERT_GT(ids.size(), 8u);
  auto s = tok.stream(false);
  std::string out;
  int held = 0;
  for (int32_t id : ids) {
    std::string c = s->push(id);
    held += c.empty();
    out += c;
  }
  out += s->flush();
  EXPECT_GT(held, 0);  // some tokens end mid-character and must wait
  EXPECT_EQ(out, tok.decode(ids, false));
}

TEST(Stream, SkipsSpecialTokens) {
  const Tokenizer& tok = test::real_tokenizer("qwen3");
  std::vector<int32_t> ids = tok.encode("<|im_start|>user\nhi<|im_end|>", false);
  EXPECT_EQ(stream_all(tok, ids, true, nullptr), "user\nhi");
  EXPECT_EQ(stream_all(tok, ids, false, nullptr), "<|im_start|>user\nhi<|im_end|>");
}

TEST(TextDecoder, AdapterStreamsThroughTheTokenizer) {
  auto shared = std::shared_ptr<const Tokenizer>(Tokenizer::from_dir(test::shared_tokenizer_dir("mistral-7b")));
  TokenizerTextDecoder dec(shared);
  std::vector<int32_t> ids = shared->encode("Hello wörld 😀!", true);
  auto s = dec.stream(true);
  std::string out;
  for (int32_t id : ids) out += s->push(id);
  out += s->flush();
  EXPECT_EQ(out, "Hello wörld 😀!");
}

}  // namespace
}  // namespace ingot
