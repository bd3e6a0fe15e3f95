// Runs engine requests for one HTTP request: submits them (a full queue is a
// 429 before any byte is sent), reads their chunks, records metrics, and
// cancels everything at once when the client goes away.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ingot/engine.h"

namespace ingot::server {

class Service;

struct GenOutput {
  std::string text;
  std::vector<engine::TokenEvent> tokens;
  engine::FinishReason reason = engine::FinishReason::None;
  std::string error, stop_matched;
  engine::Usage usage;
  std::vector<engine::TokenLogprob> prompt_logprobs;
  std::vector<float> embedding;
  bool finished = false;
};

class Generation {
 public:
  // Submits every request; throws (ApiError 429 when the queue is full).
  Generation(Service& svc, std::vector<engine::Request> reqs);
  ~Generation();  // cancels whatever has not finished
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Called per chunk with the request's index; return false to stop (cancel).
  using OnChunk = std::function<bool(size_t, const engine::Chunk&)>;
  // Called while waiting; return false to stop (cancel). Used for liveness probes.
  using OnIdle = std::function<bool()>;
  // Reads until every request finished; false when stopped early.
  bool run(const OnChunk& on_chunk, const std::function<bool()>& client_gone, const OnIdle& on_idle = nullptr);
  void cancel();
  std::vector<GenOutput>& outputs() { return out_; }

 private:
  void record(size_t i, const engine::Chunk& c);
  Service& svc_;
  std::vector<std::shared_ptr<engine::RequestHandle>> handles_;
  std::vector<GenOutput> out_;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::chrono::steady_clock::time_point> first_, last_;
};

// OpenAI finish_reason for an engine reason ("stop", "length", ...).
const char* openai_finish_reason(engine::FinishReason r);

}  // namespace ingot::server
