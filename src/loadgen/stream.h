// One request's measured outcome, and the state that turns a streamed
// response's bytes (with their arrival times) into it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loadgen/sse.h"

namespace ingot::loadgen {

// Why a request failed; each kind is counted apart.
enum class Failure {
  None,
  Http,        // the server answered with a non-2xx status
  Connection,  // refused, reset, or closed before the stream ended
  Timeout,     // no complete answer within the request timeout
  Stream,      // a 2xx stream that was malformed, carried an error, or stopped early
};
const char* failure_name(Failure f);

struct RequestResult {
  int64_t prompt_len = 0;        // tokens sent
  int64_t output_tokens = 0;     // usage.completion_tokens when reported, else content chunks
  bool usage_reported = false;
  int64_t usage_prompt_tokens = -1;  // -1: not reported
  int64_t chunks = 0;            // events that carried text
  double start_s = 0;            // from the level's start
  double ttft_s = -1;            // -1: no text arrived
  double latency_s = 0;          // until the stream ended (or failed)
  std::vector<double> itl_s;     // gaps between text-carrying events
  Failure failure = Failure::None;
  int http_status = 0;
  std::string error;
  bool ok() const { return failure == Failure::None; }
};

// Feeds a 2xx response's body to the SSE reader and records the timings.
// Times are seconds on the caller's clock; `start` is when the request left.
class CompletionStream {
 public:
  explicit CompletionStream(double start) : start_(start) {}
  void on_bytes(std::string_view bytes, double now);
  // The transfer finished without a transport error at `now`; fills `out`
  // (a stream that never finished counts as a Stream failure).
  void finish(double now, RequestResult& out);
  // The transport failed at `now`: keeps what arrived, records the failure.
  void fail(Failure why, std::string message, double now, RequestResult& out);
  bool failed() const { return failure_ != Failure::None; }

 private:
  void on_event(const std::string& data, double now);
  void fill(double now, RequestResult& out) const;

  double start_;
  SseReader reader_;
  std::vector<std::string> pending_;
  double first_ = -1, last_ = -1;
  std::vector<double> itl_;
  int64_t chunks_ = 0;
  int64_t usage_tokens_ = -1, usage_prompt_ = -1;
  bool done_ = false, finished_ = false;
  Failure failure_ = Failure::None;
  std::string error_;
};

}  // namespace ingot::loadgen
