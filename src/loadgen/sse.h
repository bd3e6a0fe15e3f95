// Reading a streamed /v1/completions response: the text/event-stream framing
// (events' data fields) and what one event's JSON says.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ingot::loadgen {

// Splits a text/event-stream into the data of its events, however the bytes
// are cut into reads. Lines end in \n, \r\n or \r; "data:" lines of one event
// are joined with \n; comments and other fields are skipped.
class SseReader {
 public:
  // A line longer than this (a broken or hostile server) fails the stream.
  static constexpr size_t kMaxLineBytes = 8u << 20;

  // Appends the data of each event the bytes complete; throws BadFormat
  // for an over-long line.
  void feed(std::string_view bytes, std::vector<std::string>& events);
  // The stream ended: an event still missing its blank line counts.
  void finish(std::vector<std::string>& events);

 private:
  void line_done(std::vector<std::string>& events);
  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool after_cr_ = false;  // a \n right after \r ends no second line
};

// One event of an OpenAI-style completions stream.
struct CompletionEvent {
  enum class Kind { Chunk, Done, Error };
  Kind kind = Kind::Chunk;
  size_t text_bytes = 0;               // choices[0].text
  std::string finish_reason;           // "" while not finished
  std::optional<int64_t> completion_tokens;  // usage, when the event carries it
  std::optional<int64_t> prompt_tokens;
  std::string error;                   // Kind::Error: the server's message
};

// "[DONE]" -> Done; {"error": ...} or anything not a completion chunk -> Error.
CompletionEvent parse_completion_event(std::string_view data);

// The message of an OpenAI-style error body ({"error": {"message": ...}} or
// {"error": "..."}), else the body itself, cut to a readable length.
std::string error_text(std::string_view body);

}  // namespace ingot::loadgen
