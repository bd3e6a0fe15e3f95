// The listening socket and its accept loop, run on one thread: every new
// connection is admitted by the ConnectionTable and handed to the HTTP
// library, or answered with a ready-made refusal (503) and closed once the
// client has seen it. The same thread ticks every 100 ms for the head
// deadlines. Also raises the process's open-file limit so the connection
// cap fits.
#pragma once
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <unordered_map>

#include "server/connection_table.h"

namespace ingot::server {

class Listener {
 public:
  struct Hooks {
    // Takes ownership of an admitted, non-blocking socket.
    std::function<void(int fd, const sockaddr* addr, socklen_t len)> hand_off;
    // The full HTTP response (status line to body) sent to a refused connection.
    std::function<std::string(ConnectionTable::Admission, const std::string& client)> refusal;
    std::function<void()> tick;  // every ~100 ms
  };

  // Binds host:port (0: any free port). Throws ingot::Error when it cannot.
  Listener(const std::string& host, int port, ConnectionTable& table, Hooks hooks);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  int port() const { return port_; }
  // Accepts until stop() is called (from any thread).
  void run();
  void stop();

 private:
  void accept_pending();
  void refuse(int fd, ConnectionTable::Admission why, const std::string& client);
  void serve_lingering(int fd);
  void close_lingering(int fd);
  void expire_lingering();
  ConnectionTable& table_;
  Hooks hooks_;
  int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1, port_ = 0;
  bool accept_paused_ = false;
  std::atomic<bool> stop_{false};
  // Refused sockets, already answered and shut for writing, read until the
  // client closes (or a deadline) so a close with unread input does not
  // reset the connection before the client reads the refusal.
  std::unordered_map<int, std::chrono::steady_clock::time_point> lingering_;
};

// The peer's address as text ("127.0.0.1", "::1"); IPv4-mapped IPv6 as IPv4.
std::string client_address(const sockaddr* addr, socklen_t len);

// Bytes the TCP socket has received so far (0 when unknown).
uint64_t socket_bytes_received(int fd);

// Raises the soft RLIMIT_NOFILE towards `wanted` (at most the hard limit);
// returns the soft limit in force afterwards.
size_t raise_fd_limit(size_t wanted);

}  // namespace ingot::server
