// POST /v1/chat/completions.
#include <cmath>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/routes.h"
#include "server/service.h"
#include "server/sse.h"
#include "server/structured.h"

namespace ingot::server {

HttpResponse json_response(const json& body, int status) {
  HttpResponse r;
  r.status = status;
  r.body = dump_json(body);
  return r;
}

HttpResponse sse_response(std::function<void(StreamSink&)> body) {
  HttpResponse r;
  r.content_type = "text/event-stream";
  r.headers.push_back({"Cache-Control", "no-cache"});
  r.stream = std::move(body);
  return r;
}

void validate_chat_tools(const json& tools) {
  for (size_t i = 0; i < tools.size(); ++i) {
    std::string p = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object()) bad_request("each tool must be an object", p);
    if (opt_string(t, "type").value_or("function") != "function") bad_request("only function tools are supported", p + ".type");
    const json* f = opt_object(t, "function");
    if (!f) bad_request("a tool needs a 'function' object", p + ".function");
    if (req_string(*f, "name").empty()) bad_request("a function needs a name", p + ".function.name");
  }
}

json chat_logprobs(const Service& svc, const std::vector<engine::TokenEvent>& tokens, size_t from, size_t to,
                   bool with_top) {
  json content = json::array();
  auto bytes_of = [](const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(static_cast<int>(c));
    return b;
  };
  for (size_t i = from; i < to; ++i) {
    const auto& t = tokens[i];
    std::string text = svc.token_text(t.token);
    json entry = {{"token", text}, {"logprob", t.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", json::array()}};
    if (with_top)
      for (const auto& alt : t.top) {
        std::string at = svc.token_text(alt.token);
        entry["top_logprobs"].push_back({{"token", at}, {"logprob", alt.logprob}, {"bytes", bytes_of(at)}});
      }
    content.push_back(std::move(entry));
  }
  return {{"content", content}};
}

namespace {

json usage_json(const std::vector<GenOutput>& outs) {
  int64_t prompt = outs.empty() ? 0 : outs[0].usage.prompt_tokens, cached = 0, completion = 0, drafted = 0, kept = 0;
  for (const auto& o : outs) {
    completion += o.usage.completion_tokens;
    cached = std::max(cached, o.usage.cached_prompt_tokens);
    drafted += o.usage.draft_tokens;
    kept += o.usage.accepted_draft_tokens;
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}},
          {"completion_tokens_details", prediction_tokens_json(drafted, kept)}};
}

json tool_calls_json(const std::vector<ToolCall>& calls, size_t first_index, bool with_index) {
  json arr = json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    json c = {{"id", calls[k].id},
              {"type", "function"},
              {"function", {{"name", calls[k].name}, {"arguments", calls[k].arguments}}}};
    if (with_index) c["index"] = first_index + k;
    arr.push_back(std::move(c));
  }
  return arr;
}

struct ChatSetup {
  std::string id = random_id("chatcmpl-");
  int64_t created = unix_time();
  ToolFormat tools = ToolFormat::None;
  bool reasoning = false, opens_reasoning = false;
  bool logprobs = false;
  int top_logprobs = 0;
  bool include_usage = false;
};

void throw_if_failed(const GenOutput& o) {
  if (o.reason == engine::FinishReason::Error) throw ApiError(500, "generation failed: " + o.error);
}

