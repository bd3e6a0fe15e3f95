// A streamed /v1/completions response as `ingot bench serve` reads it: the
// event-stream framing, each event's JSON, and the per-request record.
// Input: one byte choosing how the rest is cut into reads, then the body.
// Findings: any exception or crash; a record whose counts disagree with each
// other (inter-token gaps vs text chunks, TTFT after the end); and a record
// that depends on how the bytes were cut.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "loadgen/stream.h"

namespace {

using ingot::loadgen::CompletionStream;
using ingot::loadgen::RequestResult;

// Reads of `piece` bytes, the n-th arriving at time n (the end one later).
RequestResult read_in_pieces(std::string_view body, size_t piece) {
  CompletionStream s(0.0);
  double now = 0;
  for (size_t i = 0; i < body.size(); i += piece) s.on_bytes(body.substr(i, piece), now += 1);
  RequestResult r;
  s.finish(now + 1, r);
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 17;
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  RequestResult cut = read_in_pieces(body, piece);
  RequestResult whole = read_in_pieces(body, body.size() + 1);
  for (const RequestResult* r : {&cut, &whole}) {
    if (r->chunks < 0 || r->output_tokens < 0) __builtin_trap();
    if (r->itl_s.size() != static_cast<size_t>(r->chunks > 0 ? r->chunks - 1 : 0)) __builtin_trap();
    if (r->ttft_s > r->latency_s) __builtin_trap();
    for (double g : r->itl_s)
      if (g < 0) __builtin_trap();
    if (!r->usage_reported && r->output_tokens != r->chunks) __builtin_trap();
    if (r->ok() != r->error.empty()) __builtin_trap();
  }
  if (cut.failure != whole.failure || cut.chunks != whole.chunks || cut.output_tokens != whole.output_tokens ||
      cut.usage_reported != whole.usage_reported)
    __builtin_trap();
  return 0;
}
