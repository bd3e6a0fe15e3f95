// Typed access to request-body fields: every wrong type or range becomes a 400
// naming the field, in the shape the route answers with.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace ingot::server {

// Insertion-ordered, like Python dicts: templates and responses keep the client's key order.
using json = nlohmann::ordered_json;

// Parses a request body: invalid UTF-8, bad JSON and non-objects are 400s.
json parse_json_body(std::string_view body);
// Serialises untrusted text safely (invalid UTF-8 replaced, never throws).
std::string dump_json(const json& j);
bool is_valid_utf8(std::string_view s);

std::optional<std::string> opt_string(const json& o, const char* key);
std::optional<double> opt_number(const json& o, const char* key, double lo, double hi);
std::optional<int64_t> opt_int(const json& o, const char* key, int64_t lo, int64_t hi);
std::optional<bool> opt_bool(const json& o, const char* key);
// Present and not null: must be an array / object.
const json* opt_array(const json& o, const char* key);
const json* opt_object(const json& o, const char* key);
std::string req_string(const json& o, const char* key);

}  // namespace ingot::server
