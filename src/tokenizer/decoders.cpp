// Decoders (token strings back to text) and post-processors (special tokens
// around an encoded sequence).
#include "tokenizer/components.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace ingot::tok {

int64_t json_int(const json& v, int64_t lo, int64_t hi, const char* what) {
  if (!v.is_number_integer()) fail(ErrorKind::BadFormat, what, ": expected an integer, got ", v.dump());
  const bool out = v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(hi)
                                          : (v.get<int64_t>() > hi || v.get<int64_t>() < lo);
  if (out) fail(ErrorKind::BadFormat, what, ": ", v.dump(), " is out of range");
  return v.get<int64_t>();
}

namespace {

class ByteLevelDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      size_t start = bytes.size(), i = 0;
      bool all = true;
      while (i < t.size()) {
        int b = char_to_byte(next_cp(t, i));
        if (b < 0) {
          all = false;
          break;
        }
        bytes += static_cast<char>(b);
      }
      if (!all) {  // not byte-level text (an added token): its own bytes
        bytes.resize(start);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class MetaspaceDec : public Decoder {
 public:
  explicit MetaspaceDec(const json& j) {
    rep_ = j.value("replacement", std::string("\xE2\x96\x81"));
    if (j.contains("prepend_scheme")) prepend_ = j.at("prepend_scheme").get<std::string>() != "never";
    else prepend_ = j.value("add_prefix_space", true);
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (rep_.empty()) return;
    for (size_t k = 0; k < tokens.size(); ++k) {
      std::string out;
      const std::string& t = tokens[k];
      for (size_t p = 0; p < t.size();) {
        if (t.compare(p, rep_.size(), rep_) == 0) {
          if (!(k == 0 && prepend_)) out += ' ';
          p += rep_.size();
        } else {
          out += t[p++];
        }
      }
      tokens[k] = std::move(out);
    }
  }

 private:
  std::string rep_;
  bool prepend_ = true;
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class ByteFallbackDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (find_invalid_utf8(pending) == std::string::npos) out.push_back(pending);
      else
        for (size_t k = 0; k < pending.size(); ++k) out.emplace_back("\xEF\xBF\xBD");
      pending.clear();
    };
    for (std::string& t : tokens) {
      int hi = -1, lo = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
        hi = hex_digit(t[3]);
        lo = hex_digit(t[4]);
      }
      if (hi >= 0 && lo >= 0) {
        pending += static_cast<char>(hi * 16 + lo);
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDec : public Decoder {
 public:
  explicit StripDec(const json& j) : start_(j.at("start").get<size_t>()), stop_(j.at("stop").get<size_t>()) {
    std::string c = j.at("content").get<std::string>();
    size_t i = 0;
    if (c.empty() || find_invalid_utf8(c) != std::string::npos) fail(ErrorKind::BadFormat, "bad Strip content");
    content_ = next_cp(c, i);
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, code point)
      for (size_t i = 0; i < t.size();) {
        size_t b = i;
        chars.emplace_back(b, next_cp(t, i));
      }
      size_t cut_start = 0, cut_stop = chars.size();
      for (size_t k = 0; k < start_ && k < chars.size(); ++k) {
        if (chars[k].second != content_) break;
        cut_start = k + 1;
      }
      for (size_t k = 0; k < stop_ && k < chars.size(); ++k) {
        size_t idx = chars.size() - k - 1;
        if (chars[idx].second != content_) break;
        cut_stop = idx;
      }
      if (cut_stop <= cut_start) {
        t.clear();
        continue;
      }
      size_t b = chars[cut_start].first, e = cut_stop < chars.size() ? chars[cut_stop].first : t.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  size_t start_, stop_;
  char32_t content_ = 0;
};

class ReplaceDec : public Decoder {
 public:
  explicit ReplaceDec(const json& j) : pattern_(j.at("pattern")), content_(j.at("content").get<std::string>()) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = replace_all(t, pattern_, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class BpeDec : public Decoder {
 public:
  explicit BpeDec(const json& j) : suffix_(j.value("suffix", std::string("</w>"))) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    Pattern p(json{{"String", suffix_}});
    for (size_t k = 0; k < tokens.size(); ++k)
      tokens[k] = replace_all(tokens[k], p, k + 1 == tokens.size() ? "" : " ");
  }

 private:
  std::string suffix_;
};

class SequenceDec : public Decoder {
 public:
  explicit SequenceDec(const json& list) {
    for (const json& d : list) {
      auto p = make_decoder(d);
      if (p) parts_.push_back(std::move(p));
    }
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

// ---- post-processors ----

class Template : public PostProcessor {
 public:
  Template(const json& j, const TokenLookup& lookup) {
    std::map<std::string, std::vector<int32_t>> specials;
    if (j.contains("special_tokens")) {
      for (auto& [name, st] : j.at("special_tokens").items()) {
        std::vector<int32_t> ids;
        for (const json& id : st.at("ids")) ids.push_back(static_cast<int32_t>(json_int(id, 0, INT32_MAX, "ids")));
        specials[name] = ids;
      }
    }
    auto special_ids = [&](const std::string& name) {
      auto it = specials.find(name);
      if (it != specials.end()) return it->second;
      auto id = lookup(name);
      if (!id) fail(ErrorKind::BadFormat, "TemplateProcessing: special token '", name, "' is not defined");
      return std::vector<int32_t>{*id};
    };
    const json& single = j.at("single");
    if (single.is_string()) {  // "[CLS] $A [SEP]" shorthand
      std::string s = single.get<std::string>();
      size_t p = 0;
      while (p < s.size()) {
        size_t e = s.find(' ', p);
        if (e == std::string::npos) e = s.size();
        std::string item = s.substr(p, e - p);
        p = e + 1;
        if (item.empty()) continue;
        if (item[0] == '$') {
          items_.push_back({true, {}});
          continue;
        }
        size_t colon = item.rfind(':');
        if (colon != std::string::npos && colon > 0) item = item.substr(0, colon);
        items_.push_back({false, special_ids(item)});
      }
    } else {
      for (const json& it : single) {
        if (it.contains("Sequence")) items_.push_back({true, {}});
        else if (it.contains("SpecialToken")) items_.push_back({false, special_ids(it.at("SpecialToken").at("id").get<std::string>())});
        else fail(ErrorKind::BadFormat, "TemplateProcessing: bad template item");
      }
    }
  }
  void process(std::vector<int32_t>& ids, bool add_special) const override {
    if (!add_special) return;
    std::vector<int32_t> out;
    out.reserve(ids.size() + 4);
    for (const Item& it : items_) {
      if (it.sequence) out.insert(out.end(), ids.begin(), ids.end());
      else out.insert(out.end(), it.ids.begin(), it.ids.end());
    }
    ids = std::move(out);
  }
  size_t added_tokens() const override {
    size_t n = 0;
    for (const Item& it : items_) n += it.ids.size();
    return n;
  }

 private:
  struct Item {
    bool sequence;
    std::vector<int32_t> ids;
  };
  std::vector<Item> items_;
};

// Roberta / Bert: cls + A + sep.
class ClsSep : public PostProcessor {
 public:
  explicit ClsSep(const json& j)
      : cls_(static_cast<int32_t>(json_int(j.at("cls").at(1), 0, INT32_MAX, "cls"))),
        sep_(static_cast<int32_t>(json_int(j.at("sep").at(1), 0, INT32_MAX, "sep"))) {}
  void process(std::vector<int32_t>& ids, bool add_special) const override {
    if (!add_special) return;
    ids.insert(ids.begin(), cls_);
    ids.push_back(sep_);
  }
  size_t added_tokens() const override { return 2; }

 private:
  int32_t cls_, sep_;
};

class NoOp : public PostProcessor {
 public:
  void process(std::vector<int32_t>&, bool) const override {}
  size_t added_tokens() const override { return 0; }
};

class SequencePost : public PostProcessor {
 public:
  SequencePost(const json& list, const TokenLookup& lookup) {
    for (const json& p : list) {
      auto q = make_post_processor(p, lookup);
      if (q) parts_.push_back(std::move(q));
    }
  }
  void process(std::vector<int32_t>& ids, bool add_special) const override {
    for (const auto& p : parts_) p->process(ids, add_special);
  }
  size_t added_tokens() const override {
    size_t n = 0;
    for (const auto& p : parts_) n += p->added_tokens();
    return n;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& j) {
  if (j.is_null()) return nullptr;
  std::string type = component_type(j, "decoder");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDec>();
  if (type == "Metaspace") return std::make_unique<MetaspaceDec>(j);
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDec>();
  if (type == "Fuse") return std::make_unique<FuseDec>();
  if (type == "Strip") return std::make_unique<StripDec>(j);
  if (type == "Replace") return std::make_unique<ReplaceDec>(j);
  if (type == "BPEDecoder") return std::make_unique<BpeDec>(j);
  if (type == "Sequence") return std::make_unique<SequenceDec>(j.at("decoders"));
  fail(ErrorKind::Unsupported, "unsupported decoder type '", type, "'");
}

std::unique_ptr<PostProcessor> make_post_processor(const json& j, const TokenLookup& lookup) {
  if (j.is_null()) return nullptr;
  std::string type = component_type(j, "post_processor");
  if (type == "TemplateProcessing") return std::make_unique<Template>(j, lookup);
  if (type == "ByteLevel") return std::make_unique<NoOp>();  // only adjusts offsets
  if (type == "RobertaProcessing" || type == "BertProcessing") return std::make_unique<ClsSep>(j);
  if (type == "Sequence") return std::make_unique<SequencePost>(j.at("processors"), lookup);
  fail(ErrorKind::Unsupported, "unsupported post_processor type '", type, "'");
}

}  // namespace ingot::tok
