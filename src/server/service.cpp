#include "server/service.h"

#include <chrono>
#include <random>

#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/lora_registry.h"
#include "server/speech_worker.h"
#include "util/error.h"
#include "util/log.h"

namespace ingot::server {

std::string random_id(const std::string& prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kHex[rng() % 16];
  return id;
}

json prediction_tokens_json(int64_t draft_tokens, int64_t accepted_draft_tokens) {
  return {{"accepted_prediction_tokens", accepted_draft_tokens},
          {"rejected_prediction_tokens", draft_tokens - accepted_draft_tokens}};
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void ResponseStore::put(const std::string& id, json conversation) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity_ == 0) return;
  if (items_.emplace(id, std::move(conversation)).second) order_.push_back(id);
  while (order_.size() > capacity_) {
    items_.erase(order_.front());
    order_.pop_front();
  }
}

bool ResponseStore::get(const std::string& id, json* conversation) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = items_.find(id);
  if (it == items_.end()) return false;
  *conversation = it->second;
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return items_.size();
}

Service::Service(engine::Engine& engine, const Tokenizer& tok, std::shared_ptr<const ChatTemplate> tmpl,
                 ServeOptions opt)
    : engine_(engine), tok_(tok), tmpl_(std::move(tmpl)), opt_(std::move(opt)), responses_(opt_.response_store_size) {}

namespace {

// Text of string or content-part content; images and audio are refused.
json flatten_content(const json& content, const std::string& param) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) bad_request("'content' must be a string or an array of content parts", param);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    std::string p = param + "[" + std::to_string(i) + "]";
    if (part.is_string()) {
      text += part.get<std::string>();
      continue;
    }
    if (!part.is_object()) bad_request("content parts must be objects", p);
    std::string type = opt_string(part, "type").value_or("");
    if (type == "text" || type == "input_text" || type == "output_text") {
      text += req_string(part, "text");
    } else if (type == "image_url" || type == "input_image" || type == "image" || type == "input_audio") {
      bad_request("this model does not accept " + type + " content", p + ".type");
    } else {
      bad_request("unknown content part type '" + type + "'", p + ".type");
    }
  }
  return text;
}

}  // namespace

Prompt Service::render_chat(const json& messages, const json* tools, const json* extra_args) const {
  if (!tmpl_) bad_request("the served model has no chat template; use /v1/completions or --chat-template", "messages");
  if (!messages.is_array()) bad_request("'messages' must be an array", "messages");
  if (messages.empty()) bad_request("'messages' must not be empty", "messages");
  json msgs = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad_request("each message must be an object", param);
    auto role_it = m.find("role");
    if (role_it == m.end() || !role_it->is_string()) bad_request("each message needs a string 'role'", param + ".role");
    std::string role = role_it->get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool")
      bad_request("unknown role '" + role + "'", param + ".role");
    json out = m;
    if (role == "developer") out["role"] = "system";
    auto c = m.find("content");
    out["content"] = c == m.end() ? json() : flatten_content(*c, param + ".content");
    // A null content (an assistant turn that only calls tools) becomes "":
    // real templates (Qwen's among them) test `'</think>' in message.content`,
    // which fails on None in the reference too.
    if (out["content"].is_null()) out["content"] = "";
    if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
      if (!tc->is_array()) bad_request("'tool_calls' must be an array", param + ".tool_calls");
      json calls = *tc;
      for (json& call : calls) {
        if (!call.is_object()) bad_request("each tool call must be an object", param + ".tool_calls");
        // Templates expect arguments as an object; clients send a JSON string.
        if (call.contains("function") && call["function"].is_object()) {
          json& f = call["function"];
          if (f.contains("arguments") && f["arguments"].is_string()) {
            json a = json::parse(f["arguments"].get<std::string>(), nullptr, false);
            if (!a.is_discarded()) f["arguments"] = a;
          }
        }
      }
      out["tool_calls"] = calls;
    }
    msgs.push_back(std::move(out));
  }
  json ctx = json::object();
  for (auto& [k, v] : opt_.chat_template_args.items()) ctx[k] = v;
  if (extra_args && extra_args->is_object())
    for (auto& [k, v] : extra_args->items()) ctx[k] = v;
  ctx["messages"] = std::move(msgs);
  ctx["add_generation_prompt"] = true;
  ctx["bos_token"] = tok_.config().bos_token;
  ctx["eos_token"] = tok_.config().eos_token;
  if (tools && !tools->empty()) ctx["tools"] = *tools;
  Prompt p;
  try {
    p.text = tmpl_->render(ctx);
  } catch (const Error& e) {
    bad_request(std::string("chat template: ") + e.what(), "messages");
  }
  p.ids = encode(p.text, false);
  size_t end = p.text.find_last_not_of(" \t\r\n");
  std::string_view head = std::string_view(p.text).substr(0, end == std::string::npos ? 0 : end + 1);
  p.opens_reasoning = head.size() >= 7 && head.substr(head.size() - 7) == "<think>";
  return p;
}

