// Rows: a batch adapter over per-sequence stores, so sequences of different
// lengths decode together. Each row owns one SequenceCache; the model runs
// the rows as one packed batch (one SeqInput per row). Rows can be merged
// (new sequences join), extracted (one leaves, cache intact) or filtered
// (finished ones dropped) between steps.
//
// For backends that want a rectangular [rows, width] layout instead of a
// packed one, left_pad_* build the per-row positions and the additive mask of
// a left-padded batch: row b's keys are right-aligned in a window of
// width max(len), its pad columns are masked, and the query tokens (the last
// q_len keys of every row) see keys causally (and within `window`).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kv/cache.h"

namespace ingot::kv {

class Rows {
 public:
  Rows() = default;
  explicit Rows(std::vector<std::unique_ptr<SequenceCache>> rows);

  size_t size() const { return rows_.size(); }
  bool empty() const { return rows_.empty(); }
  SequenceCache& row(size_t i) const;
  std::vector<SequenceCache*> caches() const;

  void push(std::unique_ptr<SequenceCache> seq);
  // Appends other's rows after this one's (other is left empty).
  void merge(Rows&& other);
  // Removes row i and hands its cache back; later rows move up.
  std::unique_ptr<SequenceCache> extract(size_t i);
  // Keeps the rows at `keep` (in that order); the others are freed.
  void filter(const std::vector<size_t>& keep);

  // Position of each row's next token (its RoPE offset).
  std::vector<int64_t> offsets() const;
  // Positions for `n` new tokens of every row: offsets()[b] + i, row-major [rows, n].
  std::vector<int32_t> positions(int64_t n) const;

 private:
  std::vector<std::unique_ptr<SequenceCache>> rows_;
};

// Left-padded layout for rows whose caches will hold kv_len[b] tokens after
// this step (q_len of them new). Width S = max(kv_len).
struct PaddedLayout {
  int64_t rows = 0, q_len = 0, width = 0;
  std::vector<int64_t> pad;  // leading pad columns per row (S - kv_len[b])
};
PaddedLayout left_pad_layout(const std::vector<int64_t>& kv_len, int64_t q_len);
// RoPE positions [rows, q_len] of the query tokens: kv_len[b] - q_len + i.
std::vector<int32_t> left_pad_positions(const PaddedLayout& l);
// Additive mask float32 [rows, q_len, width]: 0 where query i of row b may
// see key column j (j >= pad[b], causal, window), -inf elsewhere.
Tensor left_pad_mask(const PaddedLayout& l, int64_t window = 0);

}  // namespace ingot::kv
