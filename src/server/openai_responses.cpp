// POST /v1/responses (OpenAI Responses API) with a bounded in-memory store
// for previous_response_id.
#include "server/structured.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/routes.h"
#include "server/service.h"
#include "server/sse.h"

namespace ingot::server {

namespace {

// Responses input items -> chat messages.
void append_input(json& msgs, const json& input) {
  if (input.is_string()) {
    msgs.push_back({{"role", "user"}, {"content", input}});
    return;
  }
  if (!input.is_array()) bad_request("'input' must be a string or an array of items", "input");
  for (size_t i = 0; i < input.size(); ++i) {
    const json& it = input[i];
    std::string p = "input[" + std::to_string(i) + "]";
    if (!it.is_object()) bad_request("input items must be objects", p);
    std::string type = opt_string(it, "type").value_or("message");
    if (type == "message") {
      std::string role = req_string(it, "role");
      msgs.push_back({{"role", role}, {"content", it.contains("content") ? it["content"] : json("")}});
    } else if (type == "function_call") {
      json call = {{"id", req_string(it, "call_id")}, {"type", "function"},
                   {"function", {{"name", req_string(it, "name")}, {"arguments", opt_string(it, "arguments").value_or("{}")}}}};
      if (!msgs.empty() && msgs.back()["role"] == "assistant" && msgs.back().contains("tool_calls"))
        msgs.back()["tool_calls"].push_back(call);
      else
        msgs.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
    } else if (type == "function_call_output") {
      auto out = it.find("output");
      std::string text = out == it.end() ? "" : out->is_string() ? out->get<std::string>() : out->dump();
      msgs.push_back({{"role", "tool"}, {"tool_call_id", req_string(it, "call_id")}, {"content", text}});
    } else if (type == "reasoning") {
    } else {
      bad_request("unsupported input item type '" + type + "'", p + ".type");
    }
  }
}

json to_chat_tools(const json& tools) {
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    std::string p = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || opt_string(t, "type").value_or("") != "function")
      bad_request("only function tools are supported", p + ".type");
    out.push_back({{"type", "function"},
                   {"function", {{"name", req_string(t, "name")}, {"description", opt_string(t, "description").value_or("")},
                                 {"parameters", t.contains("parameters") ? t["parameters"] : json::object()}}}});
  }
  return out;
}

}  // namespace

