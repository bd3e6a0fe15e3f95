#include "cli/line_reader.h"

#include <fcntl.h>
#include <histedit.h>
#include <langinfo.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <clocale>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "util/error.h"

namespace ingot::cli {

namespace {

std::atomic<bool> g_interrupted{false};
int g_wake[2] = {-1, -1};

void on_sigint(int) {
  const int saved = errno;
  g_interrupted.store(true);
  if (g_wake[1] >= 0) {
    const ssize_t n = write(g_wake[1], "i", 1);  // a full pipe already says "interrupted"
    (void)n;
  }
  errno = saved;
}

// Waits until fd 0 is readable (true) or an interrupt is pending (false).
bool wait_for_input() {
  for (;;) {
    if (g_interrupted.load()) return false;
    pollfd fds[2] = {{0, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
    const int n = poll(fds, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return true;  // let the read report the problem
    if (fds[1].revents & POLLIN) return false;
    if (fds[0].revents) return true;
  }
}

// One byte from stdin: 1, 0 at end of input, -1 on an interrupt or error.
int read_byte(unsigned char* b) {
  for (;;) {
    if (!wait_for_input()) return -1;
    const ssize_t n = ::read(0, b, 1);
    if (n == 1) return 1;
    if (n == 0) return 0;
    if (errno != EINTR && errno != EAGAIN) return -1;
  }
}

// libedit's character source: UTF-8 from stdin decoded here, so that a
// Ctrl-C ends el_wgets at once (it returns NULL) instead of killing the process.
int editline_getc(EditLine*, wchar_t* out) {
  unsigned char b = 0;
  int r = read_byte(&b);
  if (r != 1) return r;
  int more = b < 0x80 ? 0 : (b >> 5) == 0x6 ? 1 : (b >> 4) == 0xE ? 2 : (b >> 3) == 0x1E ? 3 : -1;
  if (more < 0) {
    *out = 0xFFFD;
    return 1;
  }
  uint32_t cp = more == 0 ? b : more == 1 ? (b & 0x1F) : more == 2 ? (b & 0x0F) : (b & 0x07);
  for (int i = 0; i < more; ++i) {
    if (read_byte(&b) != 1) return -1;
    if ((b & 0xC0) != 0x80) {
      *out = 0xFFFD;
      return 1;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  *out = static_cast<wchar_t>(cp);
  return 1;
}

const char* editline_prompt(EditLine* el);

class EditLineReader : public LineReader {
 public:
  EditLineReader() {
    // libedit converts the edited line with the C library's multibyte
    // functions: they must speak UTF-8 even when the environment sets no locale.
    const char* loc = std::setlocale(LC_CTYPE, "");
    if (!loc || std::strcmp(nl_langinfo(CODESET), "UTF-8") != 0) std::setlocale(LC_CTYPE, "C.UTF-8");
    el_ = el_init("ingot", stdin, stdout, stderr);
    if (!el_) fail(ErrorKind::Io, "cannot set up the terminal line editor");
    hist_ = history_init();
    HistEvent ev;
    history(hist_, &ev, H_SETSIZE, 1000);
    history(hist_, &ev, H_SETUNIQUE, 1);
    el_set(el_, EL_EDITOR, "emacs");
    el_set(el_, EL_CLIENTDATA, this);
    el_set(el_, EL_PROMPT, editline_prompt);
    el_set(el_, EL_HIST, history, hist_);
    el_set(el_, EL_GETCFN, editline_getc);
    el_source(el_, nullptr);  // the user's ~/.editrc, as other libedit programs read it
  }
  ~EditLineReader() override {
    el_end(el_);
    history_end(hist_);
  }

  Result read(const std::string& prompt) override {
    prompt_ = prompt;
    int n = 0;
    const char* line = el_gets(el_, &n);
    Result r;
    if (!line) {
      const LineInfo* li = el_line(el_);
      if (li && li->lastchar > li->buffer) r.line.assign(li->buffer, li->lastchar);
      el_reset(el_);  // drop what was typed before the Ctrl-C
      r.status = Interrupts::take() ? Status::Interrupted : Status::End;
      std::fputs("\n", stdout);
      std::fflush(stdout);
      return r;
    }
    r.status = Status::Line;
    r.line.assign(line, static_cast<size_t>(n));
    while (!r.line.empty() && (r.line.back() == '\n' || r.line.back() == '\r')) r.line.pop_back();
    if (!r.line.empty()) {
      HistEvent ev;
      history(hist_, &ev, H_ENTER, r.line.c_str());
    }
    return r;
  }

  const char* prompt() const { return prompt_.c_str(); }

 private:
  EditLine* el_ = nullptr;
  History* hist_ = nullptr;
  std::string prompt_;
};

const char* editline_prompt(EditLine* el) {
  void* self = nullptr;
  el_get(el, EL_CLIENTDATA, &self);
  return static_cast<EditLineReader*>(self)->prompt();
}

// Lines from stdin as they are (a pipe, a file, or a terminal without a
// terminal on stdout).
class PlainLineReader : public LineReader {
 public:
  Result read(const std::string& prompt) override {
    if (isatty(0)) {
      std::fputs(prompt.c_str(), stderr);
      std::fflush(stderr);
    }
    Result r;
    for (;;) {
      if (size_t nl = buf_.find('\n'); nl != std::string::npos) {
        r.status = Status::Line;
        r.line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (!r.line.empty() && r.line.back() == '\r') r.line.pop_back();
        return r;
      }
      if (eof_) {
        if (buf_.empty()) return r;  // End
        r.status = Status::Line;
        r.line.swap(buf_);
        return r;
      }
      if (!wait_for_input()) {
        Interrupts::take();
        buf_.clear();
        r.status = Status::Interrupted;
        return r;
      }
      char chunk[4096];
      const ssize_t n = ::read(0, chunk, sizeof chunk);
      if (n > 0) buf_.append(chunk, static_cast<size_t>(n));
      else if (n == 0 || (errno != EINTR && errno != EAGAIN)) eof_ = true;
    }
  }

 private:
  std::string buf_;
  bool eof_ = false;
};

}  // namespace

void Interrupts::install() {
  if (g_wake[0] < 0 && pipe2(g_wake, O_NONBLOCK | O_CLOEXEC) != 0)
    fail(ErrorKind::Io, "cannot create a pipe: ", std::strerror(errno));
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked read returns so the loop can look
  sigaction(SIGINT, &sa, nullptr);
}

bool Interrupts::take() {
  const bool was = g_interrupted.exchange(false);
  char drain[64];
  if (g_wake[0] >= 0)
    while (::read(g_wake[0], drain, sizeof drain) > 0) {
    }
  return was;
}

bool Interrupts::pending() { return g_interrupted.load(); }

int Interrupts::wake_fd() { return g_wake[0]; }

std::unique_ptr<LineReader> make_line_reader(bool interactive) {
  if (interactive && isatty(0) && isatty(1)) return std::make_unique<EditLineReader>();
  return std::make_unique<PlainLineReader>();
}

}  // namespace ingot::cli
