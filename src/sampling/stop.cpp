#include "sampling/stop.h"

#include <algorithm>

namespace ingot::sampling {

using engine::FinishReason;

StopChecker::StopChecker(const engine::StopParams& p, std::vector<int32_t> eos_ids,
                         const engine::TextDecoder* decoder)
    : p_(p), eos_(std::move(eos_ids)), decoder_(decoder) {
  if (decoder_) stream_ = decoder_->stream(true);
}

size_t StopChecker::holdback() const {
  // Longest suffix of pending_ that is a proper prefix of some stop string.
  size_t best = 0;
  for (const std::string& s : p_.stop_strings) {
    const size_t lim = std::min(s.size() - 1, pending_.size());
    for (size_t len = lim; len > best; --len)
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        best = len;
        break;
      }
  }
  return best;
}

StopResult StopChecker::push(int32_t token, int64_t n) {
  StopResult r;
  const bool is_stop_id = std::find(p_.stop_token_ids.begin(), p_.stop_token_ids.end(), token) !=
                          p_.stop_token_ids.end();
  const bool is_eos = !p_.ignore_eos && std::find(eos_.begin(), eos_.end(), token) != eos_.end();
  if (is_stop_id || is_eos) {
    // The stop token's own text is not part of the output.
    r.finished = true;
    r.reason = FinishReason::Stop;
    if (decoder_) {
      auto s = decoder_->stream(false);
      r.matched = s->push(token) + s->flush();
    }
    r.text = drain();
    return r;
  }
  if (stream_) pending_ += stream_->push(token);
  // Earliest stop-string occurrence in the text not yet released.
  size_t at = std::string::npos;
  const std::string* hit = nullptr;
  for (const std::string& s : p_.stop_strings) {
    size_t pos = pending_.find(s);
    if (pos != std::string::npos && (at == std::string::npos || pos < at)) {
      at = pos;
      hit = &s;
    }
  }
  if (hit) {
    r.finished = true;
    r.reason = FinishReason::Stop;
    r.matched = *hit;
    r.text = pending_.substr(0, at + (p_.include_stop_str ? hit->size() : 0));
    pending_.clear();
    return r;
  }
  if (n >= p_.max_tokens) {
    r.finished = true;
    r.reason = FinishReason::Length;
    r.text = drain();
    return r;
  }
  const size_t hold = holdback();
  r.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return r;
}

std::string StopChecker::drain() {
  std::string out = std::move(pending_);
  pending_.clear();
  if (stream_) out += stream_->flush();
  return out;
}

}  // namespace ingot::sampling
