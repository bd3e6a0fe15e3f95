// Added tokens (special or not) are cut out of the text before the model runs,
// exactly as the reference's AddedVocabulary does: leftmost-longest matching,
// then single_word / lstrip / rstrip; tokens with normalized=false match the
// raw text, the others match the normalized text.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/components.h"

namespace ingot::tok {

struct AddedToken {
  std::string content;
  std::string decoded;  // what decoding emits: the normalized form for normalized tokens
  int32_t id = -1;
  bool special = false, lstrip = false, rstrip = false, normalized = true, single_word = false;
};

class AddedVocab {
 public:
  // `normalizer` (may be null) rewrites the patterns of normalized tokens.
  // Fills each token's `decoded`.
  void build(std::vector<AddedToken> tokens, const Normalizer* normalizer);
  // Splits one piece on the raw-text (normalized=false) or normalized-text tokens.
  void split_raw(const Piece& piece, Pieces& out) const { split(raw_, piece, out); }
  void split_normalized(const Piece& piece, Pieces& out) const { split(norm_, piece, out); }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Trie {
    std::unordered_map<uint64_t, int32_t> edges;  // (node << 8 | byte) -> child
    std::vector<int32_t> terminal{-1};            // node -> index into tokens_, or -1
    bool first_byte[256] = {};
    bool empty = true;
    void insert(const std::string& pattern, int32_t token);
    // Longest pattern starting at text[pos]: its token index and length.
    bool longest_at(std::string_view text, size_t pos, int32_t* token, size_t* len) const;
  };
  void split(const Trie& trie, const Piece& piece, Pieces& out) const;

  std::vector<AddedToken> tokens_;
  Trie raw_, norm_;
};

}  // namespace ingot::tok
