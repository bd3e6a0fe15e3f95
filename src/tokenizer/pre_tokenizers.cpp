// Pre-tokenizers: cut normalized pieces into the words the model sees.
#include "tokenizer/components.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace ingot::tok {

namespace {

// GPT-2's word regex, used by ByteLevel when use_regex is set.
const char* kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Applies `fn(piece, out)` to every not-yet-resolved piece.
template <typename Fn>
void for_each_open(Pieces& pieces, Fn&& fn) {
  Pieces out;
  out.reserve(pieces.size() * 2);
  for (Piece& p : pieces) {
    if (p.id >= 0) out.push_back(std::move(p));
    else fn(p, out);
  }
  pieces = std::move(out);
}

class Split : public PreTokenizer {
 public:
  explicit Split(const json& j)
      : pattern_(j.at("pattern"), j.value("invert", false)), behavior_(parse_split_behavior(j.at("behavior"))) {}
  void pre_tokenize(Pieces& pieces) const override {
    std::vector<Span> spans;
    for_each_open(pieces, [&](Piece& p, Pieces& out) {
      pattern_.spans(p.text, spans);
      split_piece(p, spans, behavior_, out);
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
};

class ByteLevel : public PreTokenizer {
 public:
  explicit ByteLevel(const json& j)
      : add_prefix_space_(j.value("add_prefix_space", true)), use_regex_(j.value("use_regex", true)) {
    if (use_regex_) regex_ = std::make_unique<Pattern>(json{{"Regex", kGpt2Regex}});
  }
  void pre_tokenize(Pieces& pieces) const override {
    std::vector<Span> spans;
    for_each_open(pieces, [&](Piece& p, Pieces& out) {
      if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text = " " + p.text;
      size_t first = out.size();
      if (regex_) {
        regex_->spans(p.text, spans);
        split_piece(p, spans, SplitBehavior::Isolated, out);
      } else if (!p.text.empty()) {
        out.push_back(std::move(p));
      }
      for (size_t k = first; k < out.size(); ++k) {
        std::string mapped;
        mapped.reserve(out[k].text.size() * 2);
        for (char c : out[k].text) mapped += byte_to_char(static_cast<uint8_t>(c));
        out[k].text = std::move(mapped);
      }
    });
  }

 private:
  bool add_prefix_space_, use_regex_;
  std::unique_ptr<Pattern> regex_;
};

enum class Prepend { Always, Never, First };

class Metaspace : public PreTokenizer {
 public:
  explicit Metaspace(const json& j) {
    replacement_ = j.value("replacement", std::string("\xE2\x96\x81"));
    size_t i = 0;
    if (replacement_.empty() || find_invalid_utf8(replacement_) != std::string::npos)
      fail(ErrorKind::BadFormat, "Metaspace replacement must be one character");
    rep_cp_ = next_cp(replacement_, i);
    if (i != replacement_.size()) fail(ErrorKind::BadFormat, "Metaspace replacement must be one character");
    if (j.contains("prepend_scheme")) {
      std::string s = j.at("prepend_scheme").get<std::string>();
      if (s == "always") scheme_ = Prepend::Always;
      else if (s == "never") scheme_ = Prepend::Never;
      else if (s == "first") scheme_ = Prepend::First;
      else fail(ErrorKind::Unsupported, "unknown Metaspace prepend_scheme '", s, "'");
    } else {
      scheme_ = j.value("add_prefix_space", true) ? Prepend::Always : Prepend::Never;
    }
    split_ = j.value("split", true);
  }
  void pre_tokenize(Pieces& pieces) const override {
    std::vector<Span> spans;
    for_each_open(pieces, [&](Piece& p, Pieces& out) {
      std::string t;
      t.reserve(p.text.size() + 3);
      for (char c : p.text) {
        if (c == ' ') t += replacement_;
        else t += c;
      }
      bool starts = t.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == Prepend::Always || (scheme_ == Prepend::First && p.at_start)))
        t = replacement_ + t;
      p.text = std::move(t);
      if (split_) {
        char_spans(p.text, [&](char32_t c) { return c == rep_cp_; }, spans);
        split_piece(p, spans, SplitBehavior::MergedWithNext, out);
      } else if (!p.text.empty()) {
        out.push_back(std::move(p));
      }
    });
  }

 private:
  std::string replacement_;
  char32_t rep_cp_ = 0;
  Prepend scheme_ = Prepend::Always;
  bool split_ = true;
};

// Splits on a character predicate with a fixed behaviour.
class CharSplit : public PreTokenizer {
 public:
  CharSplit(std::function<bool(char32_t)> pred, SplitBehavior b) : pred_(std::move(pred)), behavior_(b) {}
  void pre_tokenize(Pieces& pieces) const override {
    std::vector<Span> spans;
    for_each_open(pieces, [&](Piece& p, Pieces& out) {
      char_spans(p.text, pred_, spans);
      split_piece(p, spans, behavior_, out);
    });
  }

 private:
  std::function<bool(char32_t)> pred_;
  SplitBehavior behavior_;
};

class SequencePre : public PreTokenizer {
 public:
  void add(std::unique_ptr<PreTokenizer> p) {
    if (p) parts_.push_back(std::move(p));
  }
  void pre_tokenize(Pieces& pieces) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j) {
  if (j.is_null()) return nullptr;
  std::string type = component_type(j, "pre_tokenizer");
  if (type == "Split") return std::make_unique<Split>(j);
  if (type == "ByteLevel") return std::make_unique<ByteLevel>(j);
  if (type == "Metaspace") return std::make_unique<Metaspace>(j);
  if (type == "Digits") {
    bool individual = j.value("individual_digits", false);
    return std::make_unique<CharSplit>(is_numeric, individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
  }
  if (type == "Punctuation") {
    auto b = j.contains("behavior") ? parse_split_behavior(j.at("behavior")) : SplitBehavior::Isolated;
    return std::make_unique<CharSplit>(is_punctuation, b);
  }
  if (type == "WhitespaceSplit") return std::make_unique<CharSplit>(is_whitespace, SplitBehavior::Removed);
  if (type == "CharDelimiterSplit") {
    std::string d = j.at("delimiter").get<std::string>();
    size_t i = 0;
    if (d.empty() || find_invalid_utf8(d) != std::string::npos) fail(ErrorKind::BadFormat, "bad delimiter");
    char32_t c = next_cp(d, i);
    return std::make_unique<CharSplit>([c](char32_t x) { return x == c; }, SplitBehavior::Removed);
  }
  if (type == "Whitespace") {
    // Keep the runs of \w+ or [^\w\s]+, drop the rest.
    auto seq = std::make_unique<SequencePre>();
    seq->add(std::make_unique<Split>(
        json{{"pattern", {{"Regex", R"(\w+|[^\w\s]+)"}}}, {"behavior", "Removed"}, {"invert", true}}));
    return seq;
  }
  if (type == "BertPreTokenizer") {
    auto seq = std::make_unique<SequencePre>();
    seq->add(std::make_unique<CharSplit>(is_whitespace, SplitBehavior::Removed));
    seq->add(std::make_unique<CharSplit>(is_punctuation, SplitBehavior::Isolated));
    return seq;
  }
  if (type == "Sequence") {
    auto seq = std::make_unique<SequencePre>();
    for (const json& p : j.at("pretokenizers")) seq->add(make_pre_tokenizer(p));
    return seq;
  }
  fail(ErrorKind::Unsupported, "unsupported pre_tokenizer type '", type, "'");
}

}  // namespace ingot::tok
