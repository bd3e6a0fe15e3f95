// Structured output for the OpenAI routes: response_format (chat and
// completions) and text.format (Responses) become a grammar the engine
// enforces token by token. Unsupported schema keywords are 400s.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>

#include "ingot/types.h"

namespace ingot::server {

class Service;

// body["response_format"]: null for absent / {"type": "text"}.
std::shared_ptr<const engine::Grammar> response_format_grammar(const Service& svc, const nlohmann::ordered_json& body);
// body["text"]["format"] of the Responses API.
std::shared_ptr<const engine::Grammar> text_format_grammar(const Service& svc, const nlohmann::ordered_json& body);

}  // namespace ingot::server
