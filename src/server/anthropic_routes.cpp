// POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages API).
#include "server/api_error.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/routes.h"
#include "server/service.h"
#include "server/sse.h"

namespace ingot::server {

namespace {

std::string text_of_blocks(const json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_request("content must be a string or an array of blocks", param);
  std::string text;
  for (const json& b : content) {
    if (!b.is_object() || opt_string(b, "type").value_or("") != "text")
      bad_request("only text blocks are allowed here", param);
    text += req_string(b, "text");
  }
  return text;
}

// Anthropic messages -> the OpenAI-style messages the chat template renders.
json to_chat_messages(const json& body) {
  json out = json::array();
  if (auto sys = body.find("system"); sys != body.end() && !sys->is_null())
    out.push_back({{"role", "system"}, {"content", text_of_blocks(*sys, "system")}});
  const json* msgs = opt_array(body, "messages");
  if (!msgs || msgs->empty()) bad_request("'messages' is required and must not be empty", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    std::string p = "messages." + std::to_string(i);
    if (!m.is_object()) bad_request("each message must be an object", p);
    std::string role = req_string(m, "role");
    if (role != "user" && role != "assistant") bad_request("role must be user or assistant", p + ".role");
    auto c = m.find("content");
    if (c == m.end()) bad_request("each message needs 'content'", p + ".content");
    if (c->is_string()) {
      out.push_back({{"role", role}, {"content", *c}});
      continue;
    }
    if (!c->is_array()) bad_request("content must be a string or an array of blocks", p + ".content");
    std::string text, reasoning;
    json tool_calls = json::array();
    for (const json& b : *c) {
      if (!b.is_object()) bad_request("content blocks must be objects", p + ".content");
      std::string type = req_string(b, "type");
      if (type == "text") {
        text += req_string(b, "text");
      } else if (type == "thinking") {
        reasoning += opt_string(b, "thinking").value_or("");
      } else if (type == "redacted_thinking") {
      } else if (type == "tool_use" && role == "assistant") {
        json input = b.contains("input") ? b["input"] : json::object();
        if (!input.is_object()) bad_request("tool_use.input must be an object", p + ".content");
        tool_calls.push_back({{"id", req_string(b, "id")}, {"type", "function"},
                              {"function", {{"name", req_string(b, "name")}, {"arguments", input}}}});
      } else if (type == "tool_result" && role == "user") {
        std::string result;
        if (auto rc = b.find("content"); rc != b.end() && !rc->is_null()) result = text_of_blocks(*rc, p + ".content");
        out.push_back({{"role", "tool"}, {"tool_call_id", req_string(b, "tool_use_id")}, {"content", result}});
      } else {
        bad_request("unsupported content block type '" + type + "' for role " + role, p + ".content");
      }
    }
    if (role == "user" && text.empty() && !out.empty() && out.back()["role"] == "tool") continue;
    json msg = {{"role", role}, {"content", text}};
    if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
    if (!tool_calls.empty()) msg["tool_calls"] = tool_calls;
    out.push_back(std::move(msg));
  }
  return out;
}

json to_chat_tools(const json& tools) {
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    std::string p = "tools." + std::to_string(i);
    if (!t.is_object()) bad_request("each tool must be an object", p);
    json schema = t.contains("input_schema") ? t["input_schema"] : json{{"type", "object"}};
    out.push_back({{"type", "function"},
                   {"function", {{"name", req_string(t, "name")},
                                 {"description", opt_string(t, "description").value_or("")},
                                 {"parameters", schema}}}});
  }
  return out;
}

// Seconds one `cache_control` marker pins the prompt's cached prefix for.
int64_t marker_seconds(const json& cc, const std::string& param) {
  if (!cc.is_object() || opt_string(cc, "type").value_or("") != "ephemeral")
    bad_request("cache_control must be {\"type\": \"ephemeral\"} with an optional ttl", param);
  const std::string ttl = opt_string(cc, "ttl").value_or("5m");
  if (ttl == "5m") return 5 * 60;
  if (ttl == "1h") return 60 * 60;
  bad_request("cache_control.ttl must be \"5m\" or \"1h\"", param + ".ttl");
}

// The longest pin any cache_control marker of the request asks for (0: none).
// The prompt is cached either way; a marker keeps it in preference to others.
int64_t cache_pin_seconds(const json& body) {
  int64_t pin = 0;
  auto blocks = [&](const json& content, const std::string& param) {
    if (!content.is_array()) return;
    for (size_t i = 0; i < content.size(); ++i)
      if (content[i].is_object() && content[i].contains("cache_control"))
        pin = std::max(pin, marker_seconds(content[i]["cache_control"], param + "." + std::to_string(i) + ".cache_control"));
  };
  if (auto sys = body.find("system"); sys != body.end()) blocks(*sys, "system");
  if (const json* tools = opt_array(body, "tools")) blocks(*tools, "tools");
  if (const json* msgs = opt_array(body, "messages"))
    for (size_t i = 0; i < msgs->size(); ++i)
      if ((*msgs)[i].is_object() && (*msgs)[i].contains("content"))
        blocks((*msgs)[i]["content"], "messages." + std::to_string(i) + ".content");
  return pin;
}

struct MessagesSetup {
  std::string id = random_id("msg_");
  ToolFormat tools = ToolFormat::None;
  bool reasoning = false, opens_reasoning = false;
  std::vector<std::string> stops;
  int64_t input_tokens = 0;
};

Prompt render(Service& svc, const json& body, bool* use_tools) {
  json messages = to_chat_messages(body);
  json tools;
  if (const json* t = opt_array(body, "tools")) tools = to_chat_tools(*t);
  std::string choice = "auto";
  if (const json* tc = opt_object(body, "tool_choice")) choice = opt_string(*tc, "type").value_or("auto");
  *use_tools = tools.is_array() && !tools.empty() && choice != "none";
  return svc.render_chat(messages, *use_tools ? &tools : nullptr, nullptr);
}

std::pair<std::string, json> stop_reason(const GenOutput& o, const MessagesSetup& st, bool tools) {
  if (o.reason == engine::FinishReason::Length) return {"max_tokens", nullptr};
  if (tools) return {"tool_use", nullptr};
  for (const auto& s : st.stops)
    if (!o.stop_matched.empty() && o.stop_matched == s) return {"stop_sequence", s};
  return {"end_turn", nullptr};
}

// Anthropic counts input in three parts that add up to the prompt: read from
// the prompt cache, newly written to it, and the rest; speculative decoding's
// draft tokens beside them.
json usage_json(const engine::Usage& u) {
  const int64_t read = u.cached_prompt_tokens, created = u.cache_written_tokens;
  json usage = {{"input_tokens", std::max<int64_t>(0, u.prompt_tokens - read - created)},
                {"output_tokens", u.completion_tokens},
                {"cache_read_input_tokens", read},
                {"cache_creation_input_tokens", created}};
  usage.update(prediction_tokens_json(u.draft_tokens, u.accepted_draft_tokens));
  return usage;
}

json tool_use_block(const ToolCall& c) {
  json input = json::parse(c.arguments, nullptr, false);
  return {{"type", "tool_use"}, {"id", "toolu_" + c.id.substr(5)}, {"name", c.name},
          {"input", input.is_discarded() ? json::object() : input}};
}

}  // namespace

