#include "io/gguf_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "util/error.h"

namespace ingot {

namespace {

using nlohmann::json;

// llama.cpp's token types.
constexpr int kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4;  // (6: byte tokens)

const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> string_array(const GgufFile& g, const std::string& key, bool required) {
  const GgufValue* v = g.find(key);
  if (!v) {
    if (required) fail(ErrorKind::BadFormat, "gguf: tokenizer needs '", key, "'");
    return {};
  }
  std::vector<std::string> out;
  for (const auto& e : v->as_array(key)) out.push_back(e.as_string(key));
  return out;
}

std::vector<double> number_array(const GgufFile& g, const std::string& key, size_t n, double dflt) {
  std::vector<double> out(n, dflt);
  if (const GgufValue* v = g.find(key)) {
    const auto& a = v->as_array(key);
    if (a.size() != n) fail(ErrorKind::BadFormat, "gguf: '", key, "' has ", a.size(), " entries for ", n, " tokens");
    for (size_t i = 0; i < n; ++i) out[i] = a[i].as_double(key);
  }
  return out;
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

json split(const char* regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

json gpt2_pre_tokenizer(const std::string& pre) {
  if (pre.empty() || pre == "default" || pre == "gpt2" || pre == "gpt-2") return byte_level(true);
  if (pre == "smollm")
    return {{"type", "Sequence"},
            {"pretokenizers", json::array({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)})}};
  if (pre == "llama-bpe" || pre == "llama3")
    return {{"type", "Sequence"}, {"pretokenizers", json::array({split(kLlama3Regex), byte_level(false)})}};
  if (pre == "qwen2")
    return {{"type", "Sequence"}, {"pretokenizers", json::array({split(kQwen2Regex), byte_level(false)})}};
  fail(ErrorKind::Unsupported, "gguf: tokenizer pre-tokenizer '", pre, "' is not supported");
}

// SentencePiece vocabularies carry scores, not merges: every way of writing a
// piece as two vocabulary pieces is a merge, ranked by the merged piece's score.
json spm_merges(const std::vector<std::string>& tokens, const std::vector<double>& scores,
                const std::vector<int>& types) {
  std::unordered_map<std::string, int> id;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (types[i] == kNormal || types[i] == kUserDefined) id.emplace(tokens[i], static_cast<int>(i));
  struct M { double score; int merged, left, right; };
  std::vector<M> ms;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] != kNormal) continue;
    const std::string& t = tokens[i];
    for (size_t cut = 1; cut < t.size(); ++cut) {
      if ((static_cast<unsigned char>(t[cut]) & 0xC0) == 0x80) continue;  // inside a UTF-8 character
      auto l = id.find(t.substr(0, cut)), r = id.find(t.substr(cut));
      if (l != id.end() && r != id.end()) ms.push_back({scores[i], static_cast<int>(i), l->second, r->second});
    }
  }
  std::stable_sort(ms.begin(), ms.end(), [](const M& a, const M& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.merged != b.merged) return a.merged < b.merged;
    return a.left < b.left;
  });
  json out = json::array();
  for (const M& m : ms) out.push_back(json::array({tokens[static_cast<size_t>(m.left)], tokens[static_cast<size_t>(m.right)]}));
  return out;
}

json template_post_processor(const std::string& bos, const std::string& eos, bool add_bos, bool add_eos, int bos_id,
                             int eos_id) {
  json single = json::array(), pair = json::array(), special = json::object();
  auto sp = [](const std::string& t) { return json{{"SpecialToken", {{"id", t}, {"type_id", 0}}}}; };
  auto seq = [](const char* s, int type) { return json{{"Sequence", {{"id", s}, {"type_id", type}}}}; };
  if (add_bos) { single.push_back(sp(bos)); pair.push_back(sp(bos)); }
  single.push_back(seq("A", 0));
  pair.push_back(seq("A", 0));
  if (add_eos) { single.push_back(sp(eos)); pair.push_back(sp(eos)); }
  if (add_bos) pair.push_back(sp(bos));
  pair.push_back(seq("B", 1));
  if (add_eos) pair.push_back(sp(eos));
  if (add_bos) special[bos] = {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}};
  if (add_eos) special[eos] = {{"id", eos}, {"ids", {eos_id}}, {"tokens", {eos}}};
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", special}};
}

}  // namespace

