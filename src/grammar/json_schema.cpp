#include "grammar/json_schema.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace ingot::grammar {

using nlohmann::json;

namespace {

const std::vector<std::string> kStructural = {"type",     "properties", "required",  "additionalProperties",
                                              "items",    "minItems",   "maxItems",  "minLength",
                                              "maxLength", "enum",      "const",     "anyOf"};
const std::vector<std::string> kAnnotations = {"title",   "description", "default", "examples",
                                               "$schema", "$id",         "$comment", "$defs",
                                               "definitions"};

std::vector<bool> bytes_of(std::string_view chars) {
  std::vector<bool> f(256, false);
  for (char c : chars) f[static_cast<unsigned char>(c)] = true;
  return f;
}

class Compiler {
 public:
  Schema out;

  int32_t add(SchemaNode n) {
    out.nodes.push_back(std::move(n));
    return static_cast<int32_t>(out.nodes.size() - 1);
  }

  // The Any node and its object / array shapes (created once).
  int32_t any() {
    if (any_ >= 0) return any_;
    SchemaNode a;
    a.kind = NodeKind::Any;
    a.first = bytes_of("{[\"-0123456789tfn");
    a.shortest = "0";
    any_ = add(std::move(a));
    SchemaNode o;
    o.kind = NodeKind::Object;
    o.additional = any_;
    o.first = bytes_of("{");
    o.shortest = "{}";
    out.any_object = add(std::move(o));
    SchemaNode r;
    r.kind = NodeKind::Array;
    r.items = any_;
    r.first = bytes_of("[");
    r.shortest = "[]";
    out.any_array = add(std::move(r));
    SchemaNode s;
    s.kind = NodeKind::String;
    s.first = bytes_of("\"");
    s.shortest = "\"\"";
    out.any_string = add(std::move(s));
    SchemaNode n;
    n.kind = NodeKind::Number;
    n.first = bytes_of("-0123456789");
    n.shortest = "0";
    out.any_number = add(std::move(n));
    out.any_literal = literals({"false", "null", "true"});
    return any_;
  }

