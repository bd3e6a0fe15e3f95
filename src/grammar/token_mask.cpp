#include "grammar/token_mask.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace ingot::grammar {

// Within this many bytes of the budget (closing text + end token), every
// allowed token is checked to leave room for closing the text; further away
// no single token can use the slack up.
constexpr int64_t kBudgetSlackBytes = 512;

namespace {

TokenTrie build_trie(const std::vector<std::string>& bytes, const std::vector<int32_t>& ids) {
  TokenTrie t;
  std::vector<int32_t> order = ids;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const std::string& x = bytes[static_cast<size_t>(a)];
    const std::string& y = bytes[static_cast<size_t>(b)];
    return x != y ? x < y : a < b;
  });
  std::vector<uint32_t> path;  // node index per depth
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& b = bytes[static_cast<size_t>(id)];
    size_t lcp = 0;
    if (prev)
      while (lcp < b.size() && lcp < prev->size() && b[lcp] == (*prev)[lcp]) ++lcp;
    lcp = std::min(lcp, path.size());
    while (path.size() > lcp) {
      t.skip_[path.back()] = static_cast<uint32_t>(t.byte_.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < b.size(); ++d) {
      path.push_back(static_cast<uint32_t>(t.byte_.size()));
      t.byte_.push_back(static_cast<uint8_t>(b[d]));
      t.depth_.push_back(static_cast<uint16_t>(d + 1));
      t.skip_.push_back(0);
      t.tok_.push_back(static_cast<uint32_t>(t.ids_.size()));
    }
    t.ids_.push_back(id);
    t.max_depth = std::max(t.max_depth, b.size());
    prev = &b;
  }
  for (uint32_t n : path) t.skip_[n] = static_cast<uint32_t>(t.byte_.size());
  t.tok_.push_back(static_cast<uint32_t>(t.ids_.size()));
  return t;
}

// Complete, valid UTF-8 (no overlongs, surrogates or code points past
// U+10FFFF) with no byte a JSON string must escape.
bool plain_string_text(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == '"' || c == '\\') return false;
      ++i;
      continue;
    }
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return false;
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto x = static_cast<unsigned char>(s[i + k]);
      if (k == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) return false;
    }
    i += n;
  }
  return true;
}

}  // namespace

Vocabulary::Vocabulary(std::vector<std::string> bytes) : bytes_(std::move(bytes)) {
  std::vector<int32_t> with_bytes, other;
  plain_in_string.assign(bytes_.size(), 0);
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (bytes_[i].empty()) continue;
    with_bytes.push_back(static_cast<int32_t>(i));
    if (plain_string_text(bytes_[i]))
      plain_in_string[i] = 1;
    else
      other.push_back(static_cast<int32_t>(i));
  }
  all = build_trie(bytes_, with_bytes);
  not_plain = build_trie(bytes_, other);
}

namespace {

// The byte-level alphabet: byte b is written as code point cp[b].
std::vector<char32_t> byte_alphabet() {
  std::vector<char32_t> cp(256);
  char32_t extra = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    cp[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : extra++;
  }
  return cp;
}

bool decode_utf8(const std::string& s, std::vector<char32_t>& out) {
  out.clear();
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (n == 0 || i + static_cast<size_t>(n) > s.size()) return false;
    char32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3F);
    out.push_back(cp);
    i += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::vector<std::string> token_bytes(const Tokenizer& tok) {
  const int64_t V = tok.vocab_size();
  std::vector<std::string> out(static_cast<size_t>(V));
  // Byte-level vocabularies spell a space as U+0120 'Ġ' and a newline as U+010A 'Ċ'.
  const bool byte_level = tok.token_to_id("\xC4\xA0").has_value() || tok.token_to_id("\xC4\x8A").has_value();
  std::vector<int> inverse(512, -1);
  if (byte_level) {
    auto cp = byte_alphabet();
    for (int b = 0; b < 256; ++b) inverse[cp[static_cast<size_t>(b)]] = b;
  }
  std::vector<char32_t> cps;
  for (int64_t id = 0; id < V; ++id) {
    const auto i = static_cast<int32_t>(id);
    if (tok.is_special(i)) continue;
    std::string piece = tok.id_to_token(i);
    std::string bytes;
    bool ok = decode_utf8(piece, cps);
    if (byte_level && ok) {
      for (char32_t c : cps) {
        if (c >= 512 || inverse[c] < 0) {
          ok = false;
          break;
        }
        bytes += static_cast<char>(inverse[c]);
      }
      if (!ok) bytes = tok.decode({i}, false);  // an added token written as plain text
    } else if (piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>') {
      bytes = std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
    } else {
      for (size_t k = 0; k < piece.size();) {
        if (piece.compare(k, 3, "\xE2\x96\x81") == 0) {
          bytes += ' ';
          k += 3;
        } else {
          bytes += piece[k++];
        }
      }
    }
    out[static_cast<size_t>(id)] = std::move(bytes);
  }
  return out;
}

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonAutomaton> automaton, std::shared_ptr<const Vocabulary> vocab)
    : automaton_(std::move(automaton)), vocab_(std::move(vocab)) {
  keep(automaton_->start(scratch_));
  states_.resize(vocab_->all.max_depth + 1);
}