HttpResponse anthropic_messages(Service& svc, const HttpRequest& req) {
  json body = parse_json_body(req.body);
  svc.check_model(body);
  if (!opt_int(body, "max_tokens", 1, INT32_MAX)) bad_request("'max_tokens' is required", "max_tokens");
  opt_number(body, "temperature", 0, 1);
  bool use_tools = false;
  Prompt prompt = render(svc, body, &use_tools);
  svc.check_prompt_length(prompt.ids.size(), "messages");
  json sampling = body;
  sampling.erase("stop");
  if (const json* ss = opt_array(body, "stop_sequences")) sampling["stop"] = *ss;
  engine::Request r = svc.base_request(sampling, prompt.ids, "max_tokens");
  r.cache_pin_seconds = cache_pin_seconds(body);
  MessagesSetup st;
  st.stops = r.stop.stop_strings;
  st.tools = use_tools ? svc.options().tool_format : ToolFormat::None;
  st.reasoning = svc.options().template_thinks;
  st.opens_reasoning = prompt.opens_reasoning;
  st.input_tokens = static_cast<int64_t>(prompt.ids.size());
  std::vector<engine::Request> reqs;
  reqs.push_back(std::move(r));
  auto gen = std::make_shared<Generation>(svc, std::move(reqs));
  const std::string model = svc.options().model_id;

  if (opt_bool(body, "stream").value_or(false)) {
    auto gone = req.client_gone;
    return sse_response([gen, st, model, gone](StreamSink& sink) {
      auto send = [&](const char* name, const json& data) { return sink.write(sse_event(name, dump_json(data))); };
      json start = {{"type", "message_start"},
                    {"message", {{"id", st.id}, {"type", "message"}, {"role", "assistant"}, {"model", model},
                                 {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                                 {"usage", {{"input_tokens", st.input_tokens}, {"output_tokens", 0}}}}}};
      if (!send("message_start", start) || !send("ping", {{"type", "ping"}})) return;
      OutputParser parser(st.tools, st.reasoning, st.opens_reasoning);
      int index = -1;
      std::string open;  // "", "text" or "thinking"
      bool any_tool = false;
      auto close_block = [&] {
        if (open.empty()) return true;
        open.clear();
        return send("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
      };
      auto open_block = [&](const std::string& kind, json block) {
        if (open == kind) return true;
        if (!close_block()) return false;
        open = kind;
        return send("content_block_start", {{"type", "content_block_start"}, {"index", ++index}, {"content_block", block}});
      };
      auto emit = [&](ParsedDelta d) {
        if (!d.reasoning.empty()) {
          if (!open_block("thinking", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}})) return false;
          if (!send("content_block_delta", {{"type", "content_block_delta"}, {"index", index},
                                            {"delta", {{"type", "thinking_delta"}, {"thinking", d.reasoning}}}}))
            return false;
        }
        if (!d.content.empty()) {
          if (!open_block("text", {{"type", "text"}, {"text", ""}})) return false;
          if (!send("content_block_delta", {{"type", "content_block_delta"}, {"index", index},
                                            {"delta", {{"type", "text_delta"}, {"text", d.content}}}}))
            return false;
        }
        for (const ToolCall& c : d.tool_calls) {
          any_tool = true;
          if (!close_block()) return false;
          json block = tool_use_block(c);
          std::string args = block["input"].dump();
          block["input"] = json::object();
          if (!send("content_block_start", {{"type", "content_block_start"}, {"index", ++index}, {"content_block", block}}) ||
              !send("content_block_delta", {{"type", "content_block_delta"}, {"index", index},
                                            {"delta", {{"type", "input_json_delta"}, {"partial_json", args}}}}) ||
              !send("content_block_stop", {{"type", "content_block_stop"}, {"index", index}}))
            return false;
        }
        return true;
      };
      bool ok = gen->run(
          [&](size_t, const engine::Chunk& c) {
            std::string text;
            for (const auto& t : c.tokens) text += t.text;
            if (!emit(parser.push(text))) return false;
            if (!c.finished) return true;
            if (!emit(parser.finish()) || !close_block()) return false;
            if (c.reason == engine::FinishReason::Error)
              return send("error", anthropic_error_body(500, "generation failed: " + c.error));
            auto [reason, seq] = stop_reason(gen->outputs()[0], st, any_tool);
            return send("message_delta", {{"type", "message_delta"},
                                          {"delta", {{"stop_reason", reason}, {"stop_sequence", seq}}},
                                          {"usage", usage_json(c.usage)}}) &&
                   send("message_stop", {{"type", "message_stop"}});
          },
          gone, [&] { return send("ping", {{"type", "ping"}}); });
      (void)ok;
    });
  }

  if (!gen->run(nullptr, req.client_gone)) return json_response(anthropic_error_body(499, "client closed the request"), 499);
  const GenOutput& o = gen->outputs()[0];
  if (o.reason == engine::FinishReason::Error) throw ApiError(500, "generation failed: " + o.error);
  OutputParser parser(st.tools, st.reasoning, st.opens_reasoning);
  ParsedDelta d = parser.push(o.text);
  d.append(parser.finish());
  json content = json::array();
  if (!d.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", d.reasoning}, {"signature", ""}});
  if (!d.content.empty()) content.push_back({{"type", "text"}, {"text", d.content}});
  for (const ToolCall& c : d.tool_calls) content.push_back(tool_use_block(c));
  auto [reason, seq] = stop_reason(o, st, !d.tool_calls.empty());
  return json_response({{"id", st.id}, {"type", "message"}, {"role", "assistant"}, {"model", model},
                        {"content", content}, {"stop_reason", reason}, {"stop_sequence", seq},
                        {"usage", usage_json(o.usage)}});
}

HttpResponse anthropic_count_tokens(Service& svc, const HttpRequest& req) {
  json body = parse_json_body(req.body);
  svc.check_model(body);
  bool use_tools = false;
  Prompt prompt = render(svc, body, &use_tools);
  return json_response({{"input_tokens", prompt.ids.size()}});
}

}  // namespace ingot::server
