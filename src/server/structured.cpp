#include "server/structured.h"

#include <mutex>

#include "grammar/token_mask.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/service.h"
#include "util/error.h"

namespace ingot::server {

namespace {

// The vocabulary trie is built on the first structured request (about 0.1 s
// for 150k tokens), not at start-up.
std::shared_ptr<const grammar::Vocabulary> vocabulary(const Tokenizer& tok) {
  static std::mutex mu;
  static const Tokenizer* owner = nullptr;
  static std::shared_ptr<const grammar::Vocabulary> vocab;
  std::lock_guard<std::mutex> g(mu);
  if (owner != &tok || !vocab) {
    vocab = std::make_shared<const grammar::Vocabulary>(grammar::token_bytes(tok));
    owner = &tok;
  }
  return vocab;
}

std::shared_ptr<const engine::Grammar> make(const Service& svc, const json* schema, const std::string& param) {
  grammar::Schema s;
  try {
    s = schema ? grammar::compile_schema(nlohmann::json(*schema)) : grammar::any_object_schema();
  } catch (const Error& e) {
    bad_request(std::string("unsupported response schema: ") + e.what(), param);
  }
  return std::make_shared<grammar::JsonGrammar>(std::make_shared<grammar::Schema>(std::move(s)),
                                                vocabulary(svc.tokenizer()));
}

// {"type": ..., "schema": ...} where the schema sits in `holder`.
std::shared_ptr<const engine::Grammar> from_format(const Service& svc, const json& fmt, const json* holder,
                                                   const std::string& param, const std::string& holder_param) {
  std::string type = opt_string(fmt, "type").value_or("");
  if (type == "text") return nullptr;
  if (type == "json_object") return make(svc, nullptr, param);
  if (type != "json_schema") bad_request("'type' must be text, json_object or json_schema", param + ".type");
  if (!holder) bad_request("'" + holder_param + "' is required for type json_schema", holder_param);
  const json* schema = nullptr;
  if (auto it = holder->find("schema"); it != holder->end() && !it->is_null()) schema = &*it;
  return make(svc, schema, holder_param + ".schema");
}

}  // namespace

std::shared_ptr<const engine::Grammar> response_format_grammar(const Service& svc, const json& body) {
  const json* rf = opt_object(body, "response_format");
  if (!rf) return nullptr;
  return from_format(svc, *rf, opt_object(*rf, "json_schema"), "response_format", "response_format.json_schema");
}

std::shared_ptr<const engine::Grammar> text_format_grammar(const Service& svc, const json& body) {
  const json* text = opt_object(body, "text");
  if (!text) return nullptr;
  const json* fmt = opt_object(*text, "format");
  if (!fmt) return nullptr;
  return from_format(svc, *fmt, fmt, "text.format", "text.format");
}

}  // namespace ingot::server
