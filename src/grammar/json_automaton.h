// A byte-level pushdown automaton that accepts exactly the JSON texts a
// compiled schema allows (compact or with short whitespace runs). States are
// immutable frames linked to their parents, so a state is one pointer and
// trying a byte never disturbs the state it came from: the token mask walks a
// trie of token bytes keeping one state per depth.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/json_schema.h"

namespace ingot::grammar {

enum class FrameKind : uint8_t { Done, Value, Object, Key, Array, String, Number, Literal };

struct Frame {
  const Frame* parent = nullptr;
  int32_t node = -1;  // schema node (Key: the object's node)
  FrameKind kind = FrameKind::Done;
  uint8_t phase = 0;
  uint8_t ws = 0;     // whitespace bytes in the current run
  uint8_t sub = 0;    // String / Key: escape and UTF-8 sub-state; Number: digits in the current part
  int32_t count = 0;  // Array: items; String: characters; Object: key being read (-1: additional)
  int32_t lo = 0, hi = 0, pos = 0;  // Literal / Key: candidate range and bytes matched
  uint16_t depth = 0;
  uint64_t used = 0;  // Object: properties present
};

// Bump allocator for frames; pointers stay valid until reset().
class FrameArena {
 public:
  Frame* make(const Frame& f);
  void reset() { block_ = 0, used_ = 0; }

 private:
  static constexpr size_t kBlock = 1 << 14;
  std::vector<std::unique_ptr<Frame[]>> blocks_;
  size_t block_ = 0, used_ = 0;
};

class JsonAutomaton {
 public:
  explicit JsonAutomaton(std::shared_ptr<const Schema> schema);

  // A fresh state (owned by `arena`) expecting the root value.
  const Frame* start(FrameArena& arena) const;
  // The state after byte c, or nullptr when c is not allowed.
  const Frame* step(const Frame* f, uint8_t c, FrameArena& arena) const;
  const Frame* feed(const Frame* f, std::string_view bytes, FrameArena& arena) const;
  // The text is a complete value (the next thing may be the end).
  bool complete(const Frame* f) const;
  // A shortest text that completes the value from this state.
  std::string closing(const Frame* f) const;
  const Schema& schema() const { return *schema_; }

 private:
  const SchemaNode& node(int32_t i) const { return schema_->nodes[static_cast<size_t>(i)]; }
  const Frame* value(const Frame* parent, int32_t node, uint8_t c, FrameArena& a) const;
  const Frame* child_done(const Frame* parent, FrameArena& a, int32_t key = -2) const;
  const Frame* push(const Frame* parent, FrameKind kind, int32_t node, FrameArena& a) const;
  const Frame* step_object(const Frame* f, uint8_t c, FrameArena& a) const;
  const Frame* step_array(const Frame* f, uint8_t c, FrameArena& a) const;
  const Frame* step_string(const Frame* f, uint8_t c, FrameArena& a) const;
  const Frame* step_key(const Frame* f, uint8_t c, FrameArena& a) const;
  const Frame* step_number(const Frame* f, uint8_t c, FrameArena& a) const;
  const Frame* step_literal(const Frame* f, uint8_t c, FrameArena& a) const;
  bool required_done(const SchemaNode& n, uint64_t used) const;
  bool can_add_key(const SchemaNode& n, uint64_t used) const;
  std::string object_rest(const SchemaNode& n, uint64_t used, bool after_comma) const;

  std::shared_ptr<const Schema> schema_;
};

// Longest whitespace run allowed between tokens of the JSON text.
constexpr int kMaxWhitespaceRun = 8;
// Digits allowed in an integer part / fraction / exponent.
constexpr int kMaxIntDigits = 16, kMaxFracDigits = 16, kMaxExpDigits = 3;

}  // namespace ingot::grammar
