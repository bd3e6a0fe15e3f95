#include "server/listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <linux/tcp.h>  // tcp_info with tcpi_bytes_received (glibc's lacks it)
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"
#include "util/log.h"

namespace ingot::server {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTickMs = 100;
constexpr auto kLingerFor = std::chrono::seconds(2);
constexpr size_t kMaxLingering = 256;  // past this a refused socket is closed at once

int bind_listen(const std::string& host, int port, int* bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res); rc != 0)
    fail(ErrorKind::Io, "cannot resolve ", host, ": ", ::gai_strerror(rc));
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) fail(ErrorKind::Io, "cannot listen on ", host, ":", port, " (address in use or not permitted)");
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  *bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                          : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

void send_best_effort(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) return;  // a refusal is small; a client that cannot take it gets the close
    off += static_cast<size_t>(n);
  }
}

}  // namespace

std::string client_address(const sockaddr* addr, socklen_t len) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, buf, sizeof(buf));
  } else if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    const in6_addr& a6 = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) ::inet_ntop(AF_INET, a6.s6_addr + 12, buf, sizeof(buf));
    else ::inet_ntop(AF_INET6, &a6, buf, sizeof(buf));
  } else {
    return "unknown";
  }
  return buf;
}

uint64_t socket_bytes_received(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return 0;
  return info.tcpi_bytes_received;
}

size_t raise_fd_limit(size_t wanted) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return wanted;
  if (lim.rlim_cur == RLIM_INFINITY) return wanted;
  if (lim.rlim_cur < wanted) {
    rlim_t want = static_cast<rlim_t>(wanted);
    lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &lim);
    ::getrlimit(RLIMIT_NOFILE, &lim);
  }
  return static_cast<size_t>(lim.rlim_cur);
}

Listener::Listener(const std::string& host, int port, ConnectionTable& table, Hooks hooks)
    : table_(table), hooks_(std::move(hooks)) {
  listen_fd_ = bind_listen(host, port, &port_);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) fail(ErrorKind::Io, "cannot create the listener's event loop: ", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
}

Listener::~Listener() {
  for (auto& [fd, deadline] : lingering_) ::close(fd);
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_})
    if (fd >= 0) ::close(fd);
}

void Listener::stop() {
  stop_ = true;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

void Listener::run() {
  epoll_event events[64];
  auto next_tick = Clock::now();
  while (!stop_.load()) {
    int n = ::epoll_wait(epoll_fd_, events, 64, kTickMs);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == listen_fd_) accept_pending();
      else if (fd != wake_fd_) serve_lingering(fd);
    }
    auto now = Clock::now();
    if (now >= next_tick) {
      next_tick = now + std::chrono::milliseconds(kTickMs);
      expire_lingering();
      if (accept_paused_) {  // out of file descriptors a tick ago: try again
        accept_paused_ = false;
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = listen_fd_;
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
      }
      if (hooks_.tick) hooks_.tick();
    }
  }
}

void Listener::accept_pending() {
  while (true) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The pending connection stays queued; stop polling the listener until the next tick.
        log::warn("HTTP: cannot accept a connection (", std::strerror(errno), "); retrying shortly");
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        accept_paused_ = true;
      }
      return;
    }
    const auto* addr = reinterpret_cast<const sockaddr*>(&ss);
    std::string client = client_address(addr, len);
    auto admission = table_.admit(fd, client, Clock::now());
    if (admission == ConnectionTable::Admission::Admitted) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      hooks_.hand_off(fd, addr, len);
    } else {
      refuse(fd, admission, client);
    }
  }
}

void Listener::refuse(int fd, ConnectionTable::Admission why, const std::string& client) {
  char scratch[4096];
  while (::recv(fd, scratch, sizeof(scratch), MSG_DONTWAIT) > 0) {
  }
  send_best_effort(fd, hooks_.refusal(why, client));
  ::shutdown(fd, SHUT_WR);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  if (lingering_.size() >= kMaxLingering || ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    ::close(fd);
    return;
  }
  lingering_[fd] = Clock::now() + kLingerFor;
}

void Listener::serve_lingering(int fd) {
  char scratch[4096];
  while (true) {
    ssize_t n = ::recv(fd, scratch, sizeof(scratch), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    close_lingering(fd);  // the client closed (or the socket failed)
    return;
  }
}

void Listener::close_lingering(int fd) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  lingering_.erase(fd);
}

void Listener::expire_lingering() {
  auto now = Clock::now();
  for (auto it = lingering_.begin(); it != lingering_.end();) {
    if (now < it->second) {
      ++it;
      continue;
    }
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->first, nullptr);
    ::close(it->first);
    it = lingering_.erase(it);
  }
}

}  // namespace ingot::server
