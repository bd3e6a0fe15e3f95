// Loading tokenizer.json / tokenizer_config.json and the encode/decode
// pipeline: added tokens -> normalizer -> added (normalized) tokens ->
// pre-tokenizer -> BPE -> post-processor; ids -> tokens -> decoder chain.
#include "tokenizer/tokenizer.h"

#include <climits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/components.h"
#include "tokenizer/json_loader.h"
#include "tokenizer/stream.h"
#include "tokenizer/unicode.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot {

namespace tok {

namespace {

// A token field of tokenizer_config.json: a string, an AddedToken object or null.
std::string token_string(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return "";
}

TokenizerConfig parse_config(const std::string& text) {
  TokenizerConfig c;
  if (text.empty()) return c;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(ErrorKind::BadFormat, "tokenizer_config.json: ", e.what());
  }
  if (!j.is_object()) fail(ErrorKind::BadFormat, "tokenizer_config.json: not an object");
  try {
    if (j.contains("chat_template")) {
      const json& t = j["chat_template"];
      if (t.is_string()) {
        c.chat_template = t.get<std::string>();
      } else if (t.is_array()) {  // [{"name": ..., "template": ...}]
        for (const json& e : t) {
          std::string name = e.at("name").get<std::string>(), src = e.at("template").get<std::string>();
          if (name == "default") c.chat_template = src;
          c.named_templates.emplace_back(name, src);
        }
      }
    }
    for (auto [key, field] : {std::pair{"bos_token", &c.bos_token}, {"eos_token", &c.eos_token},
                              {"pad_token", &c.pad_token}, {"unk_token", &c.unk_token}})
      if (j.contains(key)) *field = token_string(j[key]);
    if (j.contains("add_bos_token") && j["add_bos_token"].is_boolean()) c.add_bos_token = j["add_bos_token"].get<bool>();
    if (j.contains("add_eos_token") && j["add_eos_token"].is_boolean()) c.add_eos_token = j["add_eos_token"].get<bool>();
    if (j.contains("model_max_length") && j["model_max_length"].is_number()) {
      double v = j["model_max_length"].get<double>();
      c.model_max_length = v >= 9.2e18 ? INT64_MAX : v < 0 ? 0 : static_cast<int64_t>(v);
    }
  } catch (const json::exception& e) {
    fail(ErrorKind::BadFormat, "tokenizer_config.json: ", e.what());
  }
  return c;
}

class HfTokenizer : public Tokenizer {
 public:
  HfTokenizer(const json& j, BpeTables tables, TokenizerConfig cfg) : cfg_(std::move(cfg)) {
    if (!j.is_object()) fail(ErrorKind::BadFormat, "not a JSON object");
    const json& model = j.at("model");
    if (!model.is_object()) fail(ErrorKind::BadFormat, "\"model\" must be an object");
    std::string type = model.contains("type") ? model.at("type").get<std::string>()
                                              : (model.contains("merges") || tables.has_merges ? "BPE" : "");
    if (type != "BPE") fail(ErrorKind::Unsupported, "unsupported model type '", type, "' (only BPE is implemented)");
    model_ = std::make_unique<Bpe>(model, std::move(tables));
    normalizer_ = make_normalizer(j.value("normalizer", json()));
    pre_ = make_pre_tokenizer(j.value("pre_tokenizer", json()));
    decoder_ = make_decoder(j.value("decoder", json()));

    // Ids follow the reference's add_tokens(): a content already known (added
    // earlier or in the model vocab) keeps that id, a new one takes the next
    // free id after the vocab; the "id" fields of the file are not trusted.
    std::map<int32_t, AddedToken> by_id;
    if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
      int64_t vocab_n = model_->size();
      int64_t next_id = vocab_n;
      for (const json& a : j.at("added_tokens")) {
        AddedToken t;
        t.content = a.at("content").get<std::string>();
        if (find_invalid_utf8(t.content) != std::string::npos) fail(ErrorKind::BadFormat, "added_tokens: invalid UTF-8");
        int64_t file_id = json_int(a.at("id"), INT64_MIN, INT64_MAX, "added_tokens id");
        if (file_id < 0 || file_id >= (1 << 24)) fail(ErrorKind::BadFormat, "added_tokens: id ", file_id, " out of range");
        if (t.content.empty()) continue;
        t.special = a.value("special", false);
        t.lstrip = a.value("lstrip", false);
        t.rstrip = a.value("rstrip", false);
        t.normalized = a.value("normalized", !t.special);
        t.single_word = a.value("single_word", false);
        std::optional<int32_t> known = token_to_id(t.content);
        if (known) {
          t.id = *known;
        } else {
          if (next_id >= (1 << 24)) fail(ErrorKind::BadFormat, "added_tokens: too many tokens");
          t.id = static_cast<int32_t>(next_id++);
        }
        added_by_id_[t.id] = t.content;
        added_by_content_[t.content] = t.id;
        if (t.special) special_contents_.insert(t.content);
        by_id[t.id] = t;
      }
    }
    std::vector<AddedToken> added;
    for (auto& [id, t] : by_id) {
      max_id_ = std::max(max_id_, id);
      if (special_contents_.count(t.content)) special_ids_.insert(id);
      added.push_back(std::move(t));
    }
    added_.build(std::move(added), normalizer_.get());
    for (const AddedToken& t : added_.tokens()) added_decoded_[t.id] = t.decoded;
    max_id_ = std::max(max_id_, model_->max_id());
    post_ = make_post_processor(j.value("post_processor", json()),
                                [this](const std::string& name) { return token_to_id(name); });
    parse_truncation_and_padding(j);
  }

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override {
    size_t bad = find_invalid_utf8(text);
    if (bad != std::string_view::npos) fail(ErrorKind::InvalidArgument, "text is not valid UTF-8 (byte ", bad, ")");
    Pieces raw, pieces;
    added_.split_raw(Piece{std::string(text), true, -1}, raw);
    pieces.reserve(raw.size());
    for (Piece& p : raw) {
      if (p.id >= 0) {
        pieces.push_back(std::move(p));
        continue;
      }
      if (normalizer_) normalizer_->normalize(p.text);
      added_.split_normalized(p, pieces);
    }
    if (pre_) pre_->pre_tokenize(pieces);
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    for (const Piece& p : pieces) {
      if (p.id >= 0) ids.push_back(p.id);
      else model_->tokenize(p.text, ids);
    }
    if (truncate_) {
      size_t room = *truncate_;
      size_t added = (post_ && add_special_tokens) ? post_->added_tokens() : 0;
      room = room > added ? room - added : 0;
      if (ids.size() > room) {
        if (truncate_left_) ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(room));
        else ids.resize(room);
      }
    }
    if (post_) post_->process(ids, add_special_tokens);
    if (pad_) {
      size_t size = pad_fixed_ ? *pad_fixed_ : ids.size();
      if (pad_multiple_ > 0 && size % pad_multiple_) size += pad_multiple_ - size % pad_multiple_;
      if (ids.size() < size) ids.insert(pad_left_ ? ids.begin() : ids.end(), size - ids.size(), pad_id_);
    }
    return ids;
  }

  // tokenizer.json may ask for truncation and padding; the reference applies
  // both inside encode(), so ingot does too.
  void parse_truncation_and_padding(const json& j) {
    auto t = j.find("truncation");
    if (t != j.end() && !t->is_null()) {
      int64_t n = json_int(t->at("max_length"), INT64_MIN, INT64_MAX, "truncation.max_length");
      if (n < 0) fail(ErrorKind::BadFormat, "truncation.max_length is negative");
      truncate_ = static_cast<size_t>(n);
      truncate_left_ = t->value("direction", std::string("Right")) == "Left";
    }
    auto p = j.find("padding");
    if (p != j.end() && !p->is_null()) {
      pad_ = true;
      const json& st = p->at("strategy");
      if (st.is_object() && st.contains("Fixed")) {
        int64_t n = json_int(st.at("Fixed"), INT64_MIN, INT64_MAX, "padding length");
        if (n < 0 || n > (1 << 24)) fail(ErrorKind::BadFormat, "padding length out of range");
        pad_fixed_ = static_cast<size_t>(n);
      }
      pad_left_ = p->value("direction", std::string("Right")) == "Left";
      pad_id_ = p->value("pad_id", 0);
      auto m = p->find("pad_to_multiple_of");
      if (m != p->end() && !m->is_null()) pad_multiple_ = m->get<size_t>();
      if (pad_multiple_ > (1 << 24)) fail(ErrorKind::BadFormat, "pad_to_multiple_of out of range");
    }
  }

  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override {
    return decode_range(ids.data(), ids.size(), skip_special_tokens);
  }

  std::string decode_range(const int32_t* ids, size_t n, bool skip_special) const {
    std::vector<std::string> tokens;
    tokens.reserve(n);
    for (size_t k = 0; k < n; ++k) {
      std::optional<std::string_view> t;
      auto it = added_decoded_.find(ids[k]);
      if (it != added_decoded_.end()) t = it->second;
      else t = model_->id_to_token(ids[k]);
      if (!t) continue;  // unknown ids are dropped, like the reference
      if (skip_special && special_contents_.count(*t)) continue;
      tokens.emplace_back(*t);
    }
    if (!decoder_) {
      std::string out;
      for (size_t k = 0; k < tokens.size(); ++k) out += (k ? " " : "") + tokens[k];
      return out;
    }
    decoder_->decode_chain(tokens);
    std::string out;
    for (const auto& t : tokens) out += t;
    return out;
  }

  int64_t vocab_size() const override { return int64_t(max_id_) + 1; }

  std::optional<int32_t> token_to_id(std::string_view token) const override {
    auto it = added_by_content_.find(token);
    if (it != added_by_content_.end()) return it->second;
    return model_->token_to_id(token);
  }

  std::string id_to_token(int32_t id) const override {
    auto it = added_by_id_.find(id);
    if (it != added_by_id_.end()) return it->second;
    auto t = model_->id_to_token(id);
    return t ? std::string(*t) : std::string();
  }

  bool is_special(int32_t id) const override { return special_ids_.count(id) > 0; }
  const TokenizerConfig& config() const override { return cfg_; }

  std::unique_ptr<Stream> stream(bool skip_special_tokens) const override {
    return std::make_unique<DecodeStream>(
        [this](const int32_t* ids, size_t n, bool skip) { return decode_range(ids, n, skip); }, skip_special_tokens);
  }

 private:
  TokenizerConfig cfg_;
  std::unique_ptr<Bpe> model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_;
  std::unique_ptr<PostProcessor> post_;
  std::unique_ptr<Decoder> decoder_;
  AddedVocab added_;
  std::unordered_map<int32_t, std::string> added_by_id_, added_decoded_;
  StrMap added_by_content_;
  std::unordered_set<int32_t> special_ids_;
  std::unordered_set<std::string, StrHash, std::equal_to<>> special_contents_;
  int32_t max_id_ = -1;
  std::optional<size_t> truncate_, pad_fixed_;
  bool truncate_left_ = false, pad_ = false, pad_left_ = false;
  int32_t pad_id_ = 0;
  size_t pad_multiple_ = 0;
};

}  // namespace

}  // namespace tok

