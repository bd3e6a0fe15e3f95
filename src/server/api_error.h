// Errors a client caused (or a server fault), carried to the HTTP boundary and
// rendered in OpenAI's or Anthropic's published error shape.
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace ingot::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status_(status), param_(std::move(param)), code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string param_, code_;
};

// A 400 naming the offending field.
[[noreturn]] void bad_request(const std::string& message, const std::string& param = "");

// OpenAI: {"error": {"message", "type", "param", "code"}}.
nlohmann::json openai_error_body(int status, const std::string& message, const std::string& param = "",
                                 const std::string& code = "");
// Anthropic: {"type": "error", "error": {"type", "message"}}.
nlohmann::json anthropic_error_body(int status, const std::string& message);

// Maps any exception to (status, message, param, code): ApiError as is,
// ingot::Error by kind, anything else 500.
struct ErrorInfo {
  int status = 500;
  std::string message, param, code;
};
ErrorInfo classify_exception(const std::exception& e);

}  // namespace ingot::server
