#include "tokenizer/added_tokens.h"

#include "tokenizer/unicode.h"

namespace ingot::tok {

void AddedVocab::Trie::insert(const std::string& pattern, int32_t token) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (char c : pattern) {
    uint64_t key = (uint64_t(node) << 8) | static_cast<unsigned char>(c);
    auto it = edges.find(key);
    if (it == edges.end()) {
      int32_t child = static_cast<int32_t>(terminal.size());
      terminal.push_back(-1);
      it = edges.emplace(key, child).first;
    }
    node = it->second;
  }
  if (terminal[node] < 0) terminal[node] = token;
  first_byte[static_cast<unsigned char>(pattern[0])] = true;
  empty = false;
}

bool AddedVocab::Trie::longest_at(std::string_view text, size_t pos, int32_t* token, size_t* len) const {
  int32_t node = 0;
  bool found = false;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = edges.find((uint64_t(node) << 8) | static_cast<unsigned char>(text[i]));
    if (it == edges.end()) break;
    node = it->second;
    if (terminal[node] >= 0) {
      *token = terminal[node];
      *len = i + 1 - pos;
      found = true;
    }
  }
  return found;
}

void AddedVocab::build(std::vector<AddedToken> tokens, const Normalizer* normalizer) {
  tokens_ = std::move(tokens);
  for (size_t k = 0; k < tokens_.size(); ++k) {
    AddedToken& t = tokens_[k];
    t.decoded = t.content;
    if (t.normalized) {
      if (normalizer) normalizer->normalize(t.decoded);
      norm_.insert(t.decoded, static_cast<int32_t>(k));
    } else {
      raw_.insert(t.content, static_cast<int32_t>(k));
    }
  }
}

namespace {
char32_t last_cp(std::string_view s) {
  size_t b = s.size() - 1;
  while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
  return next_cp(s, b);
}
}  // namespace

void AddedVocab::split(const Trie& trie, const Piece& piece, Pieces& out) const {
  const std::string& s = piece.text;
  if (s.empty()) return;
  if (trie.empty) {
    out.push_back(piece);
    return;
  }
  auto emit = [&](size_t b, size_t e, int32_t id) {
    if (e <= b) return;
    out.push_back({s.substr(b, e - b), id < 0 && piece.at_start && b == 0, id});
  };
  size_t done = 0;  // end of the previous accepted match (the reference's start_offset)
  size_t pos = 0;   // where the next search starts
  while (pos < s.size()) {
    if (!trie.first_byte[static_cast<unsigned char>(s[pos])]) {
      ++pos;
      continue;
    }
    int32_t k;
    size_t len;
    if (!trie.longest_at(s, pos, &k, &len)) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + len;
    pos = stop;
    const AddedToken& t = tokens_[k];
    if (t.single_word) {
      bool start_ok = start == 0 || !is_word_char(last_cp(std::string_view(s).substr(0, start)));
      size_t j = stop;
      bool stop_ok = stop == s.size() || !is_word_char(next_cp(s, j));
      if (!start_ok || !stop_ok) continue;
    }
    if (t.lstrip) {
      size_t ns = start;
      while (ns > 0) {
        size_t b = ns - 1;
        while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
        size_t j = b;
        if (!is_whitespace(next_cp(s, j))) break;
        ns = b;
      }
      start = std::max(ns, done);
    }
    if (t.rstrip) {
      while (stop < s.size()) {
        size_t j = stop;
        if (!is_whitespace(next_cp(s, j))) break;
        stop = j;
      }
    }
    if (done < start) emit(done, start, -1);
    out.push_back({s.substr(start, stop - start), false, t.id});
    done = stop;
  }
  if (done < s.size()) emit(done, s.size(), -1);
}

}  // namespace ingot::tok
