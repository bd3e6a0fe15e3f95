// A bounded byte queue between the worker that produces a streamed response
// (an SSE generation) and the event loop that sends it. The producer never
// waits on a socket: a write that finds the queue full waits for the client
// to read, at most the stall deadline, then fails, so the handler cancels its
// generation and the engine frees the request's KV.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

namespace ingot::server {

class StreamChannel {
 public:
  // `wake_reader` runs (outside the lock) when data or the end arrives for a
  // reader that parked on an empty queue.
  StreamChannel(size_t capacity, std::chrono::milliseconds stall_timeout, std::function<void()> wake_reader);

  // Producer side. False once the consumer closed, or after the queue stayed
  // full for the stall deadline (the channel is then closed).
  bool write(std::string_view data);
  void finish();  // no more data

  enum class Read { Data, Parked, End, Closed };
  // Consumer side: copies up to `max` bytes into `out`. On an empty queue
  // runs `park` under the lock (so a wake-up cannot come before it) and
  // answers Parked; the next write or finish calls wake_reader.
  Read read(char* out, size_t max, size_t* n, const std::function<void()>& park);
  void close();  // the connection is gone: writes fail from now on
  bool closed() const;
  bool stalled() const;  // closed because the consumer stopped reading

 private:
  void wake_if_parked(std::unique_lock<std::mutex>& lock);
  const size_t capacity_;
  const std::chrono::milliseconds stall_timeout_;
  const std::function<void()> wake_reader_;
  mutable std::mutex mu_;
  std::condition_variable space_;
  std::string buf_;
  size_t head_ = 0;  // bytes of buf_ already read
  bool finished_ = false, closed_ = false, stalled_ = false, parked_ = false;
};

}  // namespace ingot::server
