// Server-sent events framing (text/event-stream).
#pragma once
#include <string>
#include <string_view>

namespace ingot::server {

// "data: <payload>\n\n"; a payload with newlines becomes several data lines.
std::string sse_data(std::string_view payload);
// "event: <name>\ndata: <payload>\n\n" (Anthropic and Responses streams).
std::string sse_event(std::string_view name, std::string_view payload);
// A comment line clients ignore; used as a liveness probe while idle.
inline std::string sse_comment() { return ": keep-alive\n\n"; }
inline std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace ingot::server
