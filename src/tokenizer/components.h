// The stages of the Hugging Face tokenizer pipeline, each built from its
// tokenizer.json object: normalizer -> pre-tokenizer -> model -> post-processor,
// and the decoder chain back to text.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace ingot::tok {

// An integer field in [lo, hi]. nlohmann's get<int>() converts a float such as
// 1e300 with a plain cast (undefined behaviour); this refuses it instead.
int64_t json_int(const nlohmann::json& v, int64_t lo, int64_t hi, const char* what);

using json = nlohmann::json;

// One piece of the text on its way to the model. `id` >= 0 marks an added
// token already resolved; `at_start` says it begins at offset 0 of the input
// (Metaspace's prepend_scheme "first" depends on it).
struct Piece {
  std::string text;
  bool at_start = false;
  int32_t id = -1;
};
using Pieces = std::vector<Piece>;

// A contiguous range of a string and whether it is a delimiter match.
struct Span {
  size_t start, end;
  bool match;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
SplitBehavior parse_split_behavior(const json& j);

// A "pattern" object ({"String": s} or {"Regex": r}), optionally inverted.
class Pattern {
 public:
  Pattern(const json& j, bool invert = false);
  // Spans covering all of `text` in order (empty text -> one empty non-match).
  void spans(std::string_view text, std::vector<Span>& out) const;

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  bool invert_;
};
// Each character satisfying `pred` is its own match.
void char_spans(std::string_view text, const std::function<bool(char32_t)>& pred, std::vector<Span>& out);
// Cuts `piece` along `spans` per `behavior`, appending the non-empty parts.
void split_piece(const Piece& piece, const std::vector<Span>& spans, SplitBehavior behavior, Pieces& out);
// Replaces every match in `text` with `content`.
std::string replace_all(std::string_view text, const Pattern& pattern, std::string_view content);

// GPT-2's byte <-> printable character table.
const std::string& byte_to_char(uint8_t b);
// The byte for a byte-level character, or -1.
int char_to_byte(char32_t c);

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};
// null -> nullptr; an unknown "type" throws Unsupported naming it.
std::unique_ptr<Normalizer> make_normalizer(const json& j);

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits/rewrites `pieces` in place; pieces with id >= 0 pass through untouched.
  virtual void pre_tokenize(Pieces& pieces) const = 0;
};
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j);

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};
std::unique_ptr<Decoder> make_decoder(const json& j);

// Resolves a special token's name to its id while building post-processors.
using TokenLookup = std::function<std::optional<int32_t>(const std::string&)>;

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
  // How many ids process() adds to a single sequence (truncation leaves room for them).
  virtual size_t added_tokens() const = 0;
};
std::unique_ptr<PostProcessor> make_post_processor(const json& j, const TokenLookup& lookup);

// The "type" field of a component object; BadFormat when missing.
std::string component_type(const json& j, const char* what);

}  // namespace ingot::tok