namespace {
std::unique_ptr<Tokenizer> build(const std::string& tokenizer_json, TokenizerConfig cfg) {
  tok::BpeTables tables;
  tok::json j = tok::parse_tokenizer_json(tokenizer_json, &tables);
  try {
    return std::make_unique<tok::HfTokenizer>(j, std::move(tables), std::move(cfg));
  } catch (const tok::json::exception& e) {
    fail(ErrorKind::BadFormat, "tokenizer.json: ", e.what());
  } catch (const Error& e) {
    throw Error(e.kind(), std::string("tokenizer.json: ") + e.what());
  }
}
}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_json(const std::string& tokenizer_json, const std::string& config_json) {
  return build(tokenizer_json, tok::parse_config(config_json));
}

std::unique_ptr<Tokenizer> Tokenizer::from_dir(const std::string& dir) {
  if (!is_directory(dir)) fail(ErrorKind::NotFound, "tokenizer directory not found: ", dir);
  std::string tj = dir + "/tokenizer.json";
  if (!file_exists(tj)) fail(ErrorKind::NotFound, "no tokenizer.json in ", dir);
  std::string cj = dir + "/tokenizer_config.json";
  try {
    TokenizerConfig cfg = tok::parse_config(file_exists(cj) ? read_text_file(cj) : std::string());
    std::string jinja = dir + "/chat_template.jinja";
    if (file_exists(jinja)) cfg.chat_template = read_text_file(jinja);
    return build(read_text_file(tj), std::move(cfg));
  } catch (const Error& e) {
    std::string msg = e.what();  // "tokenizer.json: ..." -> "DIR/tokenizer.json: ..."
    throw Error(e.kind(), starts_with(msg, "tokenizer") ? dir + "/" + msg : msg);
  }
}

}  // namespace ingot
