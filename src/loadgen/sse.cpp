#include "loadgen/sse.h"

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/strings.h"

namespace ingot::loadgen {

using json = nlohmann::json;

void SseReader::feed(std::string_view bytes, std::vector<std::string>& events) {
  for (char c : bytes) {
    if (c == '\n' && after_cr_) {
      after_cr_ = false;
      continue;
    }
    after_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      line_done(events);
      continue;
    }
    if (line_.size() >= kMaxLineBytes) fail(ErrorKind::BadFormat, "stream line longer than ", kMaxLineBytes, " bytes");
    line_.push_back(c);
  }
}

void SseReader::finish(std::vector<std::string>& events) {
  if (!line_.empty()) line_done(events);
  line_done(events);  // the blank line the stream did not send
}

void SseReader::line_done(std::vector<std::string>& events) {
  if (line_.empty()) {
    if (has_data_) events.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (starts_with(line_, "data:")) {
    std::string_view v = std::string_view(line_).substr(5);
    if (!v.empty() && v[0] == ' ') v.remove_prefix(1);
    if (has_data_) data_.push_back('\n');
    data_.append(v);
    has_data_ = true;
  }
  line_.clear();
}

namespace {

constexpr size_t kMaxMessageBytes = 300;

std::string error_message(const json& e) {
  if (e.is_string()) return e.get<std::string>();
  if (e.is_object()) {
    auto m = e.find("message");
    if (m != e.end() && m->is_string()) return m->get<std::string>();
  }
  return e.dump().substr(0, kMaxMessageBytes);
}

CompletionEvent bad(std::string msg) {
  CompletionEvent ev;
  ev.kind = CompletionEvent::Kind::Error;
  ev.error = std::move(msg);
  return ev;
}

std::optional<int64_t> count_field(const json& usage, const char* key) {
  auto it = usage.find(key);
  if (it == usage.end() || !it->is_number_integer() || it->get<int64_t>() < 0) return std::nullopt;
  return it->get<int64_t>();
}

}  // namespace

CompletionEvent parse_completion_event(std::string_view data) {
  if (trim(data) == "[DONE]") {
    CompletionEvent ev;
    ev.kind = CompletionEvent::Kind::Done;
    return ev;
  }
  json j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return bad("malformed stream event: " + std::string(data.substr(0, kMaxMessageBytes)));
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) return bad("server error: " + error_message(*e));
  CompletionEvent ev;
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    ev.completion_tokens = count_field(*u, "completion_tokens");
    ev.prompt_tokens = count_field(*u, "prompt_tokens");
  }
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array()) return bad("stream event without 'choices'");
  if (choices->empty()) return ev;  // the usage-only event
  const json& c = (*choices)[0];
  if (!c.is_object()) return bad("stream event with a malformed choice");
  if (auto t = c.find("text"); t != c.end() && t->is_string()) ev.text_bytes = t->get_ref<const std::string&>().size();
  if (auto f = c.find("finish_reason"); f != c.end() && f->is_string()) ev.finish_reason = f->get<std::string>();
  return ev;
}

std::string error_text(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_object())
    if (auto e = j.find("error"); e != j.end() && !e->is_null()) return error_message(*e);
  return std::string(trim(body.substr(0, kMaxMessageBytes)));
}

}  // namespace ingot::loadgen
