#include "server/output_parser.h"

#include <nlohmann/json.hpp>
#include <random>

namespace ingot::server {

using json = nlohmann::json;

namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kMistral = "[TOOL_CALLS]", kPythonTag = "<|python_tag|>";
constexpr std::string_view kFenceTool = "```tool_code", kFenceJson = "```json";

std::string_view trim_view(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string_view ltrim_view(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  return b == std::string_view::npos ? std::string_view{} : s.substr(b);
}

bool is_prefix_of(std::string_view partial, std::string_view marker) {
  return partial.size() < marker.size() && marker.substr(0, partial.size()) == partial;
}

// Length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t held_suffix(std::string_view s, std::string_view marker) {
  size_t max = std::min(s.size(), marker.size() - 1);
  for (size_t n = max; n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

bool call_from_json(const json& j, std::vector<ToolCall>& out) {
  if (!j.is_object()) return false;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return false;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  std::string arguments = "{}";
  if (args != j.end()) {
    if (args->is_string()) {
      json parsed = json::parse(args->get<std::string>(), nullptr, false);
      if (parsed.is_discarded() || !parsed.is_object()) return false;
      arguments = parsed.dump();
    } else if (args->is_object()) {
      arguments = args->dump();
    } else if (!args->is_null()) {
      return false;
    }
  }
  out.push_back({new_tool_call_id(), name->get<std::string>(), arguments});
  return true;
}

json parse_or_discard(std::string_view s) { return json::parse(s.begin(), s.end(), nullptr, false); }

// Python-style call `name(a=1, b="x")` with literal arguments (Gemma's tool_code).
bool parse_python_call(std::string_view s, std::vector<ToolCall>& out) {
  s = trim_view(s);
  if (s.substr(0, 6) == "print(" && s.back() == ')') s = trim_view(s.substr(6, s.size() - 7));
  size_t open = s.find('(');
  if (open == std::string_view::npos || open == 0 || s.back() != ')') return false;
  std::string name(trim_view(s.substr(0, open)));
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  std::string_view body = s.substr(open + 1, s.size() - open - 2);
  json args = json::object();
  size_t i = 0;
  while (true) {
    while (i < body.size() && (body[i] == ' ' || body[i] == ',' || body[i] == '\n')) ++i;
    if (i >= body.size()) break;
    size_t eq = body.find('=', i);
    if (eq == std::string_view::npos) return false;
    std::string key(trim_view(body.substr(i, eq - i)));
    if (key.empty()) return false;
    i = eq + 1;
    while (i < body.size() && body[i] == ' ') ++i;
    if (i >= body.size()) return false;
    if (body[i] == '"' || body[i] == '\'') {
      char q = body[i++];
      std::string v;
      while (i < body.size() && body[i] != q) {
        if (body[i] == '\\' && i + 1 < body.size()) ++i;
        v += body[i++];
      }
      if (i >= body.size()) return false;
      ++i;
      args[key] = v;
    } else {
      size_t end = body.find(',', i);
      std::string lit(trim_view(body.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i)));
      i = end == std::string_view::npos ? body.size() : end;
      if (lit == "True") args[key] = true;
      else if (lit == "False") args[key] = false;
      else if (lit == "None") args[key] = nullptr;
      else {
        json num = parse_or_discard(lit);
        if (num.is_discarded() || !num.is_number()) return false;
        args[key] = num;
      }
    }
  }
  out.push_back({new_tool_call_id(), name, args.dump()});
  return true;
}

}  // namespace

std::string new_tool_call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlnum[rng() % (sizeof(kAlnum) - 1)];
  return id;
}

ToolFormat detect_tool_format(std::string_view t) {
  if (t.find(kHermesOpen) != std::string_view::npos) return ToolFormat::Hermes;
  if (t.find(kMistral) != std::string_view::npos) return ToolFormat::Mistral;
  if (t.find(kPythonTag) != std::string_view::npos || t.find("ipython") != std::string_view::npos)
    return ToolFormat::Llama3Json;
  if (t.find("<start_of_turn>") != std::string_view::npos) return ToolFormat::Gemma;
  if (t.find("tools") != std::string_view::npos) return ToolFormat::Llama3Json;
  return ToolFormat::None;
}

const char* tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::Hermes: return "hermes";
    case ToolFormat::Llama3Json: return "llama3_json";
    case ToolFormat::Mistral: return "mistral";
    case ToolFormat::Gemma: return "gemma";
    default: return "none";
  }
}

