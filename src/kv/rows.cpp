#include "kv/rows.h"

#include <algorithm>
#include <limits>

#include "util/error.h"

namespace ingot::kv {

Rows::Rows(std::vector<std::unique_ptr<SequenceCache>> rows) : rows_(std::move(rows)) {
  for (const auto& r : rows_) INGOT_CHECK(r != nullptr, "null row");
}

SequenceCache& Rows::row(size_t i) const {
  if (i >= rows_.size()) fail(ErrorKind::InvalidArgument, "row ", i, " of ", rows_.size());
  return *rows_[i];
}

std::vector<SequenceCache*> Rows::caches() const {
  std::vector<SequenceCache*> v;
  for (const auto& r : rows_) v.push_back(r.get());
  return v;
}

void Rows::push(std::unique_ptr<SequenceCache> seq) {
  INGOT_CHECK(seq != nullptr, "null row");
  rows_.push_back(std::move(seq));
}

void Rows::merge(Rows&& other) {
  for (auto& r : other.rows_) rows_.push_back(std::move(r));
  other.rows_.clear();
}

std::unique_ptr<SequenceCache> Rows::extract(size_t i) {
  if (i >= rows_.size()) fail(ErrorKind::InvalidArgument, "cannot extract row ", i, " of ", rows_.size());
  auto r = std::move(rows_[i]);
  rows_.erase(rows_.begin() + static_cast<std::ptrdiff_t>(i));
  return r;
}

void Rows::filter(const std::vector<size_t>& keep) {
  std::vector<std::unique_ptr<SequenceCache>> kept;
  for (size_t i : keep) {
    if (i >= rows_.size() || !rows_[i]) fail(ErrorKind::InvalidArgument, "filter keeps row ", i, " twice or out of range");
    kept.push_back(std::move(rows_[i]));
  }
  rows_ = std::move(kept);
}

std::vector<int64_t> Rows::offsets() const {
  std::vector<int64_t> v;
  for (const auto& r : rows_) v.push_back(r->offset());
  return v;
}

std::vector<int32_t> Rows::positions(int64_t n) const {
  std::vector<int32_t> v;
  for (int64_t off : offsets())
    for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<int32_t>(off + i));
  return v;
}

PaddedLayout left_pad_layout(const std::vector<int64_t>& kv_len, int64_t q_len) {
  PaddedLayout l;
  l.rows = static_cast<int64_t>(kv_len.size());
  l.q_len = q_len;
  for (int64_t n : kv_len) {
    if (n < q_len) fail(ErrorKind::InvalidArgument, "row holds ", n, " tokens, fewer than the ", q_len, " new ones");
    l.width = std::max(l.width, n);
  }
  for (int64_t n : kv_len) l.pad.push_back(l.width - n);
  return l;
}

std::vector<int32_t> left_pad_positions(const PaddedLayout& l) {
  std::vector<int32_t> v;
  for (int64_t b = 0; b < l.rows; ++b)
    for (int64_t i = 0; i < l.q_len; ++i)
      v.push_back(static_cast<int32_t>(l.width - l.pad[static_cast<size_t>(b)] - l.q_len + i));
  return v;
}

Tensor left_pad_mask(const PaddedLayout& l, int64_t window) {
  Tensor m = Tensor::empty({l.rows, l.q_len, l.width}, DType::F32);
  float* p = m.data<float>();
  const float neg = -std::numeric_limits<float>::infinity();
  for (int64_t b = 0; b < l.rows; ++b) {
    const int64_t pad = l.pad[static_cast<size_t>(b)];
    for (int64_t i = 0; i < l.q_len; ++i) {
      const int64_t col = l.width - l.q_len + i;  // the query's own key column
      for (int64_t j = 0; j < l.width; ++j) {
        const bool ok = j >= pad && j <= col && (window <= 0 || j > col - window);
        p[(b * l.q_len + i) * l.width + j] = ok ? 0.0f : neg;
      }
    }
  }
  return m;
}

}  // namespace ingot::kv
