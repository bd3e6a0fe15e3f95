// Open HTTP connections: the per-client and total caps, and the deadline for
// a request's head. Socket-free (the socket's received-byte count is passed
// in), so the rules are tested without a network.
//
// Head deadline: a connection's first request must arrive complete within
// `header_timeout` of the accept; a later request on a kept-alive connection
// within `header_timeout` of its first byte (seen as the socket's received
// bytes growing while no request is in progress). Idle connections are the
// HTTP library's to close (its inactivity timeout).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace ingot::server {

struct ConnectionLimits {
  size_t max_total = 4096;
  size_t max_per_client = 1024;
  std::chrono::milliseconds header_timeout{10000};
};

class ConnectionTable {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Admission { Admitted, TotalFull, ClientFull };

  explicit ConnectionTable(ConnectionLimits limits) : limits_(limits) {}

  // A new connection on socket `fd` from `client`. A stale entry under the
  // same fd (its socket was closed without a release) is dropped first.
  Admission admit(int fd, const std::string& client, Clock::time_point now);
  void release(int fd);
  // The head of a request is complete: no head deadline until it finishes.
  void request_started(int fd);
  // The response is done and the connection may carry another request;
  // `bytes_received` is the socket's count now.
  void request_finished(int fd, uint64_t bytes_received, Clock::time_point now);
  // Calls `close` (under the table's lock, so the socket cannot be released
  // and its number reused meanwhile) for every connection past its head
  // deadline; returns how many. `bytes_received(fd)` reads a socket's count.
  size_t close_overdue(Clock::time_point now, const std::function<uint64_t(int)>& bytes_received,
                       const std::function<void(int)>& close);

  size_t open() const;
  size_t open_from(const std::string& client) const;
  const ConnectionLimits& limits() const { return limits_; }

 private:
  struct Entry {
    std::string client;
    bool in_request = false;
    bool head_started = false;  // bytes of the next head have arrived
    Clock::time_point head_since;
    uint64_t bytes_at_idle = 0;
  };
  void drop(std::unordered_map<int, Entry>::iterator it);
  const ConnectionLimits limits_;
  mutable std::mutex mu_;
  std::unordered_map<int, Entry> by_fd_;
  std::map<std::string, size_t> per_client_;
};

}  // namespace ingot::server
