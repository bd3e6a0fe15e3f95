// Test doubles for the engine, tokenizer and chat template, so the routes and
// the HTTP layer can be tested without a model.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "ingot/engine.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace ingot::server::testing {

// One token per byte; id 256 is the special end-of-sequence token.
class ByteTokenizer : public Tokenizer {
 public:
  ByteTokenizer() { cfg_.eos_token = "<|eos|>"; }
  std::vector<int32_t> encode(std::string_view text, bool) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    std::string s;
    for (int32_t id : ids) s += id < 256 ? std::string(1, static_cast<char>(id)) : (skip_special ? "" : "<|eos|>");
    return s;
  }
  int64_t vocab_size() const override { return 300; }
  std::optional<int32_t> token_to_id(std::string_view t) const override {
    if (t == "<|eos|>") return 256;
    return std::nullopt;
  }
  std::string id_to_token(int32_t id) const override { return decode({id}, false); }
  bool is_special(int32_t id) const override { return id >= 256; }
  const TokenizerConfig& config() const override { return cfg_; }
  class S : public Stream {
   public:
    std::string push(int32_t id) override { return id < 256 ? std::string(1, static_cast<char>(id)) : ""; }
    std::string flush() override { return ""; }
  };
  std::unique_ptr<Stream> stream(bool) const override { return std::make_unique<S>(); }

 private:
  TokenizerConfig cfg_;
};

// "<|role|>content\n" per message, the tool names, then "<|assistant|>".
class LineTemplate : public ChatTemplate {
 public:
  std::string render(const nlohmann::json& ctx) const override {
    std::string out;
    if (ctx.contains("tools"))
      for (const auto& t : ctx["tools"]) out += "<|tool|>" + t["function"]["name"].get<std::string>() + "\n";
    for (const auto& m : ctx["messages"]) {
      out += "<|" + m["role"].get<std::string>() + "|>";
      if (m["content"].is_string()) out += m["content"].get<std::string>();
      if (m.contains("tool_calls")) out += m["tool_calls"].dump();
      out += "\n";
    }
    if (ctx.value("enable_thinking", false)) return out + "<|assistant|><think>\n";
    return out + "<|assistant|>";
  }
  std::string render(const nlohmann::ordered_json& ctx) const override {
    return render(nlohmann::json::parse(ctx.dump()));
  }
};

struct FakeEngineState {
  std::mutex mu;
  std::function<std::string(const engine::Request&)> reply = [](const engine::Request&) { return "Hello world"; };
  std::chrono::milliseconds token_delay{0};
  int64_t max_active = 1000;
  std::atomic<int64_t> active{0}, cancelled{0}, submitted{0};
  std::vector<engine::Request> requests;
};

class FakeHandle : public engine::RequestHandle {
 public:
  FakeHandle(std::shared_ptr<FakeEngineState> st, engine::Request r, std::string text)
      : st_(std::move(st)), req_(std::move(r)), text_(std::move(text)) {}
  ~FakeHandle() override { release(); }
  bool next(engine::Chunk* out, std::chrono::milliseconds timeout) override {
    *out = engine::Chunk{};
    if (done_) {
      std::this_thread::sleep_for(timeout);
      return false;
    }
    if (cancel_.load()) return finish(out, engine::FinishReason::Cancelled);
    if (st_->token_delay.count() > 0) {
      auto wait = std::min(timeout, st_->token_delay);
      std::this_thread::sleep_for(wait);
      if (wait < st_->token_delay) return false;
    }
    if (cancel_.load()) return finish(out, engine::FinishReason::Cancelled);
    if (req_.pooling != engine::Request::Pooling::None) {
      // An embedding request: one final chunk with a small vector, as the engine's.
      out->embedding = {static_cast<float>(req_.prompt.size()), 1.0f, 0.5f, -0.25f};
      return finish(out, engine::FinishReason::Stop);
    }
    if (pos_ >= text_.size()) return finish(out, engine::FinishReason::Stop);
    if (static_cast<int64_t>(pos_) >= req_.stop.max_tokens) return finish(out, engine::FinishReason::Length);
    unsigned char c = static_cast<unsigned char>(text_[pos_++]);
    engine::TokenEvent ev;
    ev.token = c;
    ev.text = std::string(1, static_cast<char>(c));
    ev.logprob = -0.5f;
    for (int k = 0; k < req_.sampling.top_logprobs; ++k) ev.top.push_back({static_cast<int32_t>('a' + k), -1.0f - k});
    out->tokens.push_back(ev);
    if (pos_ >= text_.size()) {
      out->finished = true;
      out->reason = engine::FinishReason::Stop;
      fill_usage(out);
      release();
    }
    return true;
  }
  // Like the engine, a cancel frees the request's resources right away.
  void cancel() override {
    if (!cancel_.exchange(true) && !done_) {
      st_->cancelled++;
      release();
    }
  }

 private:
  void fill_usage(engine::Chunk* out) {
    out->usage.prompt_tokens = static_cast<int64_t>(req_.prompt.size());
    out->usage.completion_tokens = static_cast<int64_t>(pos_);
  }
  bool finish(engine::Chunk* out, engine::FinishReason r) {
    out->finished = true;
    out->reason = r;
    fill_usage(out);
    release();
    return true;
  }
  void release() {
    if (!done_) {
      done_ = true;
      st_->active--;
    }
  }
  std::shared_ptr<FakeEngineState> st_;
  engine::Request req_;
  std::string text_;
  size_t pos_ = 0;
  bool done_ = false;
  std::atomic<bool> cancel_{false};
};

class FakeEngine : public engine::Engine {
 public:
  std::shared_ptr<FakeEngineState> st = std::make_shared<FakeEngineState>();
  std::shared_ptr<engine::RequestHandle> submit(engine::Request req) override {
    if (st->active.load() >= st->max_active) fail(ErrorKind::ResourceExhausted, "queue is full");
    st->active++;
    st->submitted++;
    std::string text;
    {
      std::lock_guard<std::mutex> lock(st->mu);
      st->requests.push_back(req);
      text = st->reply(req);
    }
    return std::make_shared<FakeHandle>(st, std::move(req), std::move(text));
  }
  engine::Stats stats() const override {
    engine::Stats s;
    s.running = st->active.load();
    s.kv_blocks_used = st->active.load();
    s.kv_blocks_total = 100;
    return s;
  }
  const Model& model() const override { fail(ErrorKind::Internal, "the fake engine has no model"); }
  void shutdown() override {}
};

}  // namespace ingot::server::testing
