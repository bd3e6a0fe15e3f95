// A JSON Schema subset compiled into a flat node table that the JSON
// automaton walks. Supported: type (one or a list), properties, required,
// additionalProperties (bool or schema), items, minItems / maxItems,
// minLength / maxLength, enum, const, anyOf (alternatives that start
// differently), and annotation keywords (title, description, default,
// examples, $schema, $id, $comment, strict). Anything else is refused with an
// error naming the keyword, never silently ignored.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ingot::grammar {

enum class NodeKind : uint8_t { Any, Object, Array, String, Number, Integer, Literals, AnyOf };

struct SchemaNode {
  NodeKind kind = NodeKind::Any;
  // Object: property names (JSON-escaped, no quotes) sorted, their nodes, required flags.
  std::vector<std::string> keys;
  std::vector<int32_t> key_nodes;
  std::vector<bool> key_required;
  int32_t additional = -1;  // node for other keys; -1: none allowed
  // Array.
  int32_t items = -1;
  int64_t min_items = 0, max_items = -1;  // -1: unbounded
  // String.
  int64_t min_length = 0, max_length = -1;
  // Literals (enum / const / boolean / null): canonical JSON texts, sorted.
  std::vector<std::string> literals;
  // AnyOf: alternatives (none of them AnyOf).
  std::vector<int32_t> alternatives;
  // Bytes a value of this node may start with (256 flags), and its shortest text.
  std::vector<bool> first;
  std::string shortest;
};

struct Schema {
  std::vector<SchemaNode> nodes;
  int32_t root = 0;
  // Shapes of an unconstrained value (present when some node is Any).
  int32_t any_object = -1, any_array = -1, any_string = -1, any_number = -1, any_literal = -1;
  int max_depth = 32;  // nesting limit for values under Any
};

// Throws Error(InvalidArgument) naming the unsupported keyword or bad value
// (with its JSON pointer path).
Schema compile_schema(const nlohmann::json& schema);
// Any JSON object (response_format json_object).
Schema any_object_schema();

}  // namespace ingot::grammar
