// Typed errors: every failure that a user can cause surfaces as one of these,
// carrying a one-line message; the CLI prints it and exits non-zero, the
// server maps it to a 4xx/5xx JSON body.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace ingot {

enum class ErrorKind {
  InvalidArgument,  // bad user input (flags, request fields, ids)
  NotFound,         // missing file / model / route
  BadFormat,        // corrupt or unsupported file contents
  Unsupported,      // valid input we do not implement
  ResourceExhausted,// memory budget, queue full
  Io,               // read/write failures
  Internal,         // a bug: an invariant did not hold
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& msg) : std::runtime_error(msg), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

template <typename... Args>
[[noreturn]] void fail(ErrorKind kind, Args&&... args) {
  throw Error(kind, detail::concat(std::forward<Args>(args)...));
}

template <typename... Args>
std::string str_cat(Args&&... args) {
  return detail::concat(std::forward<Args>(args)...);
}

}  // namespace ingot

// Internal invariant: a failure here is a bug in ingot, not bad input.
#define INGOT_CHECK(cond, ...)                                                     \
  do {                                                                            \
    if (!(cond))                                                                  \
      ::ingot::fail(::ingot::ErrorKind::Internal, __FILE__, ":", __LINE__, ": ", \
                    "check failed: " #cond " " __VA_OPT__(, ) __VA_ARGS__);      \
  } while (0)