std::vector<int32_t> Service::encode(const std::string& text, bool add_special) const {
  return tok_.encode(text, add_special);
}

void Service::check_prompt_length(size_t n, const char* param) const {
  if (n == 0) bad_request("the prompt is empty", param);
  if (static_cast<int64_t>(n) >= opt_.context_length)
    throw ApiError(400,
                   str_cat("the prompt is ", n, " tokens, but this model's context is ", opt_.context_length,
                           " tokens; shorten the prompt"),
                   param, "context_length_exceeded");
}

void Service::check_model(const json& body) const {
  auto model = opt_string(body, "model");
  if (!model || model->empty() || *model == opt_.model_id || *model == "default") return;
  if (loras_ && loras_->has(*model)) return;
  for (const auto& a : opt_.model_aliases)
    if (*model == a) return;
  // The other model this server holds is the speech model: never a text model.
  const bool names_speech_model = speech_ && speech_->serves(*model);
  if (opt_.strict_model_name || names_speech_model)
    throw ApiError(404, "model '" + *model + "' is not served here; this server serves '" + opt_.model_id + "'",
                   "model", "model_not_found");
  if (!other_name_logged_.exchange(true))
    log::debug("a request names model '", *model, "'; serving it with '", opt_.model_id,
               "' (--strict-model-name refuses other names)");
}

std::shared_ptr<const LoraAdapter> Service::lora_for(const json& body) const {
  if (!loras_) return nullptr;
  if (auto model = opt_string(body, "model"); model && loras_->has(*model)) {
    // Unloaded between the check and now: the request fails rather than
    // silently running on the base model.
    if (auto a = loras_->get(*model)) return a;
    throw ApiError(404, "LoRA adapter '" + *model + "' was unloaded", "model", "model_not_found");
  }
  return loras_->get_default();
}

engine::Request Service::base_request(const json& body, std::vector<int32_t> prompt, const char* max_key) const {
  engine::Request r;
  r.lora = lora_for(body);
  auto& s = r.sampling;
  s.temperature = static_cast<float>(opt_number(body, "temperature", 0, 2).value_or(opt_.temperature));
  s.top_p = static_cast<float>(opt_number(body, "top_p", 0, 1).value_or(opt_.top_p));
  if (s.top_p <= 0) bad_request("'top_p' must be greater than 0", "top_p");
  int64_t top_k = opt_int(body, "top_k", -1, 1 << 30).value_or(opt_.top_k);
  s.top_k = static_cast<int>(top_k < 0 ? 0 : top_k);
  s.min_p = static_cast<float>(opt_number(body, "min_p", 0, 1).value_or(opt_.min_p));
  s.presence_penalty = static_cast<float>(opt_number(body, "presence_penalty", -2, 2).value_or(0));
  s.frequency_penalty = static_cast<float>(opt_number(body, "frequency_penalty", -2, 2).value_or(0));
  s.repetition_penalty = static_cast<float>(opt_number(body, "repetition_penalty", 0.01, 10).value_or(1));
  if (auto seed = opt_int(body, "seed", INT64_MIN, INT64_MAX)) s.seed = static_cast<uint64_t>(*seed);
  if (const json* bias = opt_object(body, "logit_bias")) {
    int64_t vocab = tok_.vocab_size();
    for (auto& [k, v] : bias->items()) {
      char* end = nullptr;
      long long id = std::strtoll(k.c_str(), &end, 10);
      if (k.empty() || *end != '\0' || id < 0 || id >= vocab)
        bad_request("logit_bias keys must be token ids in [0, " + std::to_string(vocab) + ")", "logit_bias");
      if (!v.is_number() || v.get<double>() < -100 || v.get<double>() > 100)
        bad_request("logit_bias values must be numbers in [-100, 100]", "logit_bias");
      s.logit_bias[static_cast<int32_t>(id)] = v.get<float>();
    }
  }
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      if (!it->get<std::string>().empty()) r.stop.stop_strings.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      if (it->size() > 16) bad_request("'stop' accepts at most 16 sequences", "stop");
      for (const json& x : *it) {
        if (!x.is_string()) bad_request("'stop' must be a string or an array of strings", "stop");
        if (!x.get<std::string>().empty()) r.stop.stop_strings.push_back(x.get<std::string>());
      }
    } else {
      bad_request("'stop' must be a string or an array of strings", "stop");
    }
  }
  r.stop.ignore_eos = opt_bool(body, "ignore_eos").value_or(false);
  r.speculative = opt_bool(body, "speculative").value_or(true);
  int64_t room = opt_.context_length - static_cast<int64_t>(prompt.size());
  std::optional<int64_t> max = opt_int(body, max_key, 1, INT32_MAX);
  if (!max && std::string(max_key) == "max_completion_tokens") max = opt_int(body, "max_tokens", 1, INT32_MAX);
  r.stop.max_tokens = std::max<int64_t>(1, std::min(max.value_or(opt_.max_tokens), room));
  r.prompt = std::move(prompt);
  return r;
}

std::string Service::token_text(int32_t id) const { return tok_.decode({id}, false); }

}  // namespace ingot::server
