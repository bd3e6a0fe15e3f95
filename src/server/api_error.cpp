#include "server/api_error.h"

#include "util/error.h"

namespace ingot::server {

void bad_request(const std::string& message, const std::string& param) { throw ApiError(400, message, param); }

namespace {
const char* openai_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}
const char* anthropic_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}
nlohmann::json null_if_empty(const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); }
}  // namespace

nlohmann::json openai_error_body(int status, const std::string& message, const std::string& param,
                                 const std::string& code) {
  return {{"error",
           {{"message", message}, {"type", openai_type(status)}, {"param", null_if_empty(param)},
            {"code", null_if_empty(code)}}}};
}

nlohmann::json anthropic_error_body(int status, const std::string& message) {
  return {{"type", "error"}, {"error", {{"type", anthropic_type(status)}, {"message", message}}}};
}

ErrorInfo classify_exception(const std::exception& e) {
  if (auto* a = dynamic_cast<const ApiError*>(&e)) return {a->status(), a->what(), a->param(), a->code()};
  if (auto* g = dynamic_cast<const Error*>(&e)) {
    switch (g->kind()) {
      case ErrorKind::InvalidArgument:
      case ErrorKind::BadFormat:
      case ErrorKind::Unsupported: return {400, g->what(), "", ""};
      case ErrorKind::NotFound: return {404, g->what(), "", ""};
      case ErrorKind::ResourceExhausted: return {429, g->what(), "", "rate_limit_exceeded"};
      default: return {500, g->what(), "", ""};
    }
  }
  if (dynamic_cast<const nlohmann::json::exception*>(&e)) return {400, std::string("invalid JSON: ") + e.what(), "", ""};
  return {500, std::string("internal error: ") + e.what(), "", ""};
}

}  // namespace ingot::server