HttpResponse responses(Service& svc, const HttpRequest& req) {
  json body = parse_json_body(req.body);
  svc.check_model(body);
  json msgs = json::array();
  auto instructions = opt_string(body, "instructions");
  if (instructions) msgs.push_back({{"role", "system"}, {"content", *instructions}});
  auto prev = opt_string(body, "previous_response_id");
  if (prev) {
    json history;
    if (!svc.responses().get(*prev, &history))
      throw ApiError(404, "previous response '" + *prev + "' not found (it may have been evicted)", "previous_response_id");
    for (const json& m : history)
      if (m.value("role", "") != "system") msgs.push_back(m);
  }
  if (!body.contains("input")) bad_request("'input' is required", "input");
  append_input(msgs, body["input"]);
  json tools;
  if (const json* t = opt_array(body, "tools")) tools = to_chat_tools(*t);
  bool use_tools = tools.is_array() && !tools.empty();
  bool store = opt_bool(body, "store").value_or(true);
  bool stream = opt_bool(body, "stream").value_or(false);
  Prompt prompt = svc.render_chat(msgs, use_tools ? &tools : nullptr, nullptr);
  svc.check_prompt_length(prompt.ids.size(), "input");
  auto grammar = text_format_grammar(svc, body);
  std::vector<engine::Request> reqs;
  reqs.push_back(svc.base_request(body, prompt.ids, "max_output_tokens"));
  reqs.back().grammar = grammar;
  auto gen = std::make_shared<Generation>(svc, std::move(reqs));
  // Constrained output is all content: no tool-call or reasoning markup to parse.
  ToolFormat fmt = use_tools && !grammar ? svc.options().tool_format : ToolFormat::None;
  bool thinks = svc.options().template_thinks && !grammar, opens = prompt.opens_reasoning && !grammar;
  std::string id = random_id("resp_"), msg_id = random_id("msg_");
  int64_t created = unix_time();
  std::string model = svc.options().model_id;
  json text_cfg = {{"format", {{"type", "text"}}}};
  if (grammar) text_cfg = body["text"];

  // The final response object (and the stored conversation) from the output.
  auto finish = [&svc, gen, id, msg_id, created, model, msgs, store, prev, fmt, thinks, opens, tools, text_cfg]() {
    const GenOutput& o = gen->outputs()[0];
    OutputParser parser(fmt, thinks, opens);
    ParsedDelta d = parser.push(o.text);
    d.append(parser.finish());
    json output = json::array();
    if (!d.reasoning.empty())
      output.push_back({{"type", "reasoning"}, {"id", random_id("rs_")},
                        {"summary", json::array()}, {"content", json::array({{{"type", "reasoning_text"}, {"text", d.reasoning}}})}});
    if (!d.content.empty() || d.tool_calls.empty())
      output.push_back({{"type", "message"}, {"id", msg_id}, {"status", "completed"}, {"role", "assistant"},
                        {"content", json::array({{{"type", "output_text"}, {"text", d.content}, {"annotations", json::array()}}})}});
    json assistant = {{"role", "assistant"}, {"content", d.content}};
    for (const ToolCall& c : d.tool_calls) {
      output.push_back({{"type", "function_call"}, {"id", random_id("fc_")}, {"call_id", c.id}, {"name", c.name},
                        {"arguments", c.arguments}, {"status", "completed"}});
      assistant["tool_calls"].push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    bool incomplete = o.reason == engine::FinishReason::Length;
    json output_details = prediction_tokens_json(o.usage.draft_tokens, o.usage.accepted_draft_tokens);
    output_details["reasoning_tokens"] = 0;
    json r = {{"id", id}, {"object", "response"}, {"created_at", created}, {"model", model},
              {"status", incomplete ? "incomplete" : "completed"},
              {"incomplete_details", incomplete ? json{{"reason", "max_output_tokens"}} : json()},
              {"error", nullptr}, {"output", output}, {"parallel_tool_calls", true},
              {"previous_response_id", prev ? json(*prev) : json()}, {"tools", tools.is_null() ? json::array() : tools},
              {"tool_choice", "auto"}, {"text", text_cfg}, {"metadata", json::object()},
              {"usage", {{"input_tokens", o.usage.prompt_tokens}, {"output_tokens", o.usage.completion_tokens},
                         {"total_tokens", o.usage.prompt_tokens + o.usage.completion_tokens},
                         {"input_tokens_details", {{"cached_tokens", o.usage.cached_prompt_tokens}}},
                         {"output_tokens_details", output_details}}}};
    if (store) {
      json conv = msgs;
      conv.push_back(assistant);
      svc.responses().put(id, conv);
    }
    return r;
  };

  if (stream) {
    auto gone = req.client_gone;
    return sse_response([gen, id, msg_id, created, model, finish, gone, fmt, thinks, opens](StreamSink& sink) {
      int seq = 0;
      auto send = [&](const char* type, json data) {
        data["type"] = type;
        data["sequence_number"] = seq++;
        return sink.write(sse_event(type, dump_json(data)));
      };
      json shell = {{"id", id}, {"object", "response"}, {"created_at", created}, {"model", model},
                    {"status", "in_progress"}, {"output", json::array()}};
      json item = {{"type", "message"}, {"id", msg_id}, {"status", "in_progress"}, {"role", "assistant"}, {"content", json::array()}};
      if (!send("response.created", {{"response", shell}}) || !send("response.in_progress", {{"response", shell}}) ||
          !send("response.output_item.added", {{"output_index", 0}, {"item", item}}) ||
          !send("response.content_part.added", {{"item_id", msg_id}, {"output_index", 0}, {"content_index", 0},
                                                {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}}))
        return;
      // Only content streams as text deltas; reasoning and tool calls are items of the final response.
      OutputParser parser(fmt, thinks, opens);
      std::string text;
      auto delta = [&](const std::string& d) {
        if (d.empty()) return true;
        text += d;
        return send("response.output_text.delta",
                    {{"item_id", msg_id}, {"output_index", 0}, {"content_index", 0}, {"delta", d}, {"logprobs", json::array()}});
      };
      bool ok = gen->run(
          [&](size_t, const engine::Chunk& c) {
            std::string piece;
            for (const auto& t : c.tokens) piece += t.text;
            if (!delta(parser.push(piece).content)) return false;
            return !c.finished || delta(parser.finish().content);
          },
          gone, [&] { return sink.write(sse_comment()); });
      if (!ok) return;
      json final_response = finish();
      send("response.output_text.done", {{"item_id", msg_id}, {"output_index", 0}, {"content_index", 0}, {"text", text}, {"logprobs", json::array()}});
      send("response.content_part.done", {{"item_id", msg_id}, {"output_index", 0}, {"content_index", 0},
                                          {"part", {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}}}});
      item["status"] = "completed";
      item["content"] = json::array({{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}}});
      send("response.output_item.done", {{"output_index", 0}, {"item", item}});
      send(final_response["status"] == "completed" ? "response.completed" : "response.incomplete", {{"response", final_response}});
    });
  }
  if (!gen->run(nullptr, req.client_gone)) return json_response(openai_error_body(499, "client closed the request"), 499);
  if (gen->outputs()[0].reason == engine::FinishReason::Error)
    throw ApiError(500, "generation failed: " + gen->outputs()[0].error);
  return json_response(finish());
}

}  // namespace ingot::server