// Copies the state out of the scratch arena (it is a short parent chain).
void JsonConstraint::keep(const Frame* top) {
  std::vector<const Frame*> chain;
  for (const Frame* f = top; f; f = f->parent) chain.push_back(f);
  std::vector<Frame> stack;
  stack.reserve(chain.size());
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    stack.push_back(**it);
    stack.back().parent = stack.size() > 1 ? &stack[stack.size() - 2] : nullptr;
  }
  stack_ = std::move(stack);
  scratch_.reset();
}

const std::vector<uint8_t>& JsonConstraint::allowed(int64_t tokens_left) {
  const Vocabulary& v = *vocab_;
  scratch_.reset();
  const Frame* cur = &stack_.back();
  // Budget: after a token, the bytes still needed to close the text plus the
  // end token must fit in the tokens left (one byte per token at worst).
  int64_t budget = std::numeric_limits<int64_t>::max(), closing = 0;
  if (tokens_left > 0) {
    closing = static_cast<int64_t>(automaton_->closing(cur).size());
    if (tokens_left <= closing + 1 + kBudgetSlackBytes) budget = tokens_left - 2;
  }
  // A plain token never lengthens a string's closing text, so when the
  // current one fits the budget every plain token does.
  const bool plain_string = closing <= budget && cur->kind == FrameKind::String &&
                            cur->sub == 0 &&
                            automaton_->schema().nodes[static_cast<size_t>(cur->node)].max_length < 0;
  if (plain_string) {
    allowed_ = v.plain_in_string;
    walk(v.not_plain, cur, budget);
  } else {
    allowed_.assign(static_cast<size_t>(v.size()), 0);
    walk(v.all, cur, budget);
  }
  return allowed_;
}

void JsonConstraint::walk(const TokenTrie& t, const Frame* cur, int64_t budget) {
  const size_t N = t.byte_.size();
  states_[0] = cur;
  for (size_t i = 0; i < N;) {
    const size_t d = t.depth_[i];
    const Frame* s = automaton_->step(states_[d - 1], t.byte_[i], scratch_);
    if (!s) {
      i = t.skip_[i];
      continue;
    }
    states_[d] = s;
    if (t.tok_[i] != t.tok_[i + 1] &&
        (budget == std::numeric_limits<int64_t>::max() ||
         static_cast<int64_t>(automaton_->closing(s).size()) <= budget))
      for (uint32_t k = t.tok_[i]; k < t.tok_[i + 1]; ++k) allowed_[static_cast<size_t>(t.ids_[k])] = 1;
    ++i;
  }
}

void JsonConstraint::apply(float* logits, int64_t vocab, int64_t tokens_left) {
  const auto& ok = allowed(tokens_left);
  const int64_t n = std::min<int64_t>(vocab, static_cast<int64_t>(ok.size()));
  constexpr float kNeg = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i)
    if (!ok[static_cast<size_t>(i)]) logits[i] = kNeg;
  for (int64_t i = n; i < vocab; ++i) logits[i] = kNeg;
}

bool JsonConstraint::accept(int32_t token) {
  if (token < 0 || token >= vocab_->size()) return false;
  const std::string& b = vocab_->bytes(token);
  if (b.empty()) return false;
  scratch_.reset();
  const Frame* s = automaton_->feed(&stack_.back(), b, scratch_);
  if (!s) return false;
  keep(s);
  text_ += b;
  return true;
}

size_t JsonConstraint::allowed_prefix(const std::vector<int32_t>& tokens) {
  scratch_.reset();
  const Frame* s = &stack_.back();
  size_t n = 0;
  for (; n < tokens.size(); ++n) {
    const int32_t t = tokens[n];
    if (t < 0 || t >= vocab_->size() || vocab_->bytes(t).empty()) break;
    s = automaton_->feed(s, vocab_->bytes(t), scratch_);
    if (!s) break;
  }
  scratch_.reset();
  return n;
}

bool JsonConstraint::complete() const { return automaton_->complete(&stack_.back()); }

}  // namespace ingot::grammar
