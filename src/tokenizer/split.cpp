// Patterns, the five split behaviours and the byte-level alphabet, shared by
// normalizers, pre-tokenizers and decoders.
#include <array>

#include "tokenizer/components.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace ingot::tok {

std::string component_type(const json& j, const char* what) {
  if (!j.is_object()) fail(ErrorKind::BadFormat, what, " must be an object");
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) fail(ErrorKind::BadFormat, what, " has no \"type\"");
  return it->get<std::string>();
}

SplitBehavior parse_split_behavior(const json& j) {
  std::string b = j.get<std::string>();
  if (b == "Removed") return SplitBehavior::Removed;
  if (b == "Isolated") return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return SplitBehavior::Contiguous;
  fail(ErrorKind::Unsupported, "unknown split behavior '", b, "'");
}

Pattern::Pattern(const json& j, bool invert) : invert_(invert) {
  if (j.is_object() && j.contains("String")) {
    literal_ = j.at("String").get<std::string>();
  } else if (j.is_object() && j.contains("Regex")) {
    regex_ = std::make_unique<Regex>(j.at("Regex").get<std::string>());
  } else if (j.is_string()) {
    literal_ = j.get<std::string>();
  } else {
    fail(ErrorKind::BadFormat, "pattern must be {\"String\": ...} or {\"Regex\": ...}");
  }
}

void Pattern::spans(std::string_view text, std::vector<Span>& out) const {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, invert_});
    return;
  }
  std::vector<std::pair<size_t, size_t>> m;
  if (regex_) {
    regex_->find_all(text, m);
  } else if (!literal_.empty()) {
    for (size_t p = text.find(literal_); p != std::string_view::npos; p = text.find(literal_, p + literal_.size()))
      m.emplace_back(p, p + literal_.size());
  }
  size_t prev = 0;
  for (auto [s, e] : m) {
    if (prev != s) out.push_back({prev, s, invert_});
    out.push_back({s, e, !invert_});
    prev = e;
  }
  if (prev != text.size()) out.push_back({prev, text.size(), invert_});
}

void char_spans(std::string_view text, const std::function<bool(char32_t)>& pred, std::vector<Span>& out) {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t last = 0, i = 0;
  while (i < text.size()) {
    size_t b = i;
    char32_t c = next_cp(text, i);
    if (pred(c)) {
      if (last < b) out.push_back({last, b, false});
      out.push_back({b, i, true});
      last = i;
    }
  }
  if (last < text.size()) out.push_back({last, text.size(), false});
}

void split_piece(const Piece& piece, const std::vector<Span>& spans, SplitBehavior behavior, Pieces& out) {
  // (range, removed) pairs, following the reference's fold over matches.
  std::vector<Span> parts;
  parts.reserve(spans.size());
  bool prev_match = false;
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const Span& s : spans) parts.push_back({s.start, s.end, false});
      break;
    case SplitBehavior::Removed:
      parts = spans;
      break;
    case SplitBehavior::Contiguous:
      for (const Span& s : spans) {
        if (s.match == prev_match && !parts.empty()) parts.back().end = s.end;
        else parts.push_back({s.start, s.end, false});
        prev_match = s.match;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !prev_match && !parts.empty()) parts.back().end = s.end;
        else parts.push_back({s.start, s.end, false});
        prev_match = s.match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (size_t k = spans.size(); k-- > 0;) {
        const Span& s = spans[k];
        if (s.match && !prev_match && !parts.empty()) parts.back().start = s.start;
        else parts.push_back({s.start, s.end, false});
        prev_match = s.match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
  }
  for (const Span& p : parts) {
    if (p.match || p.end == p.start) continue;  // removed delimiter / empty part
    out.push_back({piece.text.substr(p.start, p.end - p.start), piece.at_start && p.start == 0, -1});
  }
}

std::string replace_all(std::string_view text, const Pattern& pattern, std::string_view content) {
  std::vector<Span> spans;
  pattern.spans(text, spans);
  std::string out;
  out.reserve(text.size());
  for (const Span& s : spans) {
    if (s.match) out += content;
    else out.append(text.substr(s.start, s.end - s.start));
  }
  return out;
}

namespace {
struct ByteTable {
  std::array<std::string, 256> to_char;
  std::array<int, 512> to_byte{};
  ByteTable() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      append_utf8(to_char[b], cp);
      to_byte[cp] = b;
    }
  }
};
const ByteTable& table() {
  static const ByteTable t;
  return t;
}
}  // namespace

const std::string& byte_to_char(uint8_t b) { return table().to_char[b]; }
int char_to_byte(char32_t c) { return c < 512 ? table().to_byte[c] : -1; }

}  // namespace ingot::tok
