#include "server/connection_table.h"

namespace ingot::server {

ConnectionTable::Admission ConnectionTable::admit(int fd, const std::string& client, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = by_fd_.find(fd); it != by_fd_.end()) drop(it);
  if (by_fd_.size() >= limits_.max_total) return Admission::TotalFull;
  size_t& from = per_client_[client];
  if (from >= limits_.max_per_client) {
    if (from == 0) per_client_.erase(client);
    return Admission::ClientFull;
  }
  ++from;
  Entry e;
  e.client = client;
  e.head_started = true;  // the first head's clock starts at the accept
  e.head_since = now;
  by_fd_.emplace(fd, std::move(e));
  return Admission::Admitted;
}

void ConnectionTable::drop(std::unordered_map<int, Entry>::iterator it) {
  auto pc = per_client_.find(it->second.client);
  if (pc != per_client_.end() && --pc->second == 0) per_client_.erase(pc);
  by_fd_.erase(it);
}

void ConnectionTable::release(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = by_fd_.find(fd); it != by_fd_.end()) drop(it);
}

void ConnectionTable::request_started(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = by_fd_.find(fd); it != by_fd_.end()) it->second.in_request = true;
}

void ConnectionTable::request_finished(int fd, uint64_t bytes_received, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return;
  it->second.in_request = false;
  it->second.head_started = false;
  it->second.head_since = now;
  it->second.bytes_at_idle = bytes_received;
}

size_t ConnectionTable::close_overdue(Clock::time_point now, const std::function<uint64_t(int)>& bytes_received,
                                      const std::function<void(int)>& close) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto& [fd, e] : by_fd_) {
    if (e.in_request) continue;
    if (!e.head_started) {
      if (bytes_received(fd) <= e.bytes_at_idle) continue;
      e.head_started = true;
      e.head_since = now;
    }
    if (now - e.head_since < limits_.header_timeout) continue;
    close(fd);
    e.in_request = true;  // closed once; the release follows when the socket goes
    ++n;
  }
  return n;
}

size_t ConnectionTable::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_fd_.size();
}

size_t ConnectionTable::open_from(const std::string& client) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = per_client_.find(client);
  return it == per_client_.end() ? 0 : it->second;
}

}  // namespace ingot::server
