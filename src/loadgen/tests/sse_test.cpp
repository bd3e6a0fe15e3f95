// The event-stream reader and the completion stream state: framing however
// the bytes are cut, what each event means, and how a stream's timings and
// failures are recorded.
#include <gtest/gtest.h>

#include "loadgen/sse.h"
#include "loadgen/stream.h"
#include "util/error.h"

namespace ingot::loadgen {
namespace {

std::vector<std::string> read_all(std::string_view s, size_t piece) {
  SseReader r;
  std::vector<std::string> ev;
  for (size_t i = 0; i < s.size(); i += piece) r.feed(s.substr(i, piece), ev);
  r.finish(ev);
  return ev;
}

TEST(SseReader, EventsSurviveAnySplit) {
  const std::string s =
      ": a comment\n\ndata: {\"a\":1}\n\nevent: x\ndata:{\"b\":2}\r\n\r\ndata: one\ndata: two\r\rid: 3\ndata: [DONE]\n\n";
  const std::vector<std::string> want = {"{\"a\":1}", "{\"b\":2}", "one\ntwo", "[DONE]"};
  for (size_t piece : {1, 2, 3, 7, 1000}) EXPECT_EQ(read_all(s, piece), want) << piece;
}

TEST(SseReader, FinishKeepsAnUnterminatedEvent) {
  EXPECT_EQ(read_all("data: last", 4), std::vector<std::string>{"last"});
  EXPECT_TRUE(read_all("", 1).empty());
  EXPECT_TRUE(read_all("\n\n\r\n", 1).empty());
}

TEST(SseReader, OverlongLineFails) {
  SseReader r;
  std::vector<std::string> ev;
  std::string big(SseReader::kMaxLineBytes, 'x');
  r.feed(big, ev);
  EXPECT_THROW(r.feed("y", ev), Error);
}

TEST(CompletionEvent, Kinds) {
  auto e = parse_completion_event(R"({"choices":[{"index":0,"text":"hey","finish_reason":null}],"usage":null})");
  EXPECT_EQ(e.kind, CompletionEvent::Kind::Chunk);
  EXPECT_EQ(e.text_bytes, 3u);
  EXPECT_EQ(e.finish_reason, "");
  EXPECT_FALSE(e.completion_tokens);

  e = parse_completion_event(R"({"choices":[{"text":"","finish_reason":"length"}]})");
  EXPECT_EQ(e.finish_reason, "length");
  EXPECT_EQ(e.text_bytes, 0u);

  e = parse_completion_event(R"({"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":16}})");
  EXPECT_EQ(e.kind, CompletionEvent::Kind::Chunk);
  EXPECT_EQ(e.completion_tokens.value_or(-1), 16);
  EXPECT_EQ(e.prompt_tokens.value_or(-1), 9);

  EXPECT_EQ(parse_completion_event(" [DONE] ").kind, CompletionEvent::Kind::Done);

  e = parse_completion_event(R"({"error":{"message":"out of memory","type":"server_error"}})");
  EXPECT_EQ(e.kind, CompletionEvent::Kind::Error);
  EXPECT_NE(e.error.find("out of memory"), std::string::npos);

  for (const char* bad : {"{", "[1,2]", "42", R"({"id":"x"})", R"({"choices":[7]})", R"({"choices":{}})"})
    EXPECT_EQ(parse_completion_event(bad).kind, CompletionEvent::Kind::Error) << bad;
  // A negative or fractional count is not a count.
  EXPECT_FALSE(parse_completion_event(R"({"choices":[],"usage":{"completion_tokens":-2}})").completion_tokens);
  EXPECT_FALSE(parse_completion_event(R"({"choices":[],"usage":{"completion_tokens":2.5}})").completion_tokens);
}

TEST(CompletionEvent, ErrorText) {
  EXPECT_EQ(error_text(R"({"error":{"message":"queue full"}})"), "queue full");
  EXPECT_EQ(error_text(R"({"error":"plain"})"), "plain");
  EXPECT_EQ(error_text("  Bad Gateway \n"), "Bad Gateway");
  EXPECT_LE(error_text(std::string(10000, 'x')).size(), 300u);
}

std::string chunk(const std::string& text, const char* finish = nullptr) {
  std::string f = finish ? std::string("\"") + finish + "\"" : "null";
  return "data: {\"choices\":[{\"index\":0,\"text\":\"" + text + "\",\"finish_reason\":" + f + "}]}\n\n";
}

TEST(CompletionStream, TimingsAndUsage) {
  CompletionStream s(1.0);
  s.on_bytes(": keep-alive\n\n", 1.1);
  s.on_bytes(chunk("a"), 1.5);
  s.on_bytes(chunk("") , 1.55);  // an empty text is no token arrival
  s.on_bytes(chunk("b") + chunk("c"), 1.7);
  s.on_bytes(chunk("d", "length"), 2.0);
  s.on_bytes("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":6}}\n\ndata: [DONE]\n\n", 2.1);
  RequestResult r;
  s.finish(2.2, r);
  EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.5);
  EXPECT_NEAR(r.latency_s, 1.2, 1e-12);
  ASSERT_EQ(r.itl_s.size(), 3u);
  EXPECT_NEAR(r.itl_s[0], 0.2, 1e-12);
  EXPECT_NEAR(r.itl_s[1], 0.0, 1e-12);
  EXPECT_NEAR(r.itl_s[2], 0.3, 1e-12);
  EXPECT_EQ(r.chunks, 4);
  EXPECT_TRUE(r.usage_reported);
  EXPECT_EQ(r.output_tokens, 6);  // usage wins over the chunk count
  EXPECT_EQ(r.usage_prompt_tokens, 5);
}

