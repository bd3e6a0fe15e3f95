// What every route shares: the engine, tokenizer and chat template, the
// serving defaults, metrics and the Responses store. Turns request fields
// into engine requests and chat messages into prompt ids.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "ingot/engine.h"
#include "server/metrics.h"
#include "server/output_parser.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ingot::server {

// Insertion-ordered, like Python dicts: templates and responses keep the client's key order.
using json = nlohmann::ordered_json;

struct ServeOptions {
  std::string model_id = "default";
  std::vector<std::string> model_aliases;  // other names a request may use (the path as given)
  // false: any `model` a request names means the served model, as llama-server
  // does (clients send their own names, e.g. Anthropic ones); true: only
  // model_id, its aliases and "default" are accepted, anything else is a 404.
  bool strict_model_name = false;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;  // empty: no auth
  std::string cors_origin;  // empty: CORS off; "*" or comma-separated origins
  size_t max_body_bytes = 16u << 20;
  // /v1/audio/*: longer audio is refused (from the container's duration when
  // it has one). Audio is streamed, so this bounds a job's time, not memory.
  double audio_max_seconds = 4 * 3600.0;
  int64_t context_length = 4096;
  int http_threads = 128;  // worker threads for handlers (not per connection)
  // Connection limits and deadlines (docs/server.md, "Slow and idle clients").
  size_t max_connections = 4096;
  size_t max_connections_per_client = 1024;
  int header_timeout_s = 10;      // a request head must be complete within this
  int keep_alive_timeout_s = 10;  // an idle connection is closed after this
  int io_timeout_s = 30;          // an upload or response with no progress for this long is dropped
  size_t body_budget_bytes = 0;   // request bodies held at once (0: max(256 MiB, 8 * max_body_bytes))
  // mlx_lm.server defaults for fields a request omits.
  float temperature = 0.0f, top_p = 1.0f, min_p = 0.0f;
  int top_k = 0;
  int64_t max_tokens = 512;
  json chat_template_args = json::object();
  ToolFormat tool_format = ToolFormat::None;
  bool template_thinks = false;  // the template knows <think>
  size_t response_store_size = 256;
  bool embeddings = false;  // the model is an embedding model
  bool text_model = true;   // false: only a speech model is served (text routes answer 400)
  std::string embedding_pooling = "last";  // /v1/embeddings: last | mean (anything else is refused)
  // /v1/load_lora_adapter and /v1/unload_lora_adapter without --api-key.
  bool allow_runtime_lora = false;
};

// A bounded in-memory store of Responses-API conversations (oldest evicted).
class ResponseStore {
 public:
  explicit ResponseStore(size_t capacity) : capacity_(capacity) {}
  void put(const std::string& id, json conversation);
  bool get(const std::string& id, json* conversation) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  size_t capacity_;
  std::deque<std::string> order_;
  std::unordered_map<std::string, json> items_;
};

// A prompt ready for the engine.
struct Prompt {
  std::vector<int32_t> ids;
  std::string text;
  bool opens_reasoning = false;  // the rendered prompt ends inside <think>
};

class SpeechWorker;
class LoraRegistry;

class Service {
 public:
  Service(engine::Engine& engine, const Tokenizer& tok, std::shared_ptr<const ChatTemplate> tmpl, ServeOptions opt);

  engine::Engine& engine() { return engine_; }
  const Tokenizer& tokenizer() const { return tok_; }
  const ServeOptions& options() const { return opt_; }
  Metrics& metrics() { return metrics_; }
  ResponseStore& responses() { return responses_; }
  // The speech-to-text model behind /v1/audio/*, when one is served.
  SpeechWorker* speech() const { return speech_; }
  void set_speech(SpeechWorker* w) { speech_ = w; }
  // The LoRA adapters requests may name (null: none are served).
  LoraRegistry* loras() const { return loras_; }
  void set_loras(LoraRegistry* r) { loras_ = r; }
  // The adapter a request body's `model` selects: a named adapter, else the
  // default one (--adapter-path), else null (the base model).
  std::shared_ptr<const LoraAdapter> lora_for(const json& body) const;

  // Renders OpenAI-style messages (string or text-part content, tool calls,
  // tool results) with the chat template; 400 on anything it cannot render.
  Prompt render_chat(const json& messages, const json* tools, const json* extra_template_args) const;
  std::vector<int32_t> encode(const std::string& text, bool add_special) const;
  // 400 "context_length_exceeded" when the prompt leaves no room to generate.
  void check_prompt_length(size_t prompt_tokens, const char* param) const;
  // 404 model_not_found when `model` names a model this server does not
  // serve: the speech model on a text route, or, with strict_model_name,
  // anything but the served model's names.
  void check_model(const json& body) const;

  // Sampling / stop fields shared by the OpenAI routes (temperature, top_p,
  // top_k, min_p, penalties, logit_bias, seed, stop, max_tokens, ...).
  engine::Request base_request(const json& body, std::vector<int32_t> prompt, const char* max_tokens_key) const;

  std::string token_text(int32_t id) const;

 private:
  engine::Engine& engine_;
  const Tokenizer& tok_;
  std::shared_ptr<const ChatTemplate> tmpl_;
  ServeOptions opt_;
  Metrics metrics_;
  ResponseStore responses_;
  SpeechWorker* speech_ = nullptr;
  LoraRegistry* loras_ = nullptr;
  mutable std::atomic<bool> other_name_logged_{false};
};

// Speculative decoding in the terms of OpenAI's usage details (Predicted
// Outputs): the draft tokens the model kept and those it turned down.
json prediction_tokens_json(int64_t draft_tokens, int64_t accepted_draft_tokens);

std::string random_id(const std::string& prefix);
int64_t unix_time();

}  // namespace ingot::server
