// Input for `ingot run`: a line editor with history on a terminal (libedit),
// plain lines otherwise, and Ctrl-C turned into an event the chat loop reads
// instead of a signal that ends the process.
#pragma once
#include <memory>
#include <string>

namespace ingot::cli {

// SIGINT becomes a flag plus a byte on a pipe, so whichever thread the signal
// lands on, a reader blocked in poll() wakes up.
class Interrupts {
 public:
  static void install();
  // True once per Ctrl-C since the last take(); drains the pipe.
  static bool take();
  static bool pending();
  static int wake_fd();  // readable while an interrupt is pending
};

class LineReader {
 public:
  enum class Status { Line, Interrupted, End };
  struct Result {
    Status status = Status::End;
    std::string line;  // without the newline; for Interrupted, what had been typed (now dropped)
  };
  virtual ~LineReader() = default;
  // Shows `prompt` (on a terminal) and reads one line.
  virtual Result read(const std::string& prompt) = 0;
};

// A libedit editor when stdin and stdout are terminals; otherwise lines from
// stdin (a prompt still goes to stderr when stdin is a terminal).
std::unique_ptr<LineReader> make_line_reader(bool interactive);

}  // namespace ingot::cli
