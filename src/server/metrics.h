// Prometheus text exposition of the server's counters and latency
// histograms, plus the engine's live Stats.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ingot/engine.h"

namespace ingot::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  // Lines for `name` (buckets cumulative, then _sum and _count).
  std::string render(const std::string& name, const std::string& help) const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, plus +Inf last
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  // One finished HTTP request on `route` with `status`.
  void count_request(const std::string& route, int status);
  void observe_ttft(double seconds) { ttft_.observe(seconds); }
  void observe_tpot(double seconds) { tpot_.observe(seconds); }
  void observe_e2e(double seconds) { e2e_.observe(seconds); }
  void add_tokens(int64_t prompt, int64_t completion);
  void count_finish(const std::string& reason);
  // HTTP connection events: refused_client_limit, refused_total_limit,
  // header_timeout, io_timeout, stalled_stream.
  void count_http_event(const std::string& event);
  void set_http_connections(size_t open);
  std::string render(const engine::Stats& s) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, uint64_t> finishes_;
  std::map<std::string, uint64_t> http_events_;
  size_t http_connections_ = 0;
  int64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  Histogram ttft_, tpot_, e2e_;
};

}  // namespace ingot::server
