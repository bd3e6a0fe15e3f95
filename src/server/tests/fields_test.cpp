// Request-body validation, error shapes and SSE framing.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/sse.h"
#include "util/error.h"

namespace ingot::server {
namespace {

int status_of(const std::function<void()>& fn, std::string* param = nullptr) {
  try {
    fn();
  } catch (const ApiError& e) {
    if (param) *param = e.param();
    return e.status();
  }
  return 0;
}

TEST(Fields, Utf8Validation) {
  EXPECT_TRUE(is_valid_utf8("plain"));
  EXPECT_TRUE(is_valid_utf8("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xff"));
  EXPECT_FALSE(is_valid_utf8("\xc3"));              // truncated
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // > U+10FFFF
}

TEST(Fields, BodyParsing) {
  EXPECT_EQ(status_of([] { parse_json_body(""); }), 400);
  EXPECT_EQ(status_of([] { parse_json_body("{bad"); }), 400);
  EXPECT_EQ(status_of([] { parse_json_body("[1,2]"); }), 400);
  EXPECT_EQ(status_of([] { parse_json_body("{\"a\": \"\xff\"}"); }), 400);
  EXPECT_EQ(status_of([] { parse_json_body("{\"a\": 1} trailing"); }), 400);
  EXPECT_EQ(parse_json_body("{\"a\": 1}")["a"], 1);
}

TEST(Fields, TypedFieldsNameTheParam) {
  json j = json::parse(R"({"t": "hot", "n": 2.5, "k": 3, "b": 1, "s": 5, "arr": {}, "big": 1e30})");
  std::string param;
  EXPECT_EQ(status_of([&] { opt_number(j, "t", 0, 2); }, &param), 400);
  EXPECT_EQ(param, "t");
  EXPECT_EQ(status_of([&] { opt_number(j, "n", 0, 2); }, &param), 400);  // out of range
  EXPECT_EQ(status_of([&] { opt_int(j, "n", 0, 10); }, &param), 400);    // not an integer
  EXPECT_EQ(status_of([&] { opt_int(j, "big", 0, 10); }, &param), 400);
  EXPECT_EQ(*opt_int(j, "k", 0, 10), 3);
  EXPECT_EQ(status_of([&] { opt_bool(j, "b"); }, &param), 400);
  EXPECT_EQ(status_of([&] { opt_string(j, "s"); }, &param), 400);
  EXPECT_EQ(status_of([&] { opt_array(j, "arr"); }, &param), 400);
  EXPECT_FALSE(opt_string(j, "missing").has_value());
  EXPECT_EQ(status_of([&] { req_string(j, "missing"); }, &param), 400);
  EXPECT_EQ(param, "missing");
  json nul = json::parse(R"({"x": null})");
  EXPECT_FALSE(opt_number(nul, "x", 0, 1).has_value());
}

TEST(Fields, DumpNeverThrowsOnBadUtf8) {
  json j = {{"s", std::string("a\xff" "b")}};
  EXPECT_NO_THROW(dump_json(j));
}

TEST(ErrorShapes, OpenAI) {
  json e = openai_error_body(400, "bad temperature", "temperature", "");
  ASSERT_TRUE(e.contains("error"));
  EXPECT_EQ(e["error"]["message"], "bad temperature");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["param"], "temperature");
  EXPECT_TRUE(e["error"]["code"].is_null());
  EXPECT_EQ(openai_error_body(429, "full")["error"]["type"], "rate_limit_error");
  EXPECT_EQ(openai_error_body(500, "x")["error"]["type"], "server_error");
  EXPECT_EQ(openai_error_body(401, "x")["error"]["type"], "authentication_error");
}

TEST(ErrorShapes, Anthropic) {
  json e = anthropic_error_body(400, "max_tokens: required");
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["message"], "max_tokens: required");
  EXPECT_EQ(anthropic_error_body(429, "x")["error"]["type"], "rate_limit_error");
  EXPECT_EQ(anthropic_error_body(413, "x")["error"]["type"], "request_too_large");
  EXPECT_EQ(anthropic_error_body(500, "x")["error"]["type"], "api_error");
}

TEST(ErrorShapes, ClassifiesEngineErrors) {
  EXPECT_EQ(classify_exception(Error(ErrorKind::ResourceExhausted, "queue full")).status, 429);
  EXPECT_EQ(classify_exception(Error(ErrorKind::InvalidArgument, "bad")).status, 400);
  EXPECT_EQ(classify_exception(Error(ErrorKind::Internal, "bug")).status, 500);
  EXPECT_EQ(classify_exception(std::runtime_error("x")).status, 500);
  EXPECT_EQ(classify_exception(ApiError(404, "gone", "model")).param, "model");
}

TEST(Sse, Framing) {
  EXPECT_EQ(sse_data("{\"a\":1}"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_data("a\nb"), "data: a\ndata: b\n\n");
  EXPECT_EQ(sse_event("ping", "{}"), "event: ping\ndata: {}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  EXPECT_EQ(sse_comment()[0], ':');
}

}  // namespace
}  // namespace ingot::server