TEST(CompletionStream, WithoutUsageCountsChunks) {
  CompletionStream s(0);
  s.on_bytes(chunk("a") + chunk("b") + chunk("c", "length"), 0.5);
  RequestResult r;
  s.finish(0.6, r);  // a finish_reason without [DONE] still completes
  EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_FALSE(r.usage_reported);
  EXPECT_EQ(r.output_tokens, 3);
}

TEST(CompletionStream, FailuresAreRecorded) {
  {
    CompletionStream s(0);
    s.on_bytes(chunk("a"), 0.1);
    RequestResult r;
    s.finish(0.2, r);  // neither finish_reason nor [DONE]
    EXPECT_EQ(r.failure, Failure::Stream);
    EXPECT_EQ(r.chunks, 1);
  }
  {
    CompletionStream s(0);
    s.on_bytes(chunk("a") + "data: {\"error\":{\"message\":\"engine died\"}}\n\n" + chunk("b"), 0.1);
    EXPECT_TRUE(s.failed());
    RequestResult r;
    s.fail(Failure::Connection, "write aborted", 0.2, r);  // the first failure stands
    EXPECT_EQ(r.failure, Failure::Stream);
    EXPECT_NE(r.error.find("engine died"), std::string::npos);
    EXPECT_EQ(r.chunks, 1);
  }
  {
    CompletionStream s(0);
    s.on_bytes(chunk("a"), 0.1);
    RequestResult r;
    s.fail(Failure::Connection, "reset by peer", 0.3, r);
    EXPECT_EQ(r.failure, Failure::Connection);
    EXPECT_EQ(r.error, "reset by peer");
    EXPECT_DOUBLE_EQ(r.ttft_s, 0.1);
  }
  {
    CompletionStream s(0);
    s.on_bytes("data: not json\n\n", 0.1);
    RequestResult r;
    s.finish(0.2, r);
    EXPECT_EQ(r.failure, Failure::Stream);
    EXPECT_EQ(r.ttft_s, -1);
  }
}

TEST(CompletionStream, BytesAfterDoneAreIgnored) {
  CompletionStream s(0);
  s.on_bytes(chunk("a", "stop") + "data: [DONE]\n\n" + "data: garbage\n\n", 0.1);
  RequestResult r;
  s.finish(0.2, r);
  EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.output_tokens, 1);
}

}  // namespace
}  // namespace ingot::loadgen
