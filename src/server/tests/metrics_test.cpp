// Prometheus text: counters, gauges from engine::Stats, histogram buckets.
#include <gtest/gtest.h>

#include "server/metrics.h"

namespace ingot::server {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(Metrics, HistogramIsCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(0.5);
  h.observe(7);
  std::string t = h.render("x_seconds", "help");
  EXPECT_TRUE(has_line(t, "# TYPE x_seconds histogram"));
  EXPECT_TRUE(has_line(t, "x_seconds_bucket{le=\"0.1\"} 1"));
  EXPECT_TRUE(has_line(t, "x_seconds_bucket{le=\"1\"} 3"));
  EXPECT_TRUE(has_line(t, "x_seconds_bucket{le=\"+Inf\"} 4"));
  EXPECT_TRUE(has_line(t, "x_seconds_sum 8.05"));
  EXPECT_TRUE(has_line(t, "x_seconds_count 4"));
}

TEST(Metrics, RendersEngineStatsAndCounters) {
  Metrics m;
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 400);
  m.add_tokens(10, 5);
  m.observe_ttft(0.02);
  engine::Stats s;
  s.running = 3;
  s.waiting = 2;
  s.kv_blocks_used = 25;
  s.kv_blocks_total = 100;
  s.prefix_hit_tokens = 30;
  s.prefix_lookup_tokens = 120;
  std::string t = m.render(s);
  EXPECT_TRUE(has_line(t, "ingot_http_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 2"));
  EXPECT_TRUE(has_line(t, "ingot_http_requests_total{route=\"/v1/chat/completions\",status=\"400\"} 1"));
  EXPECT_TRUE(has_line(t, "ingot_prompt_tokens_total 10"));
  EXPECT_TRUE(has_line(t, "ingot_generation_tokens_total 5"));
  EXPECT_TRUE(has_line(t, "ingot_requests_running 3"));
  EXPECT_TRUE(has_line(t, "ingot_requests_waiting 2"));
  EXPECT_TRUE(has_line(t, "ingot_kv_blocks_used 25"));
  EXPECT_TRUE(has_line(t, "ingot_kv_usage_ratio 0.25"));
  EXPECT_TRUE(has_line(t, "ingot_prefix_cache_hit_rate 0.25"));
  EXPECT_TRUE(has_line(t, "ingot_time_to_first_token_seconds_count 1"));
  // Every non-comment line is `name{labels} value`.
  size_t pos = 0;
  while (pos < t.size()) {
    size_t nl = t.find('\n', pos);
    std::string line = t.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty() || line[0] == '#') continue;
    EXPECT_NE(line.rfind(' '), std::string::npos) << line;
    EXPECT_EQ(line.rfind("ingot_", 0), 0u) << line;
  }
}

}  // namespace
}  // namespace ingot::server
