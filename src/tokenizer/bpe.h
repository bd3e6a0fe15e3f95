// The BPE model: byte-level (GPT-2 / Llama 3 / Qwen) and SentencePiece-style
// with byte_fallback (Llama 2 / Mistral / Gemma). Merges run with a min-heap
// over pair ranks; results are cached per word.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/components.h"
#include "tokenizer/json_loader.h"

namespace ingot::tok {

struct StrHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StrMap = std::unordered_map<std::string, int32_t, StrHash, std::equal_to<>>;

// Token string -> id: one arena for the bytes, open addressing over entries
// that carry their hash (a 262k-entry vocab stays compact and cache-friendly).
class TokenIndex {
 public:
  void reserve(size_t n);
  void set(std::string_view token, int32_t id);  // inserts or overwrites
  int32_t find(std::string_view token) const {   // -1 when absent
    if (slots_.empty()) return -1;
    uint64_t h = hash(token);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      int32_t e = slots_[i];
      if (e < 0) return -1;
      const Entry& en = entries_[e];
      if (en.hash == h && key(en) == token) return en.id;
    }
  }
  // find() of n tokens at once: out[k] = find(tokens[k]). The lookups are
  // memory-bound (three dependent cache misses each), so the batch walks them
  // in stages, prefetching each stage's lines for all tokens before the next.
  void find_many(const std::string_view* tokens, int32_t* out, size_t n) const;
  size_t size() const { return entries_.size(); }
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (const Entry& e : entries_) fn(key(e), e.id);
  }

 private:
  struct Entry {
    uint64_t hash;
    uint32_t off, len;
    int32_t id;
  };
  static uint64_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }
  std::string_view key(const Entry& e) const { return std::string_view(arena_).substr(e.off, e.len); }
  void rehash(size_t cap);
  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<int32_t> slots_;
  size_t mask_ = 0;
};

// (left id, right id) -> (rank, merged id); open addressing for the hot loop.
class MergeMap {
 public:
  void reserve(size_t n);
  void insert_or_assign(int32_t a, int32_t b, int32_t rank, int32_t merged);
  // Returns false when the pair does not merge.
  bool find(int32_t a, int32_t b, int32_t* rank, int32_t* merged) const {
    if (slots_.empty()) return false;
    uint64_t key = pack(a, b);
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == kEmpty) return false;
      if (s.key == key) {
        *rank = s.rank;
        *merged = s.merged;
        return true;
      }
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0, merged = 0;
  };
  static uint64_t pack(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  static size_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
  void grow();
  std::vector<Slot> slots_;
  size_t mask_ = 0, used_ = 0;
};

class Bpe {
 public:
  // `tables` holds vocab/merges when the loader took them out of the DOM.
  Bpe(const json& model, BpeTables tables);
  // Appends the ids of one pre-tokenized word.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string_view> id_to_token(int32_t id) const;
  int64_t size() const { return static_cast<int64_t>(vocab_.size()); }
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  TokenIndex vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  MergeMap merges_;
  std::optional<int32_t> unk_id_;
  std::string prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  int32_t byte_ids_[256];  // <0xXX> tokens, -1 when absent

  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StrHash, std::equal_to<>> cache_;
};

}  // namespace ingot::tok
