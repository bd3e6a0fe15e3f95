// Percentiles, the per-level summary and the decode window.
#include <gtest/gtest.h>

#include "loadgen/stats.h"

namespace ingot::loadgen {
namespace {

TEST(Stats, PercentilesInterpolateLikeNumpy) {
  std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 5);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 4.6);  // numpy.percentile([1..5], 90)
  EXPECT_DOUBLE_EQ(percentile(v, 99), 4.96);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(median({1, 2, 3, 10}), 2.5);
  Distribution d = distribution(v);
  EXPECT_DOUBLE_EQ(d.mean, 3);
  EXPECT_EQ(d.count, 5);
}

RequestResult done(double start, double ttft, double latency, int64_t tokens, std::vector<double> itl = {}) {
  RequestResult r;
  r.prompt_len = 10;
  r.start_s = start;
  r.ttft_s = ttft;
  r.latency_s = latency;
  r.output_tokens = tokens;
  r.usage_reported = true;
  r.itl_s = std::move(itl);
  return r;
}

TEST(Stats, TpotFollowsTheProtocol) {
  EXPECT_DOUBLE_EQ(tpot_of(done(0, 0.1, 1.1, 11)), 0.1);  // (latency - TTFT) / (out - 1)
  EXPECT_LT(tpot_of(done(0, 0.1, 0.1, 1)), 0);             // one token: no TPOT
  EXPECT_LT(tpot_of(done(0, -1, 0.5, 4)), 0);              // no first token
}

TEST(Stats, SummaryCountsEveryRequest) {
  std::vector<RequestResult> rs = {done(0, 0.1, 1.1, 11, {0.1, 0.1}), done(0.2, 0.3, 2.3, 11, {0.2}),
                                   done(0.4, 0.2, 1.2, 9)};
  rs[2].usage_reported = false;
  RequestResult refused;
  refused.failure = Failure::Connection;
  refused.error = "connection refused";
  RequestResult late;
  late.failure = Failure::Timeout;
  late.error = "timed out";
  RequestResult again = refused;
  rs.push_back(refused);
  rs.push_back(late);
  rs.push_back(again);
  LevelSummary s = summarize(rs, 4.0, 11);
  EXPECT_EQ(s.requests, 6);
  EXPECT_EQ(s.completed, 3);
  EXPECT_EQ(s.errors(), 3);
  EXPECT_EQ(s.failures[static_cast<size_t>(Failure::Connection)], 2);
  EXPECT_EQ(s.failures[static_cast<size_t>(Failure::Timeout)], 1);
  EXPECT_EQ(s.error_samples, (std::vector<std::string>{"connection refused", "timed out"}));
  EXPECT_EQ(s.output_len_mismatch, 1);
  EXPECT_EQ(s.usage_reported, 2);
  EXPECT_EQ(s.output_tokens, 31);
  EXPECT_EQ(s.input_tokens, 30);
  EXPECT_DOUBLE_EQ(s.request_throughput, 0.75);
  EXPECT_DOUBLE_EQ(s.output_throughput, 31 / 4.0);
  EXPECT_DOUBLE_EQ(s.total_throughput, 61 / 4.0);
  EXPECT_EQ(s.ttft.count, 3);
  EXPECT_DOUBLE_EQ(s.ttft.p50, 0.2);
  EXPECT_EQ(s.tpot.count, 3);
  EXPECT_DOUBLE_EQ(s.tpot.p50, 0.125);  // 0.1, 0.2, 1.0 / 8
  EXPECT_EQ(s.itl.count, 3);
  EXPECT_DOUBLE_EQ(s.e2el.p50, 1.2);
}

TEST(Stats, EmptyLevel) {
  LevelSummary s = summarize({}, 0, 4);
  EXPECT_EQ(s.requests, 0);
  EXPECT_EQ(s.output_throughput, 0);
}

TEST(DecodeWindow, SequencesInStep) {
  // Two sequences, first tokens at 1.0 and 1.1 (prefill), then one token every 0.1 s.
  std::vector<std::vector<double>> a = {{1.0, 1.2, 1.3, 1.4, 1.5, 1.6}, {1.1, 1.2, 1.3, 1.4, 1.5, 1.6}};
  EXPECT_FALSE(decode_window_full(a, 6));
  EXPECT_TRUE(decode_window_full(a, 5));
  DecodeWindow w = decode_window(a, 3);
  EXPECT_NEAR(w.seconds, 0.3, 1e-12);  // from 1.1 to the third tokens after it, at 1.4
  EXPECT_EQ(w.tokens, 6);
  EXPECT_NEAR(w.tokens_per_s(), 20, 1e-9);
  // More tokens than arrived: each sequence gives what it has.
  w = decode_window(a, 50);
  EXPECT_NEAR(w.seconds, 0.5, 1e-12);
  EXPECT_EQ(w.tokens, 10);
}

TEST(DecodeWindow, ReadersWakeAFewMicrosecondsApart) {
  // Two sequences decoding one token a second, the second one's tokens seen 1 ms later:
  // every step still counts both tokens, and the rate is exact.
  std::vector<std::vector<double>> a = {{0.0, 1.0, 2.0, 3.0}, {0.001, 1.001, 2.001, 3.001}};
  DecodeWindow w = decode_window(a, 3);
  EXPECT_EQ(w.tokens, 6);
  EXPECT_NEAR(w.seconds, 3.0, 1e-12);
  EXPECT_NEAR(w.tokens_per_s(), 2.0, 1e-9);
}

TEST(DecodeWindow, StaggeredStarts) {
  // The first sequence decodes alone for two steps before the second one's prefill ends.
  std::vector<std::vector<double>> a = {{0, 1, 2, 3, 4, 5}, {2.5, 3, 4, 5}};
  DecodeWindow w = decode_window(a, 2);
  EXPECT_EQ(w.tokens, 4);  // 3 and 4 from each
  EXPECT_DOUBLE_EQ(w.seconds, 1.5);
}

TEST(DecodeWindow, ChunksOfSeveralTokens) {
  std::vector<std::vector<double>> a = {{0.5, 1.0, 1.0, 2.0, 2.0}};
  DecodeWindow w = decode_window(a, 4);
  EXPECT_DOUBLE_EQ(w.seconds, 1.5);
  EXPECT_EQ(w.tokens, 4);
}

TEST(DecodeWindow, Empty) {
  EXPECT_EQ(decode_window({}, 3).tokens, 0);
  EXPECT_EQ(decode_window({{1.0, 2.0}, {}}, 3).tokens, 0);
  EXPECT_EQ(decode_window({{1.0}}, 3).tokens, 0);  // only the prefill's token
  EXPECT_FALSE(decode_window_full({{1.0, 2.0}, {}}, 1));
  EXPECT_FALSE(decode_window_full({}, 1));
}

}  // namespace
}  // namespace ingot::loadgen
