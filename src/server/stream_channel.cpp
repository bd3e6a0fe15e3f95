#include "server/stream_channel.h"

#include <algorithm>
#include <cstring>

namespace ingot::server {

StreamChannel::StreamChannel(size_t capacity, std::chrono::milliseconds stall_timeout,
                             std::function<void()> wake_reader)
    : capacity_(std::max<size_t>(1, capacity)), stall_timeout_(stall_timeout), wake_reader_(std::move(wake_reader)) {}

void StreamChannel::wake_if_parked(std::unique_lock<std::mutex>& lock) {
  bool wake = parked_;
  parked_ = false;
  lock.unlock();
  if (wake && wake_reader_) wake_reader_();
}

bool StreamChannel::write(std::string_view data) {
  std::unique_lock<std::mutex> lock(mu_);
  // A piece larger than the whole queue goes in once the queue is empty.
  auto room = [&] { return closed_ || buf_.size() - head_ == 0 || buf_.size() - head_ + data.size() <= capacity_; };
  if (!space_.wait_for(lock, stall_timeout_, room)) {
    stalled_ = closed_ = true;
    return false;
  }
  if (closed_) return false;
  if (head_ > 0 && head_ == buf_.size()) {
    buf_.clear();
    head_ = 0;
  }
  buf_.append(data);
  wake_if_parked(lock);
  return true;
}

void StreamChannel::finish() {
  std::unique_lock<std::mutex> lock(mu_);
  finished_ = true;
  wake_if_parked(lock);
}

StreamChannel::Read StreamChannel::read(char* out, size_t max, size_t* n, const std::function<void()>& park) {
  std::lock_guard<std::mutex> lock(mu_);
  *n = 0;
  size_t ready = buf_.size() - head_;
  if (ready > 0) {
    *n = std::min(ready, max);
    std::memcpy(out, buf_.data() + head_, *n);
    head_ += *n;
    if (head_ == buf_.size() || head_ > capacity_) {  // keep the buffer from growing
      buf_.erase(0, head_);
      head_ = 0;
    }
    space_.notify_all();
    return Read::Data;
  }
  if (closed_) return Read::Closed;
  if (finished_) return Read::End;
  if (park) park();
  parked_ = true;
  return Read::Parked;
}

void StreamChannel::close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  parked_ = false;
  space_.notify_all();
}

bool StreamChannel::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

bool StreamChannel::stalled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stalled_;
}

}  // namespace ingot::server
