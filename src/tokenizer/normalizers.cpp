// Normalizers: rewrite each non-added-token piece before pre-tokenization.
#include <utf8proc.h>

#include "tokenizer/components.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace ingot::tok {

namespace {

class UnicodeNorm : public Normalizer {
 public:
  explicit UnicodeNorm(NormForm f) : form_(f) {}
  void normalize(std::string& t) const override { t = unicode_normalize(t, form_); }

 private:
  NormForm form_;
};

class Lowercase : public Normalizer {
 public:
  void normalize(std::string& t) const override { t = to_lower(t); }
};

class Strip : public Normalizer {
 public:
  Strip(bool l, bool r) : left_(l), right_(r) {}
  void normalize(std::string& t) const override {
    size_t b = 0, e = t.size();
    if (left_) {
      while (b < e) {
        size_t i = b;
        if (!is_whitespace(next_cp(t, i))) break;
        b = i;
      }
    }
    if (right_) {
      while (e > b) {
        size_t s = e - 1;
        while (s > b && (static_cast<unsigned char>(t[s]) & 0xC0) == 0x80) --s;
        size_t i = s;
        if (!is_whitespace(next_cp(t, i))) break;
        e = s;
      }
    }
    t = t.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class StripAccents : public Normalizer {
 public:
  void normalize(std::string& t) const override {
    std::string out;
    size_t i = 0;
    while (i < t.size()) {
      size_t b = i;
      if (!is_combining_mark(next_cp(t, i))) out.append(t, b, i - b);
    }
    t = std::move(out);
  }
};

class Replace : public Normalizer {
 public:
  explicit Replace(const json& j) : pattern_(j.at("pattern")), content_(j.at("content").get<std::string>()) {}
  void normalize(std::string& t) const override { t = replace_all(t, pattern_, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string p) : prepend_(std::move(p)) {}
  void normalize(std::string& t) const override {
    if (!t.empty()) t = prepend_ + t;
  }

 private:
  std::string prepend_;
};

class ByteLevelNorm : public Normalizer {
 public:
  void normalize(std::string& t) const override {
    std::string out;
    out.reserve(t.size() * 2);
    for (char c : t) out += byte_to_char(static_cast<uint8_t>(c));
    t = std::move(out);
  }
};

class Bert : public Normalizer {
 public:
  explicit Bert(const json& j) {
    clean_ = j.value("clean_text", true);
    chinese_ = j.value("handle_chinese_chars", true);
    lower_ = j.value("lowercase", true);
    auto sa = j.find("strip_accents");
    strip_ = (sa == j.end() || sa->is_null()) ? lower_ : sa->get<bool>();
  }
  void normalize(std::string& t) const override {
    std::string out;
    size_t i = 0;
    while (i < t.size()) {
      size_t b = i;
      char32_t c = next_cp(t, i);
      if (clean_) {
        if (c == 0 || c == 0xFFFD || is_control(c)) continue;
        if (is_whitespace(c)) {
          out += ' ';
          continue;
        }
      }
      if (chinese_ && is_cjk(c)) {
        out += ' ';
        out.append(t, b, i - b);
        out += ' ';
        continue;
      }
      out.append(t, b, i - b);
    }
    if (strip_) {
      // Only non-spacing marks go here (StripAccents drops every mark).
      std::string nfd = unicode_normalize(out, NormForm::NFD), kept;
      for (size_t i = 0; i < nfd.size();) {
        size_t b = i;
        if (utf8proc_category(static_cast<utf8proc_int32_t>(next_cp(nfd, i))) != UTF8PROC_CATEGORY_MN)
          kept.append(nfd, b, i - b);
      }
      out = std::move(kept);
    }
    if (lower_) out = to_lower(out);
    t = std::move(out);
  }

 private:
  bool clean_, chinese_, lower_, strip_;
};

class SequenceNorm : public Normalizer {
 public:
  explicit SequenceNorm(const json& list) {
    for (const json& n : list) {
      auto p = make_normalizer(n);
      if (p) parts_.push_back(std::move(p));
    }
  }
  void normalize(std::string& t) const override {
    for (const auto& p : parts_) p->normalize(t);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j) {
  if (j.is_null()) return nullptr;
  std::string type = component_type(j, "normalizer");
  if (type == "NFC") return std::make_unique<UnicodeNorm>(NormForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNorm>(NormForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNorm>(NormForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNorm>(NormForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip") return std::make_unique<Strip>(j.value("strip_left", true), j.value("strip_right", true));
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Replace") return std::make_unique<Replace>(j);
  if (type == "Prepend") return std::make_unique<Prepend>(j.at("prepend").get<std::string>());
  if (type == "ByteLevel") return std::make_unique<ByteLevelNorm>();
  if (type == "BertNormalizer") return std::make_unique<Bert>(j);
  if (type == "Sequence") return std::make_unique<SequenceNorm>(j.at("normalizers"));
  fail(ErrorKind::Unsupported, "unsupported normalizer type '", type, "'");
}

}  // namespace ingot::tok
