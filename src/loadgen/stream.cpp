#include "loadgen/stream.h"

#include "util/error.h"

namespace ingot::loadgen {

const char* failure_name(Failure f) {
  switch (f) {
    case Failure::None: return "none";
    case Failure::Http: return "http";
    case Failure::Connection: return "connection";
    case Failure::Timeout: return "timeout";
    case Failure::Stream: return "stream";
  }
  return "?";
}

void CompletionStream::on_bytes(std::string_view bytes, double now) {
  if (failed() || done_) return;  // bytes after [DONE] or an error change nothing
  try {
    reader_.feed(bytes, pending_);
  } catch (const Error& e) {
    failure_ = Failure::Stream;
    error_ = e.what();
    return;
  }
  for (const std::string& data : pending_) {
    on_event(data, now);
    if (failed() || done_) break;
  }
  pending_.clear();
}

void CompletionStream::on_event(const std::string& data, double now) {
  CompletionEvent ev = parse_completion_event(data);
  if (ev.kind == CompletionEvent::Kind::Error) {
    failure_ = Failure::Stream;
    error_ = ev.error;
    return;
  }
  if (ev.kind == CompletionEvent::Kind::Done) {
    done_ = true;
    return;
  }
  if (ev.completion_tokens) usage_tokens_ = *ev.completion_tokens;
  if (ev.prompt_tokens) usage_prompt_ = *ev.prompt_tokens;
  if (!ev.finish_reason.empty()) finished_ = true;
  if (ev.text_bytes == 0) return;
  if (first_ < 0) first_ = now;
  else itl_.push_back(now - last_);
  last_ = now;
  ++chunks_;
}

void CompletionStream::finish(double now, RequestResult& out) {
  if (!failed() && !done_) {
    reader_.finish(pending_);
    for (const std::string& data : pending_) {
      on_event(data, now);
      if (failed() || done_) break;
    }
    pending_.clear();
  }
  if (!failed() && !done_ && !finished_) {
    failure_ = Failure::Stream;
    error_ = "the stream ended before a finish_reason or [DONE]";
  }
  fill(now, out);
}

void CompletionStream::fail(Failure why, std::string message, double now, RequestResult& out) {
  if (!failed()) {
    failure_ = why;
    error_ = std::move(message);
  }
  fill(now, out);
}

void CompletionStream::fill(double now, RequestResult& out) const {
  out.start_s = start_;
  out.latency_s = now - start_;
  out.ttft_s = first_ < 0 ? -1 : first_ - start_;
  out.itl_s = itl_;
  out.chunks = chunks_;
  out.usage_reported = usage_tokens_ >= 0;
  out.output_tokens = out.usage_reported ? usage_tokens_ : chunks_;
  out.usage_prompt_tokens = usage_prompt_;
  out.failure = failure_;
  out.error = error_;
}

}  // namespace ingot::loadgen
