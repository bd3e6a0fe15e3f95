// The routes through the Router, with the fake engine, tokenizer and template.
#include <gtest/gtest.h>

#include "server/http_app.h"
#include "server/service.h"
#include "server/speech_worker.h"
#include "server/tests/fakes.h"

namespace ingot::server {
namespace {

using testing::ByteTokenizer;
using testing::FakeEngine;
using testing::LineTemplate;

class CaptureSink : public StreamSink {
 public:
  explicit CaptureSink(int max_writes = -1) : max_writes_(max_writes) {}
  bool write(std::string_view d) override {
    if (max_writes_ >= 0 && writes_ >= max_writes_) return false;
    ++writes_;
    data += d;
    return true;
  }
  std::string data;

 private:
  int max_writes_;
  int writes_ = 0;
};

// The `data:` payloads of an SSE body, in order.
std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find('\n', pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

std::vector<std::string> sse_event_names(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("event: ", pos)) != std::string::npos) {
    size_t end = body.find('\n', pos);
    out.push_back(body.substr(pos + 7, end - pos - 7));
    pos = end;
  }
  return out;
}

class RoutesTest : public ::testing::Test {
 protected:
  void SetUp() override { make({}); }
  void make(ServeOptions o) {
    o.model_id = "test-model";
    if (o.context_length == 4096) o.context_length = 512;
    router.reset();
    svc.reset();
    svc = std::make_unique<Service>(engine, tok, std::make_shared<LineTemplate>(), o);
    router = std::make_unique<Router>(*svc);
  }
  HttpResponse call(const std::string& method, const std::string& path, const std::string& body = "",
                    std::map<std::string, std::string> headers = {}) {
    HttpRequest r;
    r.method = method;
    r.path = path;
    r.body = body;
    r.headers = std::move(headers);
    return router->dispatch(r);
  }
  HttpResponse post(const std::string& path, const json& body) { return call("POST", path, body.dump()); }
  static json body_of(const HttpResponse& r) { return json::parse(r.body); }
  static std::string stream_of(const HttpResponse& r, int max_writes = -1) {
    EXPECT_TRUE(r.stream);
    CaptureSink sink(max_writes);
    r.stream(sink);
    return sink.data;
  }
  void expect_openai_error(const HttpResponse& r, int status, const std::string& param = "") {
    EXPECT_EQ(r.status, status) << r.body;
    json b = body_of(r);
    ASSERT_TRUE(b.contains("error")) << r.body;
    EXPECT_TRUE(b["error"]["message"].is_string());
    EXPECT_TRUE(b["error"]["type"].is_string());
    ASSERT_TRUE(b["error"].contains("param"));
    ASSERT_TRUE(b["error"].contains("code"));
    if (!param.empty()) {
      EXPECT_EQ(b["error"]["param"], param) << r.body;
    }
  }

  FakeEngine engine;
  ByteTokenizer tok;
  std::unique_ptr<Service> svc;
  std::unique_ptr<Router> router;
  json user_msg = json::array({{{"role", "user"}, {"content", "Hi"}}});
};

TEST_F(RoutesTest, HealthAndModels) {
  EXPECT_EQ(body_of(call("GET", "/health")), json({{"status", "ok"}}));
  json models = body_of(call("GET", "/v1/models"));
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "test-model");
  EXPECT_EQ(call("GET", "/v1/models/test-model").status, 200);
  expect_openai_error(call("GET", "/v1/models/other"), 404);
  expect_openai_error(call("GET", "/nope"), 404);
  expect_openai_error(call("GET", "/v1/chat/completions"), 405);
}

