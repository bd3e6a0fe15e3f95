#include "server/generation.h"

#include "server/api_error.h"
#include "server/service.h"
#include "util/error.h"

namespace ingot::server {

using Clock = std::chrono::steady_clock;

const char* openai_finish_reason(engine::FinishReason r) {
  switch (r) {
    case engine::FinishReason::Length: return "length";
    case engine::FinishReason::Error: return "error";
    case engine::FinishReason::Cancelled: return "abort";
    default: return "stop";
  }
}

Generation::Generation(Service& svc, std::vector<engine::Request> reqs) : svc_(svc), start_(Clock::now()) {
  out_.resize(reqs.size());
  first_.resize(reqs.size());
  last_.resize(reqs.size());
  try {
    for (auto& r : reqs) handles_.push_back(svc_.engine().submit(std::move(r)));
  } catch (const Error& e) {
    cancel();
    if (e.kind() == ErrorKind::ResourceExhausted)
      throw ApiError(429, std::string("server is at capacity: ") + e.what(), "", "rate_limit_exceeded");
    throw;
  }
}

Generation::~Generation() { cancel(); }

void Generation::cancel() {
  for (size_t i = 0; i < handles_.size(); ++i)
    if (!out_[i].finished) handles_[i]->cancel();
}

void Generation::record(size_t i, const engine::Chunk& c) {
  GenOutput& o = out_[i];
  auto now = Clock::now();
  if (!c.tokens.empty()) {
    if (o.tokens.empty()) {
      first_[i] = now;
      svc_.metrics().observe_ttft(std::chrono::duration<double>(now - start_).count());
    }
    last_[i] = now;
  }
  for (const auto& t : c.tokens) {
    o.text += t.text;
    o.tokens.push_back(t);
  }
  if (!c.prompt_logprobs.empty()) o.prompt_logprobs = c.prompt_logprobs;
  if (!c.embedding.empty()) o.embedding = c.embedding;
  if (c.finished) {
    o.finished = true;
    o.reason = c.reason;
    o.error = c.error;
    o.stop_matched = c.stop_matched;
    o.usage = c.usage;
    svc_.metrics().add_tokens(c.usage.prompt_tokens, c.usage.completion_tokens);
    svc_.metrics().count_finish(openai_finish_reason(c.reason));
    svc_.metrics().observe_e2e(std::chrono::duration<double>(now - start_).count());
    if (o.tokens.size() > 1)
      svc_.metrics().observe_tpot(std::chrono::duration<double>(last_[i] - first_[i]).count() /
                                  static_cast<double>(o.tokens.size() - 1));
  }
}

bool Generation::run(const OnChunk& on_chunk, const std::function<bool()>& client_gone, const OnIdle& on_idle) {
  auto last_idle = Clock::now();
  while (true) {
    bool all_done = true, progressed = false;
    for (size_t i = 0; i < handles_.size(); ++i) {
      if (out_[i].finished) continue;
      all_done = false;
      engine::Chunk c;
      // One request: block; several: poll each briefly so none starves.
      auto wait = handles_.size() == 1 ? std::chrono::milliseconds(50) : std::chrono::milliseconds(2);
      if (!handles_[i]->next(&c, wait)) continue;
      progressed = true;
      record(i, c);
      if (on_chunk && !on_chunk(i, c)) {
        cancel();
        return false;
      }
    }
    if (all_done) return true;
    if (client_gone && client_gone()) {
      cancel();
      return false;
    }
    if (!progressed && on_idle && Clock::now() - last_idle > std::chrono::milliseconds(500)) {
      last_idle = Clock::now();
      if (!on_idle()) {
        cancel();
        return false;
      }
    }
  }
}

}  // namespace ingot::server