  int32_t compile(const json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(ErrorKind::InvalidArgument, "schema at '", path, "' is false: no value can match");
      return any();
    }
    if (!s.is_object()) fail(ErrorKind::InvalidArgument, "schema at '", path, "' must be an object");
    std::vector<std::string> unsupported;
    for (const auto& [k, v] : s.items())
      if (std::find(kStructural.begin(), kStructural.end(), k) == kStructural.end() &&
          std::find(kAnnotations.begin(), kAnnotations.end(), k) == kAnnotations.end())
        unsupported.push_back(k);
    if (!unsupported.empty()) {
      std::string names;
      for (const auto& u : unsupported) {
        names += names.empty() ? "'" : ", '";
        names += u;
        names += '\'';
      }
      fail(ErrorKind::InvalidArgument, "unsupported JSON Schema keyword", unsupported.size() > 1 ? "s " : " ", names,
           " at '", path, "'");
    }
    if (s.contains("const")) return literals({dump(s["const"])});
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty())
        fail(ErrorKind::InvalidArgument, "'enum' at '", path, "' must be a non-empty array");
      std::vector<std::string> lits;
      for (const auto& v : e) lits.push_back(dump(v));
      return literals(std::move(lits));
    }
    if (s.contains("anyOf")) {
      for (const char* k : {"type", "properties", "items"})
        if (s.contains(k))
          fail(ErrorKind::InvalidArgument, "'anyOf' beside '", k, "' at '", path, "' is not supported; move '", k,
               "' into each alternative");
      const json& alts = s["anyOf"];
      if (!alts.is_array() || alts.empty())
        fail(ErrorKind::InvalidArgument, "'anyOf' at '", path, "' must be a non-empty array");
      std::vector<int32_t> ids;
      for (size_t i = 0; i < alts.size(); ++i) ids.push_back(compile(alts[i], path + "/anyOf/" + std::to_string(i)));
      return any_of(std::move(ids), path + "/anyOf");
    }
    std::vector<std::string> types;
    if (auto t = s.find("type"); t != s.end()) {
      if (t->is_string()) {
        types.push_back(t->get<std::string>());
      } else if (t->is_array() && !t->empty()) {
        for (const auto& x : *t) {
          if (!x.is_string()) fail(ErrorKind::InvalidArgument, "'type' at '", path, "' must hold strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        fail(ErrorKind::InvalidArgument, "'type' at '", path, "' must be a string or a non-empty array of strings");
      }
    } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
      types = {"object"};
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      types = {"array"};
    } else if (s.contains("minLength") || s.contains("maxLength")) {
      types = {"string"};
    } else {
      return any();
    }
    // "integer" is inside "number": keep the wider one.
    if (std::find(types.begin(), types.end(), "number") != types.end()) std::erase(types, std::string("integer"));
    std::vector<int32_t> ids;
    for (const auto& t : types) ids.push_back(typed(s, t, path));
    return ids.size() == 1 ? ids[0] : any_of(std::move(ids), path + "/type");
  }

 private:
  int32_t any_ = -1;

  static std::string dump(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::strict); }

  static int64_t count(const json& s, const char* key, const std::string& path, int64_t dflt) {
    auto it = s.find(key);
    if (it == s.end()) return dflt;
    if (!it->is_number_integer() || it->get<int64_t>() < 0)
      fail(ErrorKind::InvalidArgument, "'", key, "' at '", path, "' must be a non-negative integer");
    return it->get<int64_t>();
  }

  int32_t literals(std::vector<std::string> lits) {
    std::sort(lits.begin(), lits.end());
    lits.erase(std::unique(lits.begin(), lits.end()), lits.end());
    SchemaNode n;
    n.kind = NodeKind::Literals;
    n.first.assign(256, false);
    for (const auto& l : lits) n.first[static_cast<unsigned char>(l[0])] = true;
    n.shortest = *std::min_element(lits.begin(), lits.end(),
                                   [](const auto& a, const auto& b) { return a.size() < b.size(); });
    n.literals = std::move(lits);
    return add(std::move(n));
  }

  int32_t any_of(std::vector<int32_t> ids, const std::string& path) {
    SchemaNode n;
    n.kind = NodeKind::AnyOf;
    n.first.assign(256, false);
    for (int32_t id : ids) {
      const SchemaNode& alt = out.nodes[static_cast<size_t>(id)];
      std::vector<int32_t> flat = alt.kind == NodeKind::AnyOf ? alt.alternatives : std::vector<int32_t>{id};
      for (int32_t f : flat) {
        const SchemaNode& a = out.nodes[static_cast<size_t>(f)];
        for (int b = 0; b < 256; ++b)
          if (a.first[b] && n.first[b])
            fail(ErrorKind::InvalidArgument, "unsupported '", path,
                 "': alternatives that can start with the same character ('", static_cast<char>(b),
                 "') cannot be told apart");
        for (int b = 0; b < 256; ++b)
          if (a.first[b]) n.first[b] = true;
        if (n.shortest.empty() || a.shortest.size() < n.shortest.size()) n.shortest = a.shortest;
        n.alternatives.push_back(f);
      }
    }
    return add(std::move(n));
  }

  int32_t typed(const json& s, const std::string& type, const std::string& path) {
    SchemaNode n;
    if (type == "string") {
      n.kind = NodeKind::String;
      n.min_length = count(s, "minLength", path, 0);
      n.max_length = count(s, "maxLength", path, -1);
      if (n.max_length >= 0 && n.max_length < n.min_length)
        fail(ErrorKind::InvalidArgument, "'maxLength' is below 'minLength' at '", path, "'");
      n.first = bytes_of("\"");
      n.shortest = std::string(static_cast<size_t>(n.min_length) + 2, 'a');
      n.shortest.front() = n.shortest.back() = '"';
      return add(std::move(n));
    }
    if (type == "number" || type == "integer") {
      n.kind = type == "number" ? NodeKind::Number : NodeKind::Integer;
      n.first = bytes_of("-0123456789");
      n.shortest = "0";
      return add(std::move(n));
    }
    if (type == "boolean") return literals({"false", "true"});
    if (type == "null") return literals({"null"});
    if (type == "array") return array(s, path);
    if (type == "object") return object(s, path);
    fail(ErrorKind::InvalidArgument, "unknown type '", type, "' at '", path, "'");
  }

  int32_t array(const json& s, const std::string& path) {
    SchemaNode n;
    n.kind = NodeKind::Array;
    n.min_items = count(s, "minItems", path, 0);
    n.max_items = count(s, "maxItems", path, -1);
    if (n.max_items >= 0 && n.max_items < n.min_items)
      fail(ErrorKind::InvalidArgument, "'maxItems' is below 'minItems' at '", path, "'");
    if (n.min_items > 1024) fail(ErrorKind::InvalidArgument, "'minItems' over 1024 at '", path, "' is not supported");
    auto it = s.find("items");
    if (it != s.end() && it->is_array())
      fail(ErrorKind::InvalidArgument, "tuple 'items' (an array) at '", path, "' is not supported");
    n.items = it == s.end() ? any() : compile(*it, path + "/items");
    const std::string& item = out.nodes[static_cast<size_t>(n.items)].shortest;
    n.shortest = "[";
    for (int64_t i = 0; i < n.min_items; ++i) {
      if (i) n.shortest += ',';
      n.shortest += item;
    }
    n.shortest += "]";
    n.first = bytes_of("[");
    return add(std::move(n));
  }

  int32_t object(const json& s, const std::string& path) {
    SchemaNode n;
    n.kind = NodeKind::Object;
    std::vector<std::pair<std::string, int32_t>> props;
    if (auto p = s.find("properties"); p != s.end()) {
      if (!p->is_object()) fail(ErrorKind::InvalidArgument, "'properties' at '", path, "' must be an object");
      for (const auto& [k, v] : p->items()) {
        std::string key = dump(json(k));
        props.push_back({key.substr(1, key.size() - 2), compile(v, path + "/properties/" + k)});
      }
    }
    if (props.size() > 64) fail(ErrorKind::InvalidArgument, "more than 64 properties at '", path, "' are not supported");
    std::sort(props.begin(), props.end());
    for (auto& [k, id] : props) {
      n.keys.push_back(k);
      n.key_nodes.push_back(id);
      n.key_required.push_back(false);
    }
    if (auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) fail(ErrorKind::InvalidArgument, "'required' at '", path, "' must be an array of strings");
      for (const auto& x : *r) {
        if (!x.is_string()) fail(ErrorKind::InvalidArgument, "'required' at '", path, "' must be an array of strings");
        std::string key = dump(x);
        key = key.substr(1, key.size() - 2);
        auto at = std::lower_bound(n.keys.begin(), n.keys.end(), key);
        if (at == n.keys.end() || *at != key)
          fail(ErrorKind::InvalidArgument, "required property '", x.get<std::string>(), "' at '", path,
               "' is not in 'properties'");
        n.key_required[static_cast<size_t>(at - n.keys.begin())] = true;
      }
    }
    auto ap = s.find("additionalProperties");
    if (ap == s.end() || (ap->is_boolean() && ap->get<bool>()))
      n.additional = any();
    else if (ap->is_boolean())
      n.additional = -1;
    else
      n.additional = compile(*ap, path + "/additionalProperties");
    n.shortest = "{";
    bool first = true;
    for (size_t i = 0; i < n.keys.size(); ++i)
      if (n.key_required[i]) {
        n.shortest += first ? "\"" : ",\"";
        n.shortest += n.keys[i];
        n.shortest += "\":";
        n.shortest += out.nodes[static_cast<size_t>(n.key_nodes[i])].shortest;
        first = false;
      }
    n.shortest += "}";
    n.first = bytes_of("{");
    return add(std::move(n));
  }
};

}  // namespace

Schema compile_schema(const json& schema) {
  Compiler c;
  c.out.root = c.compile(schema, "#");
  return std::move(c.out);
}

Schema any_object_schema() { return compile_schema(json{{"type", "object"}}); }

}  // namespace ingot::grammar
