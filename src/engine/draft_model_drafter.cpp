#include "engine/draft_model_drafter.h"

#include <algorithm>

#include "kv/kinds.h"
#include "sampling/greedy.h"
#include "util/error.h"

namespace ingot::engine {

namespace {

class DraftModelSequence final : public SequenceDrafter {
 public:
  DraftModelSequence(Model& model, std::unique_ptr<kv::SequenceCache> cache, int64_t prefill_chunk)
      : model_(model), cache_(std::move(cache)), chunk_(prefill_chunk) {}

  void prefill(const std::vector<int32_t>& prompt) override {
    // All but the last token: propose() feeds that one for its logits.
    if (prompt.size() > 1) feed(sync(prompt, prompt.size() - 1));
  }

  std::vector<int32_t> propose(const std::vector<int32_t>& tokens, int64_t k) override {
    std::vector<int32_t> draft;
    if (k <= 0 || tokens.empty()) return draft;
    // Always feed at least the last token: its logits give the first draft token.
    std::vector<int32_t> pending = sync(tokens, tokens.size() - 1);
    pending.push_back(tokens.back());
    for (int64_t i = 0; i < k; ++i) {
      const int32_t next = feed(pending);
      draft.push_back(next);
      pending = {next};
    }
    return draft;
  }

 private:
  // Drops cached tokens that are not the first `n` of `tokens` (a rejected
  // draft) and returns those of the `n` not cached yet.
  std::vector<int32_t> sync(const std::vector<int32_t>& tokens, size_t n) {
    const auto end = tokens.begin() + static_cast<std::ptrdiff_t>(n);
    const auto common = static_cast<size_t>(std::mismatch(fed_.begin(), fed_.end(), tokens.begin(), end).first -
                                            fed_.begin());
    cache_->trim(static_cast<int64_t>(fed_.size() - common));
    fed_.resize(common);
    return {tokens.begin() + static_cast<std::ptrdiff_t>(common), end};
  }

  // Feeds `ids` in prefill chunks; the greedy token after the last one (-1
  // when there is none).
  int32_t feed(const std::vector<int32_t>& ids) {
    if (ids.empty()) return -1;
    Tensor logits;
    for (size_t at = 0; at < ids.size();) {
      const size_t n = std::min(ids.size() - at, static_cast<size_t>(chunk_));
      BatchInput in;
      in.add(cache_.get(), std::span(ids).subspan(at, n));
      logits = model_.forward(in);
      fed_.insert(fed_.end(), in.tokens.begin(), in.tokens.end());
      at += n;
    }
    Tensor row = logits.to(Device::CPU).contiguous();
    return sampling::greedy_token(row.data<float>(), model_.vocab_size());
  }

  Model& model_;
  std::unique_ptr<kv::SequenceCache> cache_;
  int64_t chunk_;
  std::vector<int32_t> fed_;  // the tokens whose K/V the cache holds
};

}  // namespace

DraftModelDrafter::DraftModelDrafter(Model& model, const std::string& kv, int64_t prefill_chunk)
    : model_(model), kv_(kv), prefill_chunk_(prefill_chunk) {
  if (!can_speculate(model_))
    fail(ErrorKind::InvalidArgument, "the draft model (", model_.config().model_type,
         ") keeps a recurrent state that cannot drop rejected tokens");
  if (prefill_chunk_ <= 0) fail(ErrorKind::InvalidArgument, "the draft model's prefill chunk must be positive");
  const kv::StoreKind kind = kv::parse_store_kind(kv_);
  if (kv::is_paged(kind) && !model_.make_cache(CacheOptions{kv_, {}}))
    pool_ = kv::Pool::create(model_.cache_layout(), model_.kv_dtype(), model_.device(), kv::pool_options(kind));
}

std::unique_ptr<SequenceDrafter> DraftModelDrafter::start() const {
  auto cache = pool_ ? pool_->new_sequence() : new_cache(model_, CacheOptions{kv_, {}});
  return std::make_unique<DraftModelSequence>(model_, std::move(cache), prefill_chunk_);
}

int64_t DraftModelDrafter::kv_bytes(int64_t tokens) const {
  const kv::StoreKind kind = kv::parse_store_kind(kv_);
  const auto layout = model_.cache_layout();
  return kv::bytes_for_tokens(layout, model_.kv_dtype(), kind, tokens) + kv::sequence_fixed_bytes(layout, kind);
}

}  // namespace ingot::engine
