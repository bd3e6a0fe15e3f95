// Route handlers. Each parses and validates its body, throws ApiError for
// client mistakes, and returns a complete or streamed response.
#pragma once
#include <nlohmann/json.hpp>

#include "ingot/engine.h"
#include "server/http_types.h"

namespace ingot::server {

class Service;

HttpResponse chat_completions(Service& svc, const HttpRequest& req);
HttpResponse completions(Service& svc, const HttpRequest& req);
HttpResponse list_models(Service& svc, const HttpRequest& req);
HttpResponse embeddings(Service& svc, const HttpRequest& req);
HttpResponse responses(Service& svc, const HttpRequest& req);
HttpResponse anthropic_messages(Service& svc, const HttpRequest& req);
HttpResponse anthropic_count_tokens(Service& svc, const HttpRequest& req);
HttpResponse tokenize(Service& svc, const HttpRequest& req);
HttpResponse detokenize(Service& svc, const HttpRequest& req);
HttpResponse health(Service& svc, const HttpRequest& req);
HttpResponse metrics(Service& svc, const HttpRequest& req);
HttpResponse audio_transcriptions(Service& svc, const HttpRequest& req);
HttpResponse audio_translations(Service& svc, const HttpRequest& req);
HttpResponse load_lora_adapter(Service& svc, const HttpRequest& req);
HttpResponse unload_lora_adapter(Service& svc, const HttpRequest& req);
// Routes that need a text model (refused when only a speech model is served).
bool needs_text_model(const std::string& method, const std::string& path);

// Helpers shared by the route files.
HttpResponse json_response(const nlohmann::ordered_json& body, int status = 200);
HttpResponse sse_response(std::function<void(StreamSink&)> body);
// Validates OpenAI chat `tools` (type function with a named function).
void validate_chat_tools(const nlohmann::ordered_json& tools);
// Logprob entries in the chat format for `tokens`.
nlohmann::ordered_json chat_logprobs(const Service& svc, const std::vector<engine::TokenEvent>& tokens, size_t from,
                             size_t to, bool with_top);

}  // namespace ingot::server
