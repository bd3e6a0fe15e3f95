// POST /v1/completions, GET /v1/models, and the
// tokenizer, health and metrics routes.
#include "server/structured.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/lora_registry.h"
#include "server/routes.h"
#include "server/service.h"
#include "server/speech_worker.h"
#include "server/sse.h"
#include "util/error.h"

namespace ingot::server {

namespace {

bool is_id_array(const json& a) {
  if (!a.is_array() || a.empty()) return false;
  for (const json& x : a)
    if (!x.is_number_integer()) return false;
  return true;
}

std::vector<int32_t> checked_ids(const Service& svc, const json& a, const std::string& param) {
  std::vector<int32_t> ids;
  int64_t vocab = svc.tokenizer().vocab_size();
  for (const json& x : a) {
    if (!x.is_number_integer()) bad_request("token ids must be integers", param);
    int64_t v = x.get<int64_t>();
    if (v < 0 || v >= vocab) bad_request(str_cat("token id ", v, " is out of range [0, ", vocab, ")"), param);
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

// Every prompt of `prompt` (string, [string], [int], [[int]]) as token ids.
std::vector<std::vector<int32_t>> completion_prompts(const Service& svc, const json& prompt) {
  std::vector<std::vector<int32_t>> out;
  if (prompt.is_string()) {
    out.push_back(svc.encode(prompt.get<std::string>(), true));
  } else if (is_id_array(prompt)) {
    out.push_back(checked_ids(svc, prompt, "prompt"));
  } else if (prompt.is_array() && !prompt.empty()) {
    for (const json& p : prompt) {
      if (p.is_string()) out.push_back(svc.encode(p.get<std::string>(), true));
      else if (is_id_array(p)) out.push_back(checked_ids(svc, p, "prompt"));
      else bad_request("'prompt' must be a string, an array of strings or an array of token ids", "prompt");
    }
  } else {
    bad_request("'prompt' must be a string, an array of strings or an array of token ids", "prompt");
  }
  if (out.size() > 64) bad_request("at most 64 prompts per request", "prompt");
  for (const auto& ids : out) svc.check_prompt_length(ids.size(), "prompt");
  return out;
}

json completion_logprobs(const Service& svc, const GenOutput& o, size_t from, size_t to, int top, size_t offset0) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  size_t offset = offset0;
  for (size_t i = from; i < to; ++i) {
    const auto& t = o.tokens[i];
    std::string text = svc.token_text(t.token);
    tokens.push_back(text);
    lps.push_back(t.logprob);
    json alt = json::object();
    for (int k = 0; k < top && k < static_cast<int>(t.top.size()); ++k) alt[svc.token_text(t.top[k].token)] = t.top[k].logprob;
    tops.push_back(alt);
    offsets.push_back(offset);
    offset += t.text.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

}  // namespace

HttpResponse completions(Service& svc, const HttpRequest& req) {
  json body = parse_json_body(req.body);
  svc.check_model(body);
  auto p = body.find("prompt");
  if (p == body.end() || p->is_null()) bad_request("'prompt' is required", "prompt");
  auto prompts = completion_prompts(svc, *p);
  int64_t n = opt_int(body, "n", 1, 16).value_or(1);
  bool stream = opt_bool(body, "stream").value_or(false);
  bool echo = opt_bool(body, "echo").value_or(false);
  int top = static_cast<int>(opt_int(body, "logprobs", 0, 5).value_or(-1));
  bool include_usage = false;
  if (const json* so = opt_object(body, "stream_options")) include_usage = opt_bool(*so, "include_usage").value_or(false);
  if (opt_int(body, "best_of", 1, 16).value_or(n) != n) bad_request("'best_of' other than n is not supported", "best_of");
  opt_string(body, "suffix");
  auto grammar = response_format_grammar(svc, body);
  std::vector<engine::Request> reqs;
  std::vector<std::string> echoes;
  for (const auto& ids : prompts) {
    engine::Request base = svc.base_request(body, ids, "max_tokens");
    base.sampling.logprobs = top >= 0;
    base.sampling.top_logprobs = std::max(top, 0);
    base.grammar = grammar;
    for (int64_t i = 0; i < n; ++i) {
      engine::Request r = base;
      if (r.sampling.seed) r.sampling.seed = *r.sampling.seed + static_cast<uint64_t>(i);
      reqs.push_back(std::move(r));
      echoes.push_back(echo ? svc.tokenizer().decode(ids, false) : "");
    }
  }
  std::string id = random_id("cmpl-");
  int64_t created = unix_time();
  auto gen = std::make_shared<Generation>(svc, std::move(reqs));
  auto usage = [gen] {
    int64_t prompt = 0, completion = 0, cached = 0, drafted = 0, kept = 0;
    for (size_t i = 0; i < gen->outputs().size(); ++i) {
      const auto& u = gen->outputs()[i].usage;
      prompt += u.prompt_tokens;
      completion += u.completion_tokens;
      cached += u.cached_prompt_tokens;
      drafted += u.draft_tokens;
      kept += u.accepted_draft_tokens;
    }
    return json{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion},
                {"prompt_tokens_details", {{"cached_tokens", cached}}},
                {"completion_tokens_details", prediction_tokens_json(drafted, kept)}};
  };
  if (stream) {
    auto gone = req.client_gone;
    return sse_response([&svc, gen, id, created, echoes, top, include_usage, usage, gone](StreamSink& sink) {
      std::vector<size_t> sent(gen->outputs().size(), 0);
      auto chunk = [&](size_t i, const std::string& text, json lp, json finish) {
        json c = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", svc.options().model_id},
                  {"choices", json::array({{{"index", i}, {"text", text}, {"logprobs", lp}, {"finish_reason", finish}}})}};
        if (include_usage) c["usage"] = nullptr;
        return sink.write(sse_data(dump_json(c)));
      };
      for (size_t i = 0; i < echoes.size(); ++i)
        if (!echoes[i].empty() && !chunk(i, echoes[i], nullptr, nullptr)) return;
      bool ok = gen->run(
          [&](size_t i, const engine::Chunk& c) {
            const GenOutput& o = gen->outputs()[i];
            std::string text;
            for (const auto& t : c.tokens) text += t.text;
            json lp = top >= 0 ? completion_logprobs(svc, o, sent[i], o.tokens.size(), top, 0) : json();
            sent[i] = o.tokens.size();
            json finish = c.finished ? json(openai_finish_reason(c.reason)) : json();
            if (text.empty() && !c.finished) return true;
            return chunk(i, text, lp, finish);
          },
          gone, [&] { return sink.write(sse_comment()); });
      if (!ok) return;
      if (include_usage) {
        json c = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", svc.options().model_id},
                  {"choices", json::array()}, {"usage", usage()}};
        if (!sink.write(sse_data(dump_json(c)))) return;
      }
      sink.write(sse_done());
    });
  }
  if (!gen->run(nullptr, req.client_gone)) return json_response(openai_error_body(499, "client closed the request"), 499);
  json choices = json::array();
  for (size_t i = 0; i < gen->outputs().size(); ++i) {
    const GenOutput& o = gen->outputs()[i];
    if (o.reason == engine::FinishReason::Error) throw ApiError(500, "generation failed: " + o.error);
    json lp = top >= 0 ? completion_logprobs(svc, o, 0, o.tokens.size(), top, echoes[i].size()) : json();
    choices.push_back({{"index", i}, {"text", echoes[i] + o.text}, {"logprobs", lp},
                       {"finish_reason", openai_finish_reason(o.reason)}});
  }
  return json_response({{"id", id}, {"object", "text_completion"}, {"created", created},
                        {"model", svc.options().model_id}, {"system_fingerprint", "ingot"},
                        {"choices", choices}, {"usage", usage()}});
}

namespace {
json adapter_entry(const Service& svc, const LoraRegistry::Listed& a) {
  return {{"id", a.name}, {"object", "model"}, {"created", unix_time()}, {"owned_by", "ingot"},
          {"root", a.path}, {"parent", svc.options().model_id}, {"max_model_len", svc.options().context_length}};
}

json speech_model_entry(const Service& svc) {
  // "audio": the web page shows its transcription button for such a model.
  return {{"id", svc.speech()->model_id()}, {"object", "model"}, {"created", unix_time()}, {"owned_by", "ingot"},
          {"audio", true}};
}
}  // namespace

HttpResponse list_models(Service& svc, const HttpRequest& req) {
  json model = {{"id", svc.options().model_id}, {"object", "model"}, {"created", unix_time()}, {"owned_by", "ingot"},
                {"max_model_len", svc.options().context_length}};
  const std::string prefix = "/v1/models/";
  if (req.path.size() > prefix.size()) {
    std::string want = req.path.substr(prefix.size());
    if (want == svc.options().model_id) return json_response(svc.options().text_model ? model : speech_model_entry(svc));
    if (svc.speech() && svc.speech()->serves(want)) return json_response(speech_model_entry(svc));
    if (svc.loras())
      for (const auto& a : svc.loras()->list())
        if (a.name == want) return json_response(adapter_entry(svc, a));
    throw ApiError(404, "model '" + want + "' not found", "model", "model_not_found");
  }
  json data = json::array({svc.options().text_model || !svc.speech() ? model : speech_model_entry(svc)});
  if (svc.speech() && svc.speech()->model_id() != svc.options().model_id) data.push_back(speech_model_entry(svc));
  if (svc.loras())
    for (const auto& a : svc.loras()->list()) data.push_back(adapter_entry(svc, a));
  return json_response({{"object", "list"}, {"data", data}});
}

HttpResponse tokenize(Service& svc, const HttpRequest& req) {
  json body = parse_json_body(req.body);
  std::vector<int32_t> ids;
  if (auto m = body.find("messages"); m != body.end()) {
    ids = svc.render_chat(*m, opt_array(body, "tools"), opt_object(body, "chat_template_kwargs")).ids;
  } else {
    std::string text = req_string(body, "prompt");
    ids = svc.encode(text, opt_bool(body, "add_special_tokens").value_or(true));
  }
  json tokens = ids;
  json out = {{"tokens", tokens}, {"count", ids.size()}, {"max_model_len", svc.options().context_length}};
  if (opt_bool(body, "return_token_strs").value_or(false)) {
    json strs = json::array();
    for (int32_t id : ids) strs.push_back(svc.tokenizer().id_to_token(id));
    out["token_strs"] = strs;
  }
  return json_response(out);
}

HttpResponse detokenize(Service& svc, const HttpRequest& req) {
  json body = parse_json_body(req.body);
  const json* tokens = opt_array(body, "tokens");
  if (!tokens) bad_request("'tokens' is required", "tokens");
  std::vector<int32_t> ids = checked_ids(svc, *tokens, "tokens");
  return json_response({{"prompt", svc.tokenizer().decode(ids, opt_bool(body, "skip_special_tokens").value_or(false))}});
}

HttpResponse health(Service&, const HttpRequest&) { return json_response({{"status", "ok"}}); }

HttpResponse metrics(Service& svc, const HttpRequest&) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = svc.metrics().render(svc.engine().stats());
  return r;
}

}  // namespace ingot::server
