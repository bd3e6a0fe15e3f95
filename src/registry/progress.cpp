#include "registry/progress.h"

#include <cmath>

#include "util/error.h"

namespace ingot::registry {

std::string human_bytes(int64_t b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (std::fabs(v) >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string human_duration(double s) {
  if (s < 0 || !std::isfinite(s)) return "?";
  long t = std::lround(s);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

std::string Progress::format_line(int64_t done, int64_t total, double rate, bool bar) {
  std::string s;
  if (bar && total > 0) {
    const int width = 24;
    int fill = static_cast<int>(std::min<double>(1.0, static_cast<double>(done) / total) * width);
    s.push_back('[');
    s.append(fill, '#').append(width - fill, '.').append("] ");
  }
  s += human_bytes(done) + " / " + (total > 0 ? human_bytes(total) : std::string("?"));
  if (total > 0) s += str_cat(" (", static_cast<int>(100.0 * done / total), "%)");
  s += "  " + human_bytes(static_cast<int64_t>(rate)) + "/s";
  double eta = rate > 0 && total > 0 ? static_cast<double>(total - done) / rate : -1;
  s += "  ETA " + human_duration(eta);
  return s;
}

Progress::Progress(std::FILE* out, int64_t total, int64_t already, bool terminal)
    : out_(out), total_(total), start_bytes_(already), terminal_(terminal), done_(already),
      t0_(std::chrono::steady_clock::now()) {
  thread_ = std::thread([this] { loop(); });
}

Progress::~Progress() { finish(false); }

void Progress::loop() {
  const auto period = terminal_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(5000);
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    if (cv_.wait_for(lk, period, [this] { return stop_; })) break;
    draw(false);
  }
}

void Progress::draw(bool final_line) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const int64_t done = done_.load();
  const double rate = secs > 0 ? static_cast<double>(done - start_bytes_) / secs : 0;
  std::string line = format_line(done, total_, rate, terminal_);
  if (terminal_) std::fprintf(out_, "\r\033[K%s%s", line.c_str(), final_line ? "\n" : "");
  else std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void Progress::note(const std::string& line) {
  std::lock_guard<std::mutex> lk(mu_);
  if (terminal_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void Progress::finish(bool ok) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (finished_) return;
    finished_ = stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lk(mu_);
  if (ok || terminal_) draw(true);
}

}  // namespace ingot::registry