TEST_F(RoutesTest, ApiKeyOnEveryRouteButHealth) {
  ServeOptions o;
  o.api_key = "sekrit";
  make(o);
  EXPECT_EQ(call("GET", "/health").status, 200);
  expect_openai_error(call("GET", "/v1/models"), 401);
  expect_openai_error(call("GET", "/metrics"), 401);
  expect_openai_error(call("GET", "/v1/models", "", {{"authorization", "Bearer wrong"}}), 401);
  EXPECT_EQ(call("GET", "/v1/models", "", {{"authorization", "Bearer sekrit"}}).status, 200);
  EXPECT_EQ(call("GET", "/v1/models", "", {{"x-api-key", "sekrit"}}).status, 200);
  HttpResponse a = call("POST", "/v1/messages", "{}");
  EXPECT_EQ(a.status, 401);
  EXPECT_EQ(body_of(a)["error"]["type"], "authentication_error");
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_FALSE(constant_time_equal("", "a"));
}

TEST_F(RoutesTest, ChatCompletion) {
  HttpResponse r = post("/v1/chat/completions", {{"model", "test-model"}, {"messages", user_msg}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  json b = body_of(r);
  EXPECT_EQ(b["object"], "chat.completion");
  EXPECT_EQ(b["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(b["choices"][0]["message"]["content"], "Hello world");
  EXPECT_EQ(b["choices"][0]["finish_reason"], "stop");
  std::string prompt = "<|user|>Hi\n<|assistant|>";
  EXPECT_EQ(b["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(b["usage"]["completion_tokens"], 11);
  EXPECT_EQ(b["usage"]["total_tokens"], prompt.size() + 11);
  ASSERT_EQ(engine.st->requests.size(), 1u);
  EXPECT_EQ(tok.decode(engine.st->requests[0].prompt, false), prompt);
  EXPECT_EQ(engine.st->requests[0].sampling.temperature, 0.0f);
}

TEST_F(RoutesTest, ChatMapsRequestFields) {
  json body = {{"messages", json::array({{{"role", "developer"}, {"content", json::array({{{"type", "text"}, {"text", "Be brief."}}})}},
                                         {{"role", "user"}, {"content", "Hi"}}})},
               {"max_tokens", 5}, {"top_p", 0.5}, {"top_k", 7}, {"min_p", 0.1}, {"seed", 42},
               {"stop", json::array({"END", "STOP"})}, {"presence_penalty", 1.0}, {"logit_bias", {{"65", 5}}}};
  HttpResponse r = post("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(body_of(r)["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body_of(r)["choices"][0]["message"]["content"], "Hello");
  const engine::Request& q = engine.st->requests.back();
  EXPECT_EQ(q.stop.max_tokens, 5);
  EXPECT_FLOAT_EQ(q.sampling.top_p, 0.5f);
  EXPECT_EQ(q.sampling.top_k, 7);
  EXPECT_EQ(*q.sampling.seed, 42u);
  EXPECT_EQ(q.stop.stop_strings, (std::vector<std::string>{"END", "STOP"}));
  EXPECT_FLOAT_EQ(q.sampling.logit_bias.at(65), 5.0f);
  EXPECT_EQ(tok.decode(q.prompt, false), "<|system|>Be brief.\n<|user|>Hi\n<|assistant|>");
}

TEST_F(RoutesTest, ChatStreamWithUsage) {
  HttpResponse r = post("/v1/chat/completions",
                        {{"messages", user_msg}, {"stream", true}, {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/event-stream");
  auto payloads = sse_payloads(stream_of(r));
  ASSERT_GE(payloads.size(), 4u);
  EXPECT_EQ(payloads.back(), "[DONE]");
  json first = json::parse(payloads[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text, finish;
  for (size_t i = 0; i + 2 < payloads.size(); ++i) {
    json c = json::parse(payloads[i]);
    EXPECT_TRUE(c.contains("usage") && c["usage"].is_null());
    auto& d = c["choices"][0]["delta"];
    if (d.contains("content")) text += d["content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, "Hello world");
  EXPECT_EQ(finish, "stop");
  json usage = json::parse(payloads[payloads.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 11);
}

TEST_F(RoutesTest, ToolCallsWholeAndStreamed) {
  ServeOptions o;
  o.tool_format = ToolFormat::Hermes;
  make(o);
  engine.st->reply = [](const engine::Request&) {
    return std::string("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  };
  json tools = json::array({{{"type", "function"},
                             {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}});
  HttpResponse r = post("/v1/chat/completions", {{"messages", user_msg}, {"tools", tools}});
  ASSERT_EQ(r.status, 200) << r.body;
  json b = body_of(r);
  EXPECT_EQ(b["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(b["choices"][0]["message"]["content"].is_null());
  json call = b["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>())["city"], "Paris");
  EXPECT_NE(tok.decode(engine.st->requests.back().prompt, false).find("<|tool|>get_weather"), std::string::npos);

  auto payloads = sse_payloads(stream_of(post("/v1/chat/completions", {{"messages", user_msg}, {"tools", tools}, {"stream", true}})));
  int calls = 0;
  std::string finish;
  for (auto& p : payloads) {
    if (p == "[DONE]") continue;
    json c = json::parse(p);
    auto& d = c["choices"][0]["delta"];
    if (d.contains("content")) {
      EXPECT_EQ(d["content"].get<std::string>().find('<'), std::string::npos) << p;
    }
    if (d.contains("tool_calls")) {
      ++calls;
      EXPECT_EQ(d["tool_calls"][0]["index"], 0);
      EXPECT_EQ(d["tool_calls"][0]["function"]["name"], "get_weather");
    }
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(finish, "tool_calls");
}

TEST_F(RoutesTest, ReasoningContent) {
  ServeOptions o;
  o.template_thinks = true;
  make(o);
  engine.st->reply = [](const engine::Request&) { return std::string("<think>hmm</think>Answer"); };
  json b = body_of(post("/v1/chat/completions", {{"messages", user_msg}}));
  EXPECT_EQ(b["choices"][0]["message"]["reasoning_content"], "hmm");
  EXPECT_EQ(b["choices"][0]["message"]["content"], "Answer");
}

TEST_F(RoutesTest, Logprobs) {
  json b = body_of(post("/v1/chat/completions", {{"messages", user_msg}, {"logprobs", true}, {"top_logprobs", 2}}));
  json lp = b["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 11u);
  EXPECT_EQ(lp[0]["token"], "H");
  EXPECT_FLOAT_EQ(lp[0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(lp[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(engine.st->requests.back().sampling.top_logprobs, 2);
}

TEST_F(RoutesTest, ValidationErrors) {
  expect_openai_error(call("POST", "/v1/chat/completions", "{not json"), 400);
  expect_openai_error(call("POST", "/v1/chat/completions", "\xff\xfe"), 400);
  expect_openai_error(call("POST", "/v1/chat/completions", "[]"), 400);
  expect_openai_error(post("/v1/chat/completions", json::object()), 400, "messages");
  expect_openai_error(post("/v1/chat/completions", {{"messages", "hi"}}), 400, "messages");
  expect_openai_error(post("/v1/chat/completions", {{"messages", json::array()}}), 400, "messages");
  expect_openai_error(post("/v1/chat/completions", {{"messages", user_msg}, {"temperature", "hot"}}), 400, "temperature");
  expect_openai_error(post("/v1/chat/completions", {{"messages", user_msg}, {"temperature", 5}}), 400, "temperature");
  expect_openai_error(post("/v1/chat/completions", {{"messages", user_msg}, {"max_tokens", 0}}), 400, "max_tokens");
  expect_openai_error(post("/v1/chat/completions", {{"messages", user_msg}, {"n", 1.5}}), 400, "n");
  expect_openai_error(post("/v1/chat/completions", {{"messages", user_msg}, {"stream", "yes"}}), 400, "stream");
  expect_openai_error(post("/v1/chat/completions", {{"messages", user_msg}, {"stop", 3}}), 400, "stop");
  expect_openai_error(post("/v1/chat/completions", {{"messages", user_msg}, {"logit_bias", {{"999999", 1}}}}), 400, "logit_bias");
  expect_openai_error(post("/v1/chat/completions", {{"messages", user_msg}, {"tools", json::array({1})}}), 400, "tools[0]");
  expect_openai_error(post("/v1/chat/completions", {{"messages", json::array({{{"role", "wizard"}, {"content", "x"}}})}}),
                      400, "messages[0].role");
  expect_openai_error(post("/v1/chat/completions",
                           {{"messages", json::array({{{"role", "user"}, {"content", json::array({{{"type", "image_url"}}})}}})}}),
                      400);
  EXPECT_EQ(engine.st->submitted.load(), 0);
}

TEST_F(RoutesTest, AnyModelNameMeansTheServedModel) {
  // Clients send their own names (Anthropic SDKs a Claude model, OpenAI ones gpt-*): one served model answers all.
  for (const char* name : {"gpt-4", "claude-sonnet-4-5", "/etc/passwd"}) {
    HttpResponse r = post("/v1/chat/completions", {{"model", name}, {"messages", user_msg}});
    ASSERT_EQ(r.status, 200) << name << ": " << r.body;
    EXPECT_EQ(body_of(r)["model"], "test-model") << "the reply names the model that answered";
  }
  HttpResponse a = post("/v1/messages", {{"model", "claude-sonnet-4-5"}, {"max_tokens", 5}, {"messages", user_msg}});
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(body_of(a)["model"], "test-model");
  EXPECT_EQ(post("/v1/completions", {{"model", "gpt-3.5-turbo-instruct"}, {"prompt", "Hi"}, {"max_tokens", 2}}).status,
            200);
  EXPECT_EQ(post("/v1/messages/count_tokens", {{"model", "claude-3-haiku"}, {"messages", user_msg}}).status, 200);
  EXPECT_EQ(engine.st->submitted.load(), 5);
  // A lookup by id is not a request to generate: only the served id is listed.
  expect_openai_error(call("GET", "/v1/models/gpt-4"), 404);
}

TEST_F(RoutesTest, TheSpeechModelIsNotATextModel) {
  SpeechWorker whisper([](const SpeechJob&) { return speech::Transcript{}; }, "whisper-tiny", {"/m/whisper-tiny"}, 1);
  svc->set_speech(&whisper);
  for (const char* name : {"whisper-tiny", "/m/whisper-tiny"})
    expect_openai_error(post("/v1/chat/completions", {{"model", name}, {"messages", user_msg}}), 404, "model");
  EXPECT_EQ(post("/v1/chat/completions", {{"model", "gpt-4"}, {"messages", user_msg}}).status, 200);
  svc->set_speech(nullptr);
}

TEST_F(RoutesTest, StrictModelNameRefusesOtherNames) {
  ServeOptions o;
  o.strict_model_name = true;
  o.model_aliases = {"/models/test-model.gguf", "test-model.gguf"};
  make(o);
  expect_openai_error(post("/v1/chat/completions", {{"model", "gpt-4"}, {"messages", user_msg}}), 404, "model");
  HttpResponse a = post("/v1/messages", {{"model", "claude-sonnet-4-5"}, {"max_tokens", 5}, {"messages", user_msg}});
  EXPECT_EQ(a.status, 404) << a.body;
  EXPECT_EQ(body_of(a)["type"], "error");
  EXPECT_EQ(engine.st->submitted.load(), 0);
  for (const char* name : {"test-model", "default", "/models/test-model.gguf", "test-model.gguf"})
    EXPECT_EQ(post("/v1/chat/completions", {{"model", name}, {"messages", user_msg}}).status, 200) << name;
  EXPECT_EQ(post("/v1/chat/completions", {{"messages", user_msg}}).status, 200) << "no model field";
}

TEST_F(RoutesTest, TooLongPromptIs400) {
  json long_msg = json::array({{{"role", "user"}, {"content", std::string(600, 'x')}}});
  HttpResponse r = post("/v1/chat/completions", {{"messages", long_msg}});
  expect_openai_error(r, 400, "messages");
  EXPECT_EQ(body_of(r)["error"]["code"], "context_length_exceeded");
  // max_tokens past the context is clamped to what is left.
  json msg = json::array({{{"role", "user"}, {"content", std::string(400, 'x')}}});
  post("/v1/chat/completions", {{"messages", msg}, {"max_tokens", 100000}});
  EXPECT_EQ(engine.st->requests.back().stop.max_tokens, 512 - 400 - 22);
}

TEST_F(RoutesTest, QueueFullIs429) {
  engine.st->max_active = 0;
  HttpResponse r = post("/v1/chat/completions", {{"messages", user_msg}});
  expect_openai_error(r, 429);
  bool retry_after = false;
  for (auto& [k, v] : r.headers) retry_after |= k == "Retry-After";
  EXPECT_TRUE(retry_after);
  HttpResponse a = post("/v1/messages", {{"max_tokens", 5}, {"messages", user_msg}});
  EXPECT_EQ(a.status, 429);
  EXPECT_EQ(body_of(a)["error"]["type"], "rate_limit_error");
}

TEST_F(RoutesTest, StreamCancelledWhenClientGoes) {
  engine.st->token_delay = std::chrono::milliseconds(1);
  engine.st->reply = [](const engine::Request&) { return std::string(200, 'a'); };
  HttpResponse r = post("/v1/chat/completions", {{"messages", user_msg}, {"stream", true}});
  std::string got = stream_of(r, 5);  // the client reads 5 chunks, then hangs up
  EXPECT_EQ(engine.st->cancelled.load(), 1);
  EXPECT_EQ(engine.st->active.load(), 0);
  EXPECT_EQ(got.find("[DONE]"), std::string::npos);
}

TEST_F(RoutesTest, NonStreamCancelledWhenClientGoes) {
  engine.st->token_delay = std::chrono::milliseconds(1);
  engine.st->reply = [](const engine::Request&) { return std::string(100000, 'a'); };
  HttpRequest r;
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.body = json({{"messages", user_msg}, {"max_tokens", 100000}}).dump();
  auto t0 = std::chrono::steady_clock::now();
  r.client_gone = [t0] { return std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(30); };
  router->dispatch(r);
  EXPECT_EQ(engine.st->cancelled.load(), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST_F(RoutesTest, ChoicesN) {
  json b = body_of(post("/v1/chat/completions", {{"messages", user_msg}, {"n", 3}, {"seed", 7}}));
  ASSERT_EQ(b["choices"].size(), 3u);
  EXPECT_EQ(b["choices"][2]["index"], 2);
  EXPECT_EQ(b["usage"]["completion_tokens"], 33);
  EXPECT_EQ(*engine.st->requests[2].sampling.seed, 9u);
}

TEST_F(RoutesTest, Completions) {
  json b = body_of(post("/v1/completions", {{"prompt", "Once"}, {"echo", true}, {"logprobs", 1}}));
  EXPECT_EQ(b["object"], "text_completion");
  EXPECT_EQ(b["choices"][0]["text"], "OnceHello world");
  EXPECT_EQ(b["choices"][0]["logprobs"]["tokens"].size(), 11u);
  EXPECT_EQ(b["usage"]["prompt_tokens"], 4);
  json ids = body_of(post("/v1/completions", {{"prompt", json::array({65, 66})}, {"max_tokens", 3}}));
  EXPECT_EQ(ids["choices"][0]["text"], "Hel");
  EXPECT_EQ(ids["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(engine.st->requests.back().prompt, (std::vector<int32_t>{65, 66}));
  json multi = body_of(post("/v1/completions", {{"prompt", json::array({"a", "b"})}}));
  EXPECT_EQ(multi["choices"].size(), 2u);
  expect_openai_error(post("/v1/completions", {{"prompt", json::array({-1})}}), 400, "prompt");
  expect_openai_error(post("/v1/completions", {{"prompt", 5}}), 400, "prompt");
  expect_openai_error(post("/v1/completions", json::object()), 400, "prompt");
  auto payloads = sse_payloads(stream_of(post("/v1/completions", {{"prompt", "x"}, {"stream", true}})));
  std::string text;
  for (auto& p : payloads)
    if (p != "[DONE]") text += json::parse(p)["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, "Hello world");
  EXPECT_EQ(payloads.back(), "[DONE]");
}

TEST_F(RoutesTest, AnthropicMessages) {
  json body = {{"model", "test-model"}, {"max_tokens", 50}, {"system", "Be kind."}, {"messages", user_msg},
               {"stop_sequences", json::array({"zzz"})}};
  HttpResponse r = post("/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  json b = body_of(r);
  EXPECT_EQ(b["type"], "message");
  EXPECT_EQ(b["role"], "assistant");
  EXPECT_EQ(b["content"][0]["type"], "text");
  EXPECT_EQ(b["content"][0]["text"], "Hello world");
  EXPECT_EQ(b["stop_reason"], "end_turn");
  EXPECT_TRUE(b["stop_sequence"].is_null());
  EXPECT_EQ(b["usage"]["output_tokens"], 11);
  EXPECT_EQ(tok.decode(engine.st->requests.back().prompt, false), "<|system|>Be kind.\n<|user|>Hi\n<|assistant|>");
  EXPECT_EQ(engine.st->requests.back().stop.stop_strings, std::vector<std::string>{"zzz"});

  HttpResponse bad = post("/v1/messages", {{"messages", user_msg}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(body_of(bad)["type"], "error");
  EXPECT_EQ(body_of(bad)["error"]["type"], "invalid_request_error");
  EXPECT_EQ(call("POST", "/v1/messages", "{oops").status, 400);
  EXPECT_EQ(body_of(call("POST", "/v1/messages", "{oops"))["type"], "error");
}

TEST_F(RoutesTest, AnthropicStreamEvents) {
  body_of(call("GET", "/health"));
  auto body = stream_of(post("/v1/messages", {{"max_tokens", 50}, {"messages", user_msg}, {"stream", true}}));
  auto names = sse_event_names(body);
  ASSERT_GE(names.size(), 7u);
  EXPECT_EQ(names[0], "message_start");
  EXPECT_EQ(names[1], "ping");
  EXPECT_EQ(names[2], "content_block_start");
  EXPECT_EQ(names[3], "content_block_delta");
  EXPECT_EQ(names[names.size() - 3], "content_block_stop");
  EXPECT_EQ(names[names.size() - 2], "message_delta");
  EXPECT_EQ(names.back(), "message_stop");
  std::string text;
  for (auto& p : sse_payloads(body)) {
    json e = json::parse(p);
    if (e["type"] == "content_block_delta") text += e["delta"]["text"].get<std::string>();
    if (e["type"] == "message_delta") {
      EXPECT_EQ(e["delta"]["stop_reason"], "end_turn");
    }
  }
  EXPECT_EQ(text, "Hello world");
}

TEST_F(RoutesTest, AnthropicToolUse) {
  ServeOptions o;
  o.tool_format = ToolFormat::Hermes;
  make(o);
  engine.st->reply = [](const engine::Request&) {
    return std::string("<tool_call>{\"name\": \"calc\", \"arguments\": {\"x\": 2}}</tool_call>");
  };
  json tools = json::array({{{"name", "calc"}, {"input_schema", {{"type", "object"}}}}});
  json msgs = json::array({{{"role", "user"}, {"content", "2?"}},
                           {{"role", "assistant"}, {"content", json::array({{{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "calc"}, {"input", {{"x", 1}}}}})}},
                           {{"role", "user"}, {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "1"}}})}}});
  json b = body_of(post("/v1/messages", {{"max_tokens", 200}, {"messages", msgs}, {"tools", tools}}));
  EXPECT_EQ(b["stop_reason"], "tool_use");
  ASSERT_EQ(b["content"].size(), 1u);
  EXPECT_EQ(b["content"][0]["type"], "tool_use");
  EXPECT_EQ(b["content"][0]["name"], "calc");
  EXPECT_EQ(b["content"][0]["input"]["x"], 2);
  std::string prompt = tok.decode(engine.st->requests.back().prompt, false);
  EXPECT_NE(prompt.find("<|tool|>1\n"), std::string::npos) << prompt;
  json count = body_of(post("/v1/messages/count_tokens", {{"messages", user_msg}}));
  EXPECT_EQ(count["input_tokens"], std::string("<|user|>Hi\n<|assistant|>").size());
}

TEST_F(RoutesTest, ResponsesWithPreviousId) {
  json first = body_of(post("/v1/responses", {{"input", "Hi"}, {"instructions", "Be brief."}}));
  EXPECT_EQ(first["object"], "response");
  EXPECT_EQ(first["status"], "completed");
  EXPECT_EQ(first["output"][0]["content"][0]["text"], "Hello world");
  std::string id = first["id"];
  json second = body_of(post("/v1/responses", {{"input", "More"}, {"previous_response_id", id}}));
  EXPECT_EQ(second["previous_response_id"], id);
  EXPECT_EQ(tok.decode(engine.st->requests.back().prompt, false),
            "<|user|>Hi\n<|assistant|>Hello world\n<|user|>More\n<|assistant|>");
  expect_openai_error(post("/v1/responses", {{"input", "x"}, {"previous_response_id", "resp_nope"}}), 404,
                      "previous_response_id");
  ServeOptions o;
  o.template_thinks = true;
  make(o);
  engine.st->reply = [](const engine::Request&) { return std::string("<think>hmm</think>Answer"); };
  std::string streamed = stream_of(post("/v1/responses", {{"input", "Hi"}, {"stream", true}}));
  std::string deltas;
  for (auto& p : sse_payloads(streamed)) {
    json e = json::parse(p);
    if (e["type"] == "response.output_text.delta") deltas += e["delta"].get<std::string>();
    if (e["type"] == "response.completed") {
      EXPECT_EQ(e["response"]["output"][0]["type"], "reasoning");
    }
  }
  EXPECT_EQ(deltas, "Answer");
  auto names = sse_event_names(streamed);
  ASSERT_GE(names.size(), 5u);
  EXPECT_EQ(names.front(), "response.created");
  EXPECT_EQ(names.back(), "response.completed");
}

TEST_F(RoutesTest, ResponseStoreIsBounded) {
  ResponseStore s(2);
  s.put("a", json::array());
  s.put("b", json::array());
  s.put("c", json::array());
  json out;
  EXPECT_FALSE(s.get("a", &out));
  EXPECT_TRUE(s.get("c", &out));
  EXPECT_EQ(s.size(), 2u);
}

TEST_F(RoutesTest, TokenizeEmbeddingsMetrics) {
  json t = body_of(post("/tokenize", {{"prompt", "AB"}}));
  EXPECT_EQ(t["tokens"], json::array({65, 66}));
  EXPECT_EQ(body_of(post("/detokenize", {{"tokens", json::array({72, 105})}}))["prompt"], "Hi");
  expect_openai_error(post("/detokenize", {{"tokens", json::array({"x"})}}), 400, "tokens");
  expect_openai_error(post("/v1/embeddings", {{"input", json::array()}}), 400, "input");
  expect_openai_error(post("/v1/embeddings", {{"input", "hello"}, {"encoding_format", "int8"}}), 400, "encoding_format");
  post("/v1/chat/completions", {{"messages", user_msg}});
  HttpResponse m = call("GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("ingot_http_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 1"), std::string::npos);
  EXPECT_NE(m.body.find("ingot_generation_tokens_total 11"), std::string::npos);
  EXPECT_NE(m.body.find("ingot_time_to_first_token_seconds_count 1"), std::string::npos);
}

}  // namespace
}  // namespace ingot::server
