// Tables and JSON of the benchmark output.
#include <gtest/gtest.h>

#include <cmath>

#include "loadgen/report.h"
#include "util/error.h"

namespace ingot::loadgen {
namespace {

TEST(Report, MarkdownTable) {
  std::string t = format_table({"name", "n"}, {{"alpha", "1"}, {"b", "1234"}});
  EXPECT_EQ(t,
            "| name  |    n |\n"
            "| ----- | ---: |\n"
            "| alpha |    1 |\n"
            "| b     | 1234 |\n");
  EXPECT_THROW(format_table({"a", "b"}, {{"only one"}}), Error);
  EXPECT_EQ(fixed(2.345, 1), "2.3");
}

LevelReport level_with_failures() {
  RequestResult ok;
  ok.prompt_len = 8;
  ok.ttft_s = 0.05;
  ok.latency_s = 0.35;
  ok.output_tokens = 4;
  ok.usage_reported = true;
  ok.chunks = 4;
  ok.itl_s = {0.1, 0.1, 0.1};
  ok.http_status = 200;
  RequestResult reset;
  reset.prompt_len = 8;
  reset.failure = Failure::Connection;
  reset.error = "Recv failure: Connection reset by peer";
  LevelReport l;
  l.concurrency = 2;
  l.results = {ok, reset};
  l.summary = summarize(l.results, 0.5, 4);
  return l;
}

TEST(Report, ServeTextNamesFailures) {
  std::string t = serve_report_text({level_with_failures()}, 4);
  EXPECT_NE(t.find("| concurrency |"), std::string::npos) << t;
  EXPECT_NE(t.find("TTFT ms p50 / p90 / p99"), std::string::npos);
  EXPECT_NE(t.find("| 2 "), std::string::npos);
  EXPECT_NE(t.find("concurrency 2: 1 of 2 requests failed (connection 1); first: Recv failure"), std::string::npos) << t;
  EXPECT_EQ(t.find("ignore_eos"), std::string::npos);
  // Asked for 5 tokens but got 4: the mismatch is named.
  LevelReport l = level_with_failures();
  l.summary = summarize(l.results, 0.5, 5);
  t = serve_report_text({l}, 5);
  EXPECT_NE(t.find("concurrency 2: 1 completed requests returned a token count other than 5"), std::string::npos) << t;
}

TEST(Report, RateLevelsAreLabelled) {
  LevelReport l = level_with_failures();
  l.request_rate = 2.5;
  l.concurrency = 0;
  std::string t = serve_report_text({l}, 4);
  EXPECT_NE(t.find("| request rate"), std::string::npos) << t;
  EXPECT_NE(t.find("2.50 req/s"), std::string::npos) << t;
  l.request_rate = INFINITY;
  EXPECT_EQ(level_json(l)["request_rate"], "inf");
}

TEST(Report, LevelJsonHoldsEverything) {
  nlohmann::json j = level_json(level_with_failures());
  EXPECT_EQ(j["concurrency"], 2);
  EXPECT_TRUE(j["request_rate"].is_null());
  EXPECT_EQ(j["requests"], 2);
  EXPECT_EQ(j["completed"], 1);
  EXPECT_EQ(j["errors"], 1);
  EXPECT_EQ(j["errors_by_kind"]["connection"], 1);
  EXPECT_EQ(j["errors_by_kind"]["http"], 0);
  EXPECT_DOUBLE_EQ(j["output_throughput"].get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(j["ttft_ms"]["p50"].get<double>(), 50.0);
  EXPECT_NEAR(j["tpot_ms"]["p50"].get<double>(), 100.0, 1e-9);
  ASSERT_EQ(j["per_request"].size(), 2u);
  EXPECT_EQ(j["per_request"][0]["itl_ms"].size(), 3u);
  EXPECT_TRUE(j["per_request"][0]["error"].is_null());
  EXPECT_EQ(j["per_request"][1]["error"]["kind"], "connection");
  EXPECT_TRUE(j["per_request"][1]["ttft_ms"].is_null());
}

}  // namespace
}  // namespace ingot::loadgen
