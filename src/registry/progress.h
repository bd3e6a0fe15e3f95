// Download progress on stderr: a one-line bar (bytes, rate, ETA) redrawn in
// place on a terminal, plain lines every few seconds otherwise.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace ingot::registry {

std::string human_bytes(int64_t bytes);
// "1:02:03" / "2:03"; "?" for negative.
std::string human_duration(double seconds);

class Progress {
 public:
  // `already` bytes were on disk before this run (resumed or cached).
  Progress(std::FILE* out, int64_t total, int64_t already, bool terminal);
  ~Progress();
  void add(int64_t delta) { done_.fetch_add(delta); }
  // A message on its own line (the bar is redrawn after it).
  void note(const std::string& line);
  // Stops the reporter and prints the final line.
  void finish(bool ok);
  // The line the reporter prints (exposed for tests).
  static std::string format_line(int64_t done, int64_t total, double rate, bool bar);

 private:
  void loop();
  void draw(bool final_line);

  std::FILE* out_;
  int64_t total_, start_bytes_;
  bool terminal_;
  std::atomic<int64_t> done_;
  std::chrono::steady_clock::time_point t0_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, finished_ = false;
  std::thread thread_;
};

}  // namespace ingot::registry
