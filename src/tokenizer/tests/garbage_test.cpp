// The tokenizer.json loader survives garbage: random truncations, byte
// flips, deleted or retyped fields and random values either load or throw
// ingot::Error, never crash or hang; whatever loads can encode and decode.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace ingot {
namespace {

using json = nlohmann::json;

json small_tokenizer() {
  json vocab = json::object();
  const char* toks[] = {"<unk>", "<s>", "</s>", "▁", "a", "b", "c", "ab", "▁a", "▁ab", "bc", "abc", "<0x41>", "<0xE2>"};
  for (int i = 0; i < 14; ++i) vocab[toks[i]] = i;
  return json{
      {"version", "1.0"},
      {"added_tokens", json::array({json{{"id", 1}, {"content", "<s>"}, {"special", true}, {"normalized", false},
                                         {"lstrip", false}, {"rstrip", false}, {"single_word", false}},
                                    json{{"id", 14}, {"content", "[X]"}, {"special", false}, {"normalized", true},
                                         {"lstrip", true}, {"rstrip", true}, {"single_word", true}}})},
      {"normalizer", {{"type", "Sequence"},
                      {"normalizers", json::array({json{{"type", "NFKC"}}, json{{"type", "Prepend"}, {"prepend", "▁"}},
                                                   json{{"type", "Replace"}, {"pattern", {{"String", " "}}},
                                                        {"content", "▁"}}})}}},
      {"pre_tokenizer", {{"type", "Sequence"},
                         {"pretokenizers", json::array({json{{"type", "Split"}, {"pattern", {{"Regex", "\\p{N}+"}}},
                                                             {"behavior", "Isolated"}, {"invert", false}},
                                                        json{{"type", "Digits"}, {"individual_digits", true}}})}}},
      {"post_processor", {{"type", "TemplateProcessing"},
                          {"single", json::array({json{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                  json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                          {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder", {{"type", "Sequence"},
                   {"decoders", json::array({json{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                                             json{{"type", "ByteFallback"}}, json{{"type", "Fuse"}},
                                             json{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model", {{"type", "BPE"}, {"unk_token", "<unk>"}, {"fuse_unk", true}, {"byte_fallback", true},
                 {"vocab", vocab}, {"merges", json::array({json::array({"a", "b"}), json::array({"▁", "a"}), json::array({"▁a", "b"}),
                                          json::array({"b", "c"}), json::array({"ab", "c"})})}}},
  };
}

json random_value(std::mt19937& rng) {
  switch (rng() % 9) {
    case 0: return nullptr;
    case 1: return static_cast<int64_t>(rng()) - (1ll << 31);
    case 2: return -1;
    case 3: return "Frobnicate";
    case 4: return json::array({1, "x", nullptr});
    case 5: return json::object({{"type", "BPE"}});
    case 6: return true;
    case 7: return 1e300;
    default: return std::string(rng() % 5, '\xff');
  }
}

// Replaces or deletes one random node of the document.
void mutate(json& j, std::mt19937& rng, int depth = 0) {
  if ((!j.is_object() && !j.is_array()) || j.empty() || (depth > 0 && rng() % 4 == 0)) {
    j = random_value(rng);
    return;
  }
  size_t pick = rng() % j.size();
  if (j.is_object()) {
    auto it = j.begin();
    std::advance(it, static_cast<long>(pick));
    if (rng() % 5 == 0) j.erase(it.key());
    else mutate(*it, rng, depth + 1);
  } else {
    if (rng() % 5 == 0) j.erase(pick);
    else mutate(j[pick], rng, depth + 1);
  }
}

void exercise(const std::string& text) {
  try {
    auto tok = Tokenizer::from_json(text, "");
    for (const char* s : {"abc ab 12 [X] <s>x", "", "\xE2\x96\x81\xF0\x9F\x98\x80 A"}) {
      auto ids = tok->encode(s, true);
      std::string back = tok->decode(ids, false);
      auto st = tok->stream(true);
      for (int32_t id : ids) st->push(id);
      st->flush();
      tok->decode({-5, 1 << 30, 3}, true);  // unknown ids are dropped, not fatal
    }
  } catch (const Error&) {
    // A clear error is the expected outcome for most mutations.
  }
}

TEST(Garbage, ValidSmallTokenizerWorks) {
  auto tok = Tokenizer::from_json(small_tokenizer().dump(), "");
  // Expected ids and text computed by the reference library on the same JSON
  // (decode with its default skip_special_tokens=True).
  EXPECT_EQ(tok->encode("abc ab", true), (std::vector<int32_t>{1, 3, 11, 3, 7}));
  EXPECT_EQ(tok->decode({1, 3, 11, 3, 7}, true), "abc ab");
  EXPECT_EQ(tok->encode("x [X] abc", true), (std::vector<int32_t>{1, 3, 0, 3, 0, 3, 11}));
  EXPECT_EQ(tok->decode({1, 3, 0, 3, 0, 3, 11}, true), "<unk> <unk> abc");
  EXPECT_EQ(tok->encode("A€", true), (std::vector<int32_t>{1, 3, 12, 0}));
  EXPECT_EQ(tok->decode({1, 3, 12, 0}, true), "A<unk>");
}

TEST(Garbage, MutatedDocumentsLoadOrThrow) {
  std::mt19937 rng(1234);
  const json base = small_tokenizer();
  for (int iter = 0; iter < 3000; ++iter) {
    json j = base;
    int n = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < n; ++k) mutate(j, rng);
    exercise(j.dump(-1, ' ', false, json::error_handler_t::replace));
  }
}

TEST(Garbage, CorruptedBytesLoadOrThrow) {
  std::mt19937 rng(99);
  const std::string base = small_tokenizer().dump();
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = base;
    switch (iter % 3) {
      case 0: s.resize(rng() % s.size()); break;  // truncation
      case 1:
        for (int k = 0; k < 4; ++k) s[rng() % s.size()] = static_cast<char>(rng());
        break;
      default: s.insert(rng() % s.size(), std::string(1 + rng() % 8, "{}[],:\"\\"[rng() % 8]));
    }
    exercise(s);
  }
}

TEST(Garbage, EmptyAndNonObjectInputs) {
  for (const char* s : {"", "null", "[]", "42", "\"x\"", "{}", "{\"model\": null}", "{\"model\": {}}",
                        "{\"model\": {\"type\": \"BPE\", \"vocab\": [], \"merges\": []}}"}) {
    EXPECT_THROW(Tokenizer::from_json(s, ""), Error) << s;
  }
  EXPECT_THROW(Tokenizer::from_json(small_tokenizer().dump(), "{not json"), Error);
}

// Merges resolve in blocks (a few hundred at a time); a chain of merges longer
// than a block must resolve fully, and a bad entry in a later block must be
// named, whether one of its tokens or the merged token is missing.
// Characters c_0..c_{n-1} (distinct CJK code points, ids 0..n-1); merge k joins
// the prefix c_0..c_k with c_{k+1}, so c_0..c_{n-1} encodes to one id (2n-2).
std::string cjk(int k) {
  const uint32_t cp = 0x4E00 + static_cast<uint32_t>(k);
  return {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
          static_cast<char>(0x80 | (cp & 0x3F))};
}
std::string cjk_prefix(int len) {
  std::string s;
  for (int k = 0; k < len; ++k) s += cjk(k);
  return s;
}
json chain_tokenizer(int n) {
  json vocab = json::object(), merges = json::array();
  for (int k = 0; k < n; ++k) vocab[cjk(k)] = k;
  for (int len = 2; len <= n; ++len) {
    vocab[cjk_prefix(len)] = n + len - 2;
    merges.push_back(json::array({cjk_prefix(len - 1), cjk(len - 1)}));
  }
  return json{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

TEST(Garbage, MergeChainsAcrossBlocks) {
  constexpr int n = 700;
  auto tok = Tokenizer::from_json(chain_tokenizer(n).dump(), "");
  EXPECT_EQ(tok->encode(cjk_prefix(n), false), std::vector<int32_t>{2 * n - 2});
  EXPECT_EQ(tok->encode(cjk_prefix(300) + cjk(5), false), (std::vector<int32_t>{n + 298, 5}));

  json bad_token = chain_tokenizer(n);
  bad_token["model"]["merges"][600][1] = "zz";
  try {
    Tokenizer::from_json(bad_token.dump(), "");
    ADD_FAILURE() << "a merge of an unknown token loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 'zz' is not in the vocab"), std::string::npos) << e.what();
  }
  json bad_merged = chain_tokenizer(n);
  bad_merged["model"]["vocab"].erase(cjk_prefix(500));  // merge 498 makes it
  try {
    Tokenizer::from_json(bad_merged.dump(), "");
    ADD_FAILURE() << "a merge into a missing token loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("merged token '" + cjk_prefix(500) + "' is not in the vocab"),
              std::string::npos) << std::string(e.what()).substr(0, 200);
  }
}

}  // namespace
}  // namespace ingot
