#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace ingot::tok {

namespace {
constexpr size_t kCacheMaxWordBytes = 256;
constexpr size_t kCacheCapacity = 1 << 17;
constexpr int64_t kMaxId = 1 << 24;  // guards allocations against corrupt files
}  // namespace

void TokenIndex::reserve(size_t n) {
  entries_.reserve(n);
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  if (cap > slots_.size()) rehash(cap);
}

void TokenIndex::rehash(size_t cap) {
  slots_.assign(cap, -1);
  mask_ = cap - 1;
  for (size_t k = 0; k < entries_.size(); ++k) {
    size_t i = entries_[k].hash & mask_;
    while (slots_[i] >= 0) i = (i + 1) & mask_;
    slots_[i] = static_cast<int32_t>(k);
  }
}

void TokenIndex::set(std::string_view token, int32_t id) {
  if ((entries_.size() + 1) * 2 > slots_.size()) rehash(std::max<size_t>(16, slots_.size() * 2));
  uint64_t h = hash(token);
  size_t i = h & mask_;
  for (; slots_[i] >= 0; i = (i + 1) & mask_) {
    Entry& en = entries_[slots_[i]];
    if (en.hash == h && key(en) == token) {
      en.id = id;
      return;
    }
  }
  if (arena_.size() + token.size() > UINT32_MAX) fail(ErrorKind::BadFormat, "vocab too large");
  entries_.push_back({h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(token.size()), id});
  arena_.append(token);
  slots_[i] = static_cast<int32_t>(entries_.size() - 1);
}

void TokenIndex::find_many(const std::string_view* tokens, int32_t* out, size_t n) const {
  constexpr size_t kBatch = 64;
  uint64_t h[kBatch];
  for (size_t base = 0; base < n; base += kBatch) {
    const size_t m = std::min(kBatch, n - base);
    const std::string_view* t = tokens + base;
    if (slots_.empty()) {
      std::fill(out + base, out + base + m, -1);
      continue;
    }
    for (size_t k = 0; k < m; ++k) {
      h[k] = hash(t[k]);
      __builtin_prefetch(&slots_[h[k] & mask_]);
    }
    for (size_t k = 0; k < m; ++k) {
      const int32_t e = slots_[h[k] & mask_];
      if (e >= 0) __builtin_prefetch(&entries_[e]);
    }
    for (size_t k = 0; k < m; ++k) {
      const int32_t e = slots_[h[k] & mask_];
      if (e >= 0) __builtin_prefetch(arena_.data() + entries_[e].off);
    }
    for (size_t k = 0; k < m; ++k) {
      int32_t id = -1;
      for (size_t i = h[k] & mask_;; i = (i + 1) & mask_) {
        const int32_t e = slots_[i];
        if (e < 0) break;
        const Entry& en = entries_[e];
        if (en.hash == h[k] && key(en) == t[k]) {
          id = en.id;
          break;
        }
      }
      out[base + k] = id;
    }
  }
}

void MergeMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  used_ = 0;
}

void MergeMap::grow() {
  std::vector<Slot> old = std::move(slots_);
  reserve(old.size());
  for (const Slot& s : old)
    if (s.key != kEmpty) insert_or_assign(int32_t(s.key >> 32), int32_t(uint32_t(s.key)), s.rank, s.merged);
}

void MergeMap::insert_or_assign(int32_t a, int32_t b, int32_t rank, int32_t merged) {
  if (slots_.empty() || (used_ + 1) * 2 > slots_.size()) grow();
  uint64_t key = pack(a, b);
  for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == kEmpty) {
      s = {key, rank, merged};
      ++used_;
      return;
    }
    if (s.key == key) {
      s.rank = rank;
      s.merged = merged;
      return;
    }
  }
}