HttpResponse chat_stream(Service& svc, std::shared_ptr<Generation> gen, ChatSetup st, const HttpRequest& req) {
  auto client_gone = req.client_gone;
  return sse_response([&svc, gen, st, client_gone](StreamSink& sink) {
    size_t n = gen->outputs().size();
    std::vector<OutputParser> parsers(n, OutputParser(st.tools, st.reasoning, st.opens_reasoning));
    std::vector<size_t> tool_index(n, 0), sent_tokens(n, 0);
    std::vector<bool> any_tool(n, false);
    auto chunk = [&](json choices) {
      json c = {{"id", st.id}, {"object", "chat.completion.chunk"}, {"created", st.created},
                {"model", svc.options().model_id}, {"system_fingerprint", "ingot"}, {"choices", std::move(choices)}};
      if (st.include_usage) c["usage"] = nullptr;
      return sink.write(sse_data(dump_json(c)));
    };
    for (size_t i = 0; i < n; ++i)
      if (!chunk(json::array({{{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}},
                               {"logprobs", nullptr}, {"finish_reason", nullptr}}})))
        return;
    auto send_delta = [&](size_t i, ParsedDelta d, const json& finish) {
      const auto& toks = gen->outputs()[i].tokens;
      json lp = nullptr;
      if (st.logprobs && sent_tokens[i] < toks.size()) {
        lp = chat_logprobs(svc, toks, sent_tokens[i], toks.size(), st.top_logprobs > 0);
        sent_tokens[i] = toks.size();
      }
      if (d.empty() && finish.is_null() && lp.is_null()) return true;
      json delta = json::object();
      if (!d.content.empty()) delta["content"] = d.content;
      if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
      if (!d.tool_calls.empty()) {
        delta["tool_calls"] = tool_calls_json(d.tool_calls, tool_index[i], true);
        tool_index[i] += d.tool_calls.size();
        any_tool[i] = true;
      }
      return chunk(json::array({{{"index", i}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", finish}}}));
    };
    bool ok = gen->run(
        [&](size_t i, const engine::Chunk& c) {
          std::string text;
          for (const auto& t : c.tokens) text += t.text;
          if (!send_delta(i, parsers[i].push(text), nullptr)) return false;
          if (!c.finished) return true;
          ParsedDelta rest = parsers[i].finish();
          bool tools = any_tool[i] || !rest.tool_calls.empty();
          std::string finish = c.reason == engine::FinishReason::Error ? "error" : openai_finish_reason(c.reason);
          if (tools && c.reason == engine::FinishReason::Stop) finish = "tool_calls";
          return send_delta(i, std::move(rest), finish);
        },
        client_gone, [&] { return sink.write(sse_comment()); });
    if (!ok) return;
    if (st.include_usage) {
      json c = {{"id", st.id}, {"object", "chat.completion.chunk"}, {"created", st.created},
                {"model", svc.options().model_id}, {"choices", json::array()}, {"usage", usage_json(gen->outputs())}};
      if (!sink.write(sse_data(dump_json(c)))) return;
    }
    sink.write(sse_done());
  });
}

}  // namespace

HttpResponse chat_completions(Service& svc, const HttpRequest& req) {
  json body = parse_json_body(req.body);
  svc.check_model(body);
  auto m = body.find("messages");
  if (m == body.end()) bad_request("'messages' is required", "messages");
  const json* tools = opt_array(body, "tools");
  if (tools) validate_chat_tools(*tools);
  std::string tool_choice = "auto";
  if (auto tc = body.find("tool_choice"); tc != body.end() && !tc->is_null()) {
    if (tc->is_string()) {
      tool_choice = tc->get<std::string>();
      if (tool_choice != "auto" && tool_choice != "none" && tool_choice != "required")
        bad_request("'tool_choice' must be auto, none, required or a function", "tool_choice");
    } else if (!tc->is_object()) {
      bad_request("'tool_choice' must be a string or an object", "tool_choice");
    }
  }
  auto grammar = response_format_grammar(svc, body);
  int64_t n = opt_int(body, "n", 1, 16).value_or(1);
  bool stream = opt_bool(body, "stream").value_or(false);
  ChatSetup st;
  if (const json* so = opt_object(body, "stream_options")) st.include_usage = opt_bool(*so, "include_usage").value_or(false);
  st.logprobs = opt_bool(body, "logprobs").value_or(false);
  st.top_logprobs = static_cast<int>(opt_int(body, "top_logprobs", 0, 20).value_or(0));
  if (st.top_logprobs > 0 && !st.logprobs) bad_request("'top_logprobs' requires 'logprobs': true", "top_logprobs");
  opt_string(body, "user");
  const json* kwargs = opt_object(body, "chat_template_kwargs");
  bool use_tools = tools && !tools->empty() && tool_choice != "none";
  Prompt prompt = svc.render_chat(*m, use_tools ? tools : nullptr, kwargs);
  svc.check_prompt_length(prompt.ids.size(), "messages");
  engine::Request base = svc.base_request(body, prompt.ids, "max_completion_tokens");
  base.sampling.logprobs = st.logprobs;
  base.sampling.top_logprobs = st.top_logprobs;
  base.grammar = grammar;
  std::vector<engine::Request> reqs;
  for (int64_t i = 0; i < n; ++i) {
    engine::Request r = base;
    if (r.sampling.seed) r.sampling.seed = *r.sampling.seed + static_cast<uint64_t>(i);
    reqs.push_back(std::move(r));
  }
  // Constrained output is all content: no tool-call or reasoning markup to parse.
  st.tools = use_tools && !grammar ? svc.options().tool_format : ToolFormat::None;
  st.reasoning = svc.options().template_thinks && !grammar;
  st.opens_reasoning = prompt.opens_reasoning && !grammar;
  auto gen = std::make_shared<Generation>(svc, std::move(reqs));
  if (stream) return chat_stream(svc, gen, st, req);

  if (!gen->run(nullptr, req.client_gone)) return json_response(openai_error_body(499, "client closed the request"), 499);
  json choices = json::array();
  for (size_t i = 0; i < gen->outputs().size(); ++i) {
    const GenOutput& o = gen->outputs()[i];
    throw_if_failed(o);
    OutputParser parser(st.tools, st.reasoning, st.opens_reasoning);
    ParsedDelta d = parser.push(o.text);
    d.append(parser.finish());
    json msg = {{"role", "assistant"}, {"content", d.content}};
    if (!d.reasoning.empty()) msg["reasoning_content"] = d.reasoning;
    std::string finish = openai_finish_reason(o.reason);
    if (!d.tool_calls.empty()) {
      msg["tool_calls"] = tool_calls_json(d.tool_calls, 0, false);
      if (d.content.empty()) msg["content"] = nullptr;
      if (o.reason == engine::FinishReason::Stop) finish = "tool_calls";
    }
    choices.push_back({{"index", i},
                       {"message", msg},
                       {"logprobs", st.logprobs ? chat_logprobs(svc, o.tokens, 0, o.tokens.size(), st.top_logprobs > 0)
                                                : json()},
                       {"finish_reason", finish}});
  }
  return json_response({{"id", st.id},
                        {"object", "chat.completion"},
                        {"created", st.created},
                        {"model", svc.options().model_id},
                        {"system_fingerprint", "ingot"},
                        {"choices", choices},
                        {"usage", usage_json(gen->outputs())}});
}

}  // namespace ingot::server