GgufTokenizerFiles gguf_tokenizer_files(const GgufFile& g) {
  const std::string model = g.get_string("tokenizer.ggml.model").value_or("");
  if (model != "gpt2" && model != "llama")
    fail(ErrorKind::Unsupported, "gguf: tokenizer model '", model, "' is not supported (gpt2, llama)");
  const bool spm = model == "llama";
  std::vector<std::string> tokens = string_array(g, "tokenizer.ggml.tokens", true);
  const size_t n = tokens.size();
  std::vector<int> types(n, kNormal);
  for (size_t i = 0; auto t : number_array(g, "tokenizer.ggml.token_type", n, kNormal)) types[i++] = static_cast<int>(t);
  std::vector<double> scores = number_array(g, "tokenizer.ggml.scores", n, 0.0);

  auto token_at = [&](const char* key, int64_t dflt) -> std::pair<int, std::string> {
    int64_t id = g.get_int(key).value_or(dflt);
    if (id < 0 || id >= static_cast<int64_t>(n)) return {-1, ""};
    return {static_cast<int>(id), tokens[static_cast<size_t>(id)]};
  };
  auto [bos_id, bos] = token_at("tokenizer.ggml.bos_token_id", spm ? 1 : -1);
  auto [eos_id, eos] = token_at("tokenizer.ggml.eos_token_id", spm ? 2 : -1);
  auto [unk_id, unk] = token_at("tokenizer.ggml.unknown_token_id", spm ? 0 : -1);
  auto [pad_id, pad] = token_at("tokenizer.ggml.padding_token_id", -1);
  const bool add_bos = g.get_bool("tokenizer.ggml.add_bos_token").value_or(spm) && bos_id >= 0;
  const bool add_eos = g.get_bool("tokenizer.ggml.add_eos_token").value_or(false) && eos_id >= 0;

  json vocab = json::object();
  json added = json::array();
  for (size_t i = 0; i < n; ++i) {
    vocab[tokens[i]] = i;
    if (types[i] == kControl || types[i] == kUserDefined || types[i] == kUnknown) {
      const bool special = types[i] != kUserDefined;
      added.push_back({{"id", i}, {"content", tokens[i]}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", !special}, {"special", special}});
    }
  }

  json tj;
  tj["version"] = "1.0";
  tj["truncation"] = nullptr;
  tj["padding"] = nullptr;
  tj["added_tokens"] = added;
  json bpe = {{"type", "BPE"}, {"dropout", nullptr}, {"continuing_subword_prefix", nullptr},
              {"end_of_word_suffix", nullptr}, {"ignore_merges", false}, {"vocab", vocab}};
  if (spm) {
    const bool prefix = g.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
    json norms = json::array();
    if (prefix) norms.push_back({{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}});
    norms.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}});
    tj["normalizer"] = {{"type", "Sequence"}, {"normalizers", norms}};
    tj["pre_tokenizer"] = nullptr;
    json dec = json::array({{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                            {{"type", "ByteFallback"}}, {{"type", "Fuse"}}});
    if (prefix) dec.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    tj["decoder"] = {{"type", "Sequence"}, {"decoders", dec}};
    bpe["unk_token"] = unk_id >= 0 ? json(unk) : json(nullptr);
    bpe["fuse_unk"] = true;
    bpe["byte_fallback"] = true;
    bpe["merges"] = spm_merges(tokens, scores, types);
  } else {
    tj["normalizer"] = nullptr;
    tj["pre_tokenizer"] = gpt2_pre_tokenizer(g.get_string("tokenizer.ggml.pre").value_or("default"));
    tj["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
    bpe["unk_token"] = nullptr;
    bpe["fuse_unk"] = false;
    bpe["byte_fallback"] = false;
    json merges = json::array();
    for (const auto& m : string_array(g, "tokenizer.ggml.merges", true)) {
      auto sp = m.find(' ', 1);
      if (sp == std::string::npos) fail(ErrorKind::BadFormat, "gguf: merge '", m, "' has no space");
      merges.push_back(json::array({m.substr(0, sp), m.substr(sp + 1)}));
    }
    bpe["merges"] = merges;
  }
  if (add_bos || add_eos)
    tj["post_processor"] = template_post_processor(bos, eos, add_bos, add_eos, bos_id, eos_id);
  else if (!spm)
    tj["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
  else
    tj["post_processor"] = nullptr;
  tj["model"] = bpe;

  json cfg;
  cfg["tokenizer_class"] = spm ? "LlamaTokenizer" : "GPT2Tokenizer";
  cfg["add_bos_token"] = add_bos;
  cfg["add_eos_token"] = add_eos;
  cfg["bos_token"] = bos_id >= 0 ? json(bos) : json(nullptr);
  cfg["eos_token"] = eos_id >= 0 ? json(eos) : json(nullptr);
  cfg["unk_token"] = unk_id >= 0 ? json(unk) : json(nullptr);
  cfg["pad_token"] = pad_id >= 0 ? json(pad) : json(nullptr);
  cfg["clean_up_tokenization_spaces"] = false;
  const std::string arch = g.get_string("general.architecture").value_or("");
  if (auto ctx = g.get_int(arch + ".context_length")) cfg["model_max_length"] = *ctx;
  if (auto t = g.get_string("tokenizer.chat_template")) cfg["chat_template"] = *t;
  try {
    return {tj.dump(), cfg.dump(2)};
  } catch (const json::exception&) {
    // A token, special token or the chat template is not valid UTF-8.
    fail(ErrorKind::BadFormat, "GGUF tokenizer metadata holds a string that is not valid UTF-8");
  }
}

}  // namespace ingot