Bpe::Bpe(const json& m, BpeTables t) {
  if (!t.has_vocab) {
    const json& vocab = m.at("vocab");
    if (!vocab.is_object()) fail(ErrorKind::BadFormat, "model.vocab must be an object");
    for (auto it = vocab.begin(); it != vocab.end(); ++it) t.vocab.emplace_back(it.key(), json_int(it.value(), INT64_MIN, INT64_MAX, "vocab id"));
  }
  vocab_.reserve(t.vocab.size());
  int64_t max_id = -1;
  for (const auto& [tok, id] : t.vocab) {
    if (id < 0 || id >= kMaxId) fail(ErrorKind::BadFormat, "model.vocab: id ", id, " of '", tok, "' out of range");
    vocab_.set(tok, static_cast<int32_t>(id));
    max_id = std::max(max_id, id);
  }
  t.vocab.clear();
  t.vocab.shrink_to_fit();
  id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  has_id_.assign(static_cast<size_t>(max_id + 1), false);
  vocab_.for_each([&](std::string_view tok, int32_t id) {
    id_to_token_[id] = std::string(tok);
    has_id_[id] = true;
  });

  auto str_or_empty = [&](const char* key) {
    auto it = m.find(key);
    return (it == m.end() || it->is_null()) ? std::string() : it->get<std::string>();
  };
  prefix_ = str_or_empty("continuing_subword_prefix");
  suffix_ = str_or_empty("end_of_word_suffix");
  fuse_unk_ = m.contains("fuse_unk") && !m["fuse_unk"].is_null() && m["fuse_unk"].get<bool>();
  byte_fallback_ = m.contains("byte_fallback") && !m["byte_fallback"].is_null() && m["byte_fallback"].get<bool>();
  ignore_merges_ = m.contains("ignore_merges") && !m["ignore_merges"].is_null() && m["ignore_merges"].get<bool>();
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() > 0)
    fail(ErrorKind::Unsupported, "BPE dropout is not supported (non-deterministic encoding)");
  std::string unk = str_or_empty("unk_token");
  if (!unk.empty()) {
    int32_t id = vocab_.find(unk);
    if (id >= 0) unk_id_ = id;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_ids_[b] = vocab_.find(std::string_view(name));
  }

  if (!t.bad_merges.empty()) fail(ErrorKind::BadFormat, "model.merges: '", t.bad_merges[0], "' is not two tokens");
  if (!t.has_merges && m.contains("merges")) {
    const json& merges = m.at("merges");
    if (!merges.is_array()) fail(ErrorKind::BadFormat, "model.merges must be an array");
    for (const json& mj : merges) {
      if (mj.is_string()) {  // legacy "a b"
        std::string_view s = mj.get_ref<const std::string&>();
        size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          fail(ErrorKind::BadFormat, "model.merges: '", s, "' is not two tokens");
        t.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (mj.is_array() && mj.size() == 2) {
        t.merges.emplace_back(mj[0].get<std::string>(), mj[1].get<std::string>());
      } else {
        fail(ErrorKind::BadFormat, "model.merges: entry ", t.merges.size(), " is not a pair");
      }
    }
  }
  merges_.reserve(t.merges.size());
  // Resolved a block at a time so the vocab lookups of a block overlap (find_many).
  constexpr size_t kBlock = 256;
  std::vector<std::string> merged(kBlock);
  std::vector<std::string_view> keys(3 * kBlock);
  std::vector<int32_t> ids(3 * kBlock);
  int32_t rank = 0;
  for (size_t base = 0; base < t.merges.size(); base += kBlock) {
    const size_t m = std::min(kBlock, t.merges.size() - base);
    for (size_t k = 0; k < m; ++k) {
      const auto& [a, b] = t.merges[base + k];
      merged[k].assign(a);
      merged[k].append(b.size() >= prefix_.size() ? b.substr(prefix_.size()) : b);  // the reference drops the prefix bytes
      keys[3 * k] = a;
      keys[3 * k + 1] = b;
      keys[3 * k + 2] = merged[k];
    }
    vocab_.find_many(keys.data(), ids.data(), 3 * m);
    for (size_t k = 0; k < m; ++k) {
      const auto& [a, b] = t.merges[base + k];
      const int32_t ia = ids[3 * k], ib = ids[3 * k + 1], im = ids[3 * k + 2];
      if (ia < 0 || ib < 0) fail(ErrorKind::BadFormat, "model.merges: token '", ia < 0 ? a : b, "' is not in the vocab");
      if (im < 0) fail(ErrorKind::BadFormat, "model.merges: merged token '", merged[k], "' is not in the vocab");
      merges_.insert_or_assign(ia, ib, rank, im);
      ++rank;
    }
  }
}

std::optional<int32_t> Bpe::token_to_id(std::string_view token) const {
  int32_t id = vocab_.find(token);
  if (id < 0) return std::nullopt;
  return id;
}

std::optional<std::string_view> Bpe::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[id]) return std::nullopt;
  return std::string_view(id_to_token_[id]);
}

void Bpe::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    int32_t id = vocab_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  bool cacheable = word.size() < kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t first = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
  }
}

void Bpe::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool live;
  };
  std::vector<Symbol> sym;
  sym.reserve(w.size());
  auto add = [&](int32_t id) {
    int32_t n = static_cast<int32_t>(sym.size());
    sym.push_back({id, n - 1, n + 1, true});
  };
  int32_t pending_unk = -1;  // an unknown run waiting to be emitted (fuse_unk)
  std::string buf;
  size_t i = 0;
  while (i < w.size()) {
    size_t b = i;
    i += cp_len(static_cast<unsigned char>(w[i]));
    if (i > w.size()) i = w.size();
    std::string_view ch = w.substr(b, i - b);
    std::string_view key = ch;
    if ((b != 0 && !prefix_.empty()) || (i == w.size() && !suffix_.empty())) {
      buf.assign(b != 0 ? prefix_ : std::string());
      buf.append(ch);
      if (i == w.size()) buf.append(suffix_);
      key = buf;
    }
    int32_t id = vocab_.find(key);
    if (id >= 0) {
      if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
      add(id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : key) all &= byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
        for (char c : key) add(byte_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk >= 0) add(pending_unk);
  if (sym.empty()) return;
  sym.back().next = -1;

  struct Cand {
    int32_t rank, pos, merged;
    bool operator<(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<Cand> heap_storage;
  heap_storage.reserve(sym.size());
  std::priority_queue<Cand> heap(std::less<Cand>(), std::move(heap_storage));
  int32_t rank, merged;
  for (size_t k = 0; k + 1 < sym.size(); ++k)
    if (merges_.find(sym[k].id, sym[k + 1].id, &rank, &merged)) heap.push({rank, static_cast<int32_t>(k), merged});
  while (!heap.empty()) {
    Cand top = heap.top();
    heap.pop();
    Symbol& cur = sym[top.pos];
    if (!cur.live || cur.next < 0) continue;
    Symbol& right = sym[cur.next];
    // Stale entry: the pair at this position changed since it was queued.
    if (!merges_.find(cur.id, right.id, &rank, &merged) || merged != top.merged) continue;
    cur.id = top.merged;
    right.live = false;
    cur.next = right.next;
    if (cur.next >= 0) sym[cur.next].prev = top.pos;
    if (cur.prev >= 0 && merges_.find(sym[cur.prev].id, cur.id, &rank, &merged)) heap.push({rank, cur.prev, merged});
    if (cur.next >= 0 && merges_.find(cur.id, sym[cur.next].id, &rank, &merged)) heap.push({rank, top.pos, merged});
  }
  for (const Symbol& s : sym)
    if (s.live) out.push_back(s.id);
}

}  // namespace ingot::tok
