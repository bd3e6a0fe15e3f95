#include "tokenizer/json_loader.h"

#include "util/error.h"

namespace ingot::tok {

namespace {

using Dom = nlohmann::detail::json_sax_dom_parser<json>;

class Sax {
 public:
  // text_bytes sizes the vocab and merges vectors up front: they are built
  // an entry at a time, and regrowing them copies (and faults in) megabytes.
  Sax(json& root, BpeTables* t, size_t text_bytes) : dom_(root), t_(t), guess_(text_bytes / kBytesPerEntryGuess) {}

  bool null() { return scalar([&] { return dom_.null(); }); }
  bool boolean(bool v) { return scalar([&] { return dom_.boolean(v); }); }
  bool number_integer(int64_t v) {
    if (mode_ == Mode::Vocab) return t_->vocab.emplace_back(std::move(key_), v), true;
    return scalar([&] { return dom_.number_integer(v); });
  }
  bool number_unsigned(uint64_t v) {
    if (mode_ == Mode::Vocab) return t_->vocab.emplace_back(std::move(key_), static_cast<int64_t>(v)), true;
    return scalar([&] { return dom_.number_unsigned(v); });
  }
  bool number_float(double v, const std::string& s) { return scalar([&] { return dom_.number_float(v, s); }); }
  bool string(std::string& v) {
    if (mode_ == Mode::Merges) {
      size_t sp = v.find(' ');
      if (sp == std::string::npos || v.find(' ', sp + 1) != std::string::npos) t_->bad_merges.push_back(v);
      else t_->merges.emplace_back(v.substr(0, sp), v.substr(sp + 1));
      return true;
    }
    if (mode_ == Mode::MergePair) {
      pair_.push_back(std::move(v));
      return true;
    }
    return scalar([&] { return dom_.string(v); });
  }
  bool binary(json::binary_t& v) { return scalar([&] { return dom_.binary(v); }); }

  bool start_object(size_t n) {
    if (mode_ != Mode::None) return unexpected();
    if (pending_ == Pending::Vocab) {
      pending_ = Pending::None;
      mode_ = Mode::Vocab;
      t_->has_vocab = true;
      t_->vocab.reserve(guess_);
      return true;
    }
    flush_pending();
    if (depth_ == 1 && top_key_ == "model") in_model_ = true;
    ++depth_;
    return dom_.start_object(n);
  }
  bool end_object() {
    if (mode_ == Mode::Vocab) return mode_ = Mode::None, true;
    --depth_;
    if (depth_ == 1) in_model_ = false;
    return dom_.end_object();
  }
  bool start_array(size_t n) {
    if (mode_ == Mode::Merges) return mode_ = Mode::MergePair, pair_.clear(), true;
    if (mode_ != Mode::None) return unexpected();
    if (pending_ == Pending::Merges) {
      pending_ = Pending::None;
      mode_ = Mode::Merges;
      t_->has_merges = true;
      t_->merges.reserve(guess_);
      return true;
    }
    flush_pending();
    ++depth_;
    return dom_.start_array(n);
  }
  bool end_array() {
    if (mode_ == Mode::MergePair) {
      if (pair_.size() != 2) return unexpected();
      t_->merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::Merges;
      return true;
    }
    if (mode_ == Mode::Merges) return mode_ = Mode::None, true;
    --depth_;
    return dom_.end_array();
  }
  bool key(std::string& k) {
    if (mode_ == Mode::Vocab) return key_ = std::move(k), true;
    if (mode_ != Mode::None) return unexpected();
    if (depth_ == 1) top_key_ = k;
    if (depth_ == 2 && in_model_ && (k == "vocab" || k == "merges")) {
      pending_ = k == "vocab" ? Pending::Vocab : Pending::Merges;
      return true;  // the key reaches the DOM only if its value is not the expected container
    }
    return dom_.key(k);
  }
  bool parse_error(size_t pos, const std::string&, const nlohmann::detail::exception& e) {
    fail(ErrorKind::BadFormat, "tokenizer.json: ", e.what());
  }

 private:
  // A byte-level BPE tokenizer.json spends about 75 bytes of text per vocab
  // entry and merge together; a smaller divisor over-reserves address space only.
  static constexpr size_t kBytesPerEntryGuess = 48;
  enum class Mode { None, Vocab, Merges, MergePair };
  enum class Pending { None, Vocab, Merges };

  template <typename Fn>
  bool scalar(Fn&& fn) {
    if (mode_ != Mode::None) return unexpected();
    flush_pending();
    return fn();
  }
  // The intercepted key had another kind of value: hand both to the DOM.
  void flush_pending() {
    if (pending_ == Pending::None) return;
    std::string k = pending_ == Pending::Vocab ? "vocab" : "merges";
    pending_ = Pending::None;
    dom_.key(k);
  }
  bool unexpected() {
    fail(ErrorKind::BadFormat, "tokenizer.json: model.",
         mode_ == Mode::Vocab ? "vocab values must be integers" : "merges must be strings or pairs of strings");
  }

  Dom dom_;
  BpeTables* t_;
  size_t guess_;
  Mode mode_ = Mode::None;
  Pending pending_ = Pending::None;
  int depth_ = 0;
  bool in_model_ = false;
  std::string top_key_, key_;
  std::vector<std::string> pair_;
};

}  // namespace

json parse_tokenizer_json(const std::string& text, BpeTables* tables) {
  json root;
  Sax sax(root, tables, text.size());
  try {
    json::sax_parse(text, &sax);
  } catch (const json::exception& e) {
    fail(ErrorKind::BadFormat, "tokenizer.json: ", e.what());
  }
  return root;
}

}  // namespace ingot::tok