bool parse_hermes_call(std::string_view body, std::vector<ToolCall>& calls) {
  return call_from_json(parse_or_discard(trim_view(body)), calls);
}

bool parse_llama3_calls(std::string_view text, std::vector<ToolCall>& calls) {
  text = trim_view(text);
  if (text.substr(0, kPythonTag.size()) == kPythonTag) text = trim_view(text.substr(kPythonTag.size()));
  std::vector<ToolCall> found;
  json whole = parse_or_discard(text);
  if (!whole.is_discarded()) {
    if (whole.is_array()) {
      for (const json& j : whole)
        if (!call_from_json(j, found)) return false;
    } else if (!call_from_json(whole, found)) {
      return false;
    }
  } else {
    // Several calls separated by ';'.
    size_t start = 0;
    while (start <= text.size()) {
      size_t semi = text.find(';', start);
      std::string_view part = trim_view(text.substr(start, semi == std::string_view::npos ? std::string_view::npos : semi - start));
      if (!part.empty() && !call_from_json(parse_or_discard(part), found)) return false;
      if (semi == std::string_view::npos) break;
      start = semi + 1;
    }
  }
  if (found.empty()) return false;
  calls.insert(calls.end(), found.begin(), found.end());
  return true;
}

bool parse_mistral_calls(std::string_view text, std::vector<ToolCall>& calls) {
  std::vector<ToolCall> found;
  size_t pos = 0;
  std::string s(text);
  // Segments separated by [TOOL_CALLS]: a JSON array (v3) or name[ARGS]{...} (v11+).
  while (pos <= s.size()) {
    size_t next = s.find(kMistral, pos);
    std::string_view seg = trim_view(std::string_view(s).substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (!seg.empty()) {
      size_t args = seg.find("[ARGS]");
      if (args != std::string_view::npos) {
        std::string_view name = trim_view(seg.substr(0, args));
        size_t id = name.find("[CALL_ID]");
        if (id != std::string_view::npos) name = trim_view(name.substr(0, id));
        json a = parse_or_discard(trim_view(seg.substr(args + 6)));
        if (name.empty() || !a.is_object()) return false;
        found.push_back({new_tool_call_id(), std::string(name), a.dump()});
      } else {
        json j = parse_or_discard(seg);
        if (j.is_array()) {
          for (const json& c : j)
            if (!call_from_json(c, found)) return false;
        } else if (!call_from_json(j, found)) {
          return false;
        }
      }
    }
    if (next == std::string::npos) break;
    pos = next + kMistral.size();
  }
  if (found.empty()) return false;
  calls.insert(calls.end(), found.begin(), found.end());
  return true;
}

bool parse_gemma_calls(std::string_view text, std::vector<ToolCall>& calls) {
  text = trim_view(text);
  for (std::string_view fence : {kFenceTool, kFenceJson}) {
    if (text.substr(0, fence.size()) == fence) {
      text = text.substr(fence.size());
      size_t close = text.rfind("```");
      if (close != std::string_view::npos) text = text.substr(0, close);
      text = trim_view(text);
      break;
    }
  }
  if (!text.empty() && (text[0] == '{' || text[0] == '[')) return parse_llama3_calls(text, calls);
  std::vector<ToolCall> found;
  for (const std::string_view line : {text}) {
    if (!parse_python_call(line, found)) return false;
  }
  calls.insert(calls.end(), found.begin(), found.end());
  return true;
}

void ParsedDelta::append(ParsedDelta&& o) {
  content += o.content;
  reasoning += o.reasoning;
  for (auto& c : o.tool_calls) tool_calls.push_back(std::move(c));
}

OutputParser::OutputParser(ToolFormat tools, bool reasoning, bool start_in_reasoning)
    : tools_(tools), reasoning_(reasoning) {
  if (reasoning_ && start_in_reasoning) state_ = State::Reasoning;
}

ParsedDelta OutputParser::push(std::string_view text) {
  pending_.append(text);
  ParsedDelta out;
  step(out, false);
  return out;
}

ParsedDelta OutputParser::finish() {
  ParsedDelta out;
  step(out, true);
  return out;
}

void OutputParser::emit_content(ParsedDelta& out, std::string text) {
  // Whitespace between consecutive tool calls is markup, not content.
  if (after_tool_) {
    std::string_view t = ltrim_view(text);
    if (t.empty()) return;
    text = std::string(t);
    after_tool_ = false;
  }
  out.content += text;
}

// Decides what the output opens with; false when more text is needed.
bool OutputParser::start_state(ParsedDelta& out, bool final) {
  std::string_view head = ltrim_view(pending_);
  if (head.empty() && !final) return false;
  std::vector<std::pair<std::string_view, State>> openers;
  if (reasoning_ && !reasoning_done_) openers.push_back({kThinkOpen, State::Reasoning});
  if (tools_ == ToolFormat::Llama3Json || tools_ == ToolFormat::Gemma) {
    openers.push_back({"{", State::ToolTail});
    openers.push_back({"[", State::ToolTail});
    openers.push_back({kPythonTag, State::ToolTail});
  }
  // The engine's text skips special tokens, so [TOOL_CALLS] may be gone and
  // only its JSON array left.
  if (tools_ == ToolFormat::Mistral) openers.push_back({"[{", State::ToolTail});
  if (tools_ == ToolFormat::Gemma) {
    openers.push_back({kFenceTool, State::ToolTail});
    openers.push_back({kFenceJson, State::ToolTail});
  }
  for (auto& [marker, next] : openers) {
    if (head.substr(0, marker.size()) == marker) {
      if (next == State::Reasoning) {
        pending_ = std::string(head.substr(marker.size()));
      } else {
        pending_ = std::string(head);
      }
      state_ = next;
      return true;
    }
    if (!final && is_prefix_of(head, marker)) return false;
  }
  state_ = State::Content;
  return true;
}

void OutputParser::step(ParsedDelta& out, bool final) {
  while (true) {
    switch (state_) {
      case State::Start:
        if (!start_state(out, final)) return;
        if (final && pending_.empty()) return;
        continue;
      case State::Reasoning: {
        size_t close = pending_.find(kThinkClose);
        if (close != std::string::npos) {
          out.reasoning += pending_.substr(0, close);
          pending_.erase(0, close + kThinkClose.size());
          reasoning_done_ = true;
          state_ = State::Start;
          continue;
        }
        size_t hold = final ? 0 : held_suffix(pending_, kThinkClose);
        out.reasoning += pending_.substr(0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return;
      }
      case State::Content: {
        std::string_view marker;
        if (tools_ == ToolFormat::Hermes) marker = kHermesOpen;
        else if (tools_ == ToolFormat::Mistral) marker = kMistral;
        else if (tools_ == ToolFormat::Llama3Json) marker = kPythonTag;
        else if (tools_ == ToolFormat::Gemma) marker = kFenceTool;
        size_t at = marker.empty() ? std::string::npos : pending_.find(marker);
        if (at != std::string::npos) {
          emit_content(out, pending_.substr(0, at));
          if (tools_ == ToolFormat::Hermes) {
            pending_.erase(0, at + marker.size());
            state_ = State::ToolBlock;
          } else {
            pending_.erase(0, at);
            state_ = State::ToolTail;
          }
          continue;
        }
        size_t hold = (final || marker.empty()) ? 0 : held_suffix(pending_, marker);
        std::string text = pending_.substr(0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        if (!text.empty()) emit_content(out, std::move(text));
        return;
      }
      case State::ToolBlock: {
        size_t close = pending_.find(kHermesClose);
        if (close == std::string::npos && !final) return;
        std::string body = pending_.substr(0, close);
        if (parse_hermes_call(body, out.tool_calls)) {
          after_tool_ = true;
        } else {
          emit_content(out, std::string(kHermesOpen) + body + (close == std::string::npos ? "" : std::string(kHermesClose)));
        }
        pending_.erase(0, close == std::string::npos ? pending_.size() : close + kHermesClose.size());
        state_ = State::Content;
        if (final && pending_.empty()) return;
        continue;
      }
      case State::ToolTail:
        if (!final) return;
        parse_tail(out);
        return;
    }
  }
}

void OutputParser::parse_tail(ParsedDelta& out) {
  bool ok = false;
  if (tools_ == ToolFormat::Mistral) ok = parse_mistral_calls(pending_, out.tool_calls);
  else if (tools_ == ToolFormat::Llama3Json) ok = parse_llama3_calls(pending_, out.tool_calls);
  else if (tools_ == ToolFormat::Gemma) ok = parse_gemma_calls(pending_, out.tool_calls);
  if (!ok) emit_content(out, pending_);
  pending_.clear();
}

}  // namespace ingot::server
