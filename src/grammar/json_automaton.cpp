#include "grammar/json_automaton.h"

#include <algorithm>

namespace ingot::grammar {

namespace {

bool is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Object phases.
enum : uint8_t { kObjOpen, kObjKey, kObjColon, kObjValue, kObjAfterValue, kObjAfterComma };
// Array phases.
enum : uint8_t { kArrOpen, kArrItem, kArrAfterItem, kArrAfterComma };
// Number phases.
enum : uint8_t { kNumStart, kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumExp, kNumExpSign, kNumExpDigits };
bool number_accepting(uint8_t p) { return p == kNumZero || p == kNumInt || p == kNumFrac || p == kNumExpDigits; }

// String sub-states: 0 plain, 1 after '\', 2..5 \u with (sub - 2) hex digits,
// 8 / 9 / 10 one / two / three continuation bytes due, 16..19 a lead byte
// whose next byte has a narrower range (E0, ED, F0, F4).
enum : uint8_t { kStrPlain = 0, kStrEscape = 1, kStrHex0 = 2, kStrCont1 = 8, kStrCont2 = 9, kStrCont3 = 10,
                 kStrE0 = 16, kStrED = 17, kStrF0 = 18, kStrF4 = 19 };

// Advances a string sub-state by one byte other than an unescaped quote.
// Returns false on a byte JSON strings (valid UTF-8) cannot hold here;
// `starts_char` says the byte began a new character.
bool string_byte(uint8_t& sub, uint8_t c, bool& starts_char) {
  starts_char = false;
  switch (sub) {
    case kStrPlain:
      if (c < 0x20) return false;
      starts_char = true;
      if (c == '\\') return sub = kStrEscape, true;
      if (c < 0x80) return true;
      if (c >= 0xC2 && c <= 0xDF) return sub = kStrCont1, true;
      if (c == 0xE0) return sub = kStrE0, true;
      if (c == 0xED) return sub = kStrED, true;
      if (c >= 0xE1 && c <= 0xEF) return sub = kStrCont2, true;
      if (c == 0xF0) return sub = kStrF0, true;
      if (c >= 0xF1 && c <= 0xF3) return sub = kStrCont3, true;
      if (c == 0xF4) return sub = kStrF4, true;
      return false;
    case kStrEscape:
      if (c == 'u') return sub = kStrHex0, true;
      if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't')
        return sub = kStrPlain, true;
      return false;
    case kStrHex0:
      // No surrogate escapes (\uD800-\uDFFF): raw UTF-8 carries those characters.
      if (!is_hex(c) || c == 'd' || c == 'D') return false;
      return sub = kStrHex0 + 1, true;
    case kStrHex0 + 1:
    case kStrHex0 + 2:
    case kStrHex0 + 3:
      if (!is_hex(c)) return false;
      sub = sub == kStrHex0 + 3 ? kStrPlain : sub + 1;
      return true;
    case kStrCont1: return c >= 0x80 && c <= 0xBF ? (sub = kStrPlain, true) : false;
    case kStrCont2: return c >= 0x80 && c <= 0xBF ? (sub = kStrCont1, true) : false;
    case kStrCont3: return c >= 0x80 && c <= 0xBF ? (sub = kStrCont2, true) : false;
    case kStrE0: return c >= 0xA0 && c <= 0xBF ? (sub = kStrCont1, true) : false;
    case kStrED: return c >= 0x80 && c <= 0x9F ? (sub = kStrCont1, true) : false;
    case kStrF0: return c >= 0x90 && c <= 0xBF ? (sub = kStrCont2, true) : false;
    case kStrF4: return c >= 0x80 && c <= 0x8F ? (sub = kStrCont2, true) : false;
  }
  return false;
}

// Bytes that finish a pending escape or UTF-8 sequence.
std::string string_sub_rest(uint8_t sub) {
  switch (sub) {
    case kStrEscape: return "n";
    case kStrHex0: return "0000";
    case kStrHex0 + 1: return "000";
    case kStrHex0 + 2: return "00";
    case kStrHex0 + 3: return "0";
    case kStrCont1: return "\x80";
    case kStrCont2: return "\x80\x80";
    case kStrCont3: return "\x80\x80\x80";
    case kStrE0: return "\xA0\x80";
    case kStrED: return "\x80\x80";
    case kStrF0: return "\x90\x80\x80";
    case kStrF4: return "\x80\x80\x80";
    default: return "";
  }
}

uint64_t bit(int32_t i) { return i >= 0 ? uint64_t{1} << i : 0; }

}  // namespace

Frame* FrameArena::make(const Frame& f) {
  if (used_ == kBlock) ++block_, used_ = 0;
  if (block_ == blocks_.size()) blocks_.push_back(std::make_unique<Frame[]>(kBlock));
  Frame* p = &blocks_[block_][used_++];
  *p = f;
  return p;
}

JsonAutomaton::JsonAutomaton(std::shared_ptr<const Schema> schema) : schema_(std::move(schema)) {}

const Frame* JsonAutomaton::start(FrameArena& a) const {
  Frame done;
  const Frame* bottom = a.make(done);
  Frame v;
  v.parent = bottom;
  v.kind = FrameKind::Value;
  v.node = schema_->root;
  return a.make(v);
}

const Frame* JsonAutomaton::push(const Frame* parent, FrameKind kind, int32_t node, FrameArena& a) const {
  Frame f;
  f.parent = parent;
  f.kind = kind;
  f.node = node;
  f.depth = static_cast<uint16_t>(parent->depth + 1);
  if (f.depth > schema_->max_depth) return nullptr;
  if (kind == FrameKind::Literal) f.hi = static_cast<int32_t>(this->node(node).literals.size());
  if (kind == FrameKind::Key) f.hi = static_cast<int32_t>(this->node(node).keys.size());
  return a.make(f);
}

bool JsonAutomaton::required_done(const SchemaNode& n, uint64_t used) const {
  for (size_t i = 0; i < n.keys.size(); ++i)
    if (n.key_required[i] && !(used & bit(static_cast<int32_t>(i)))) return false;
  return true;
}

bool JsonAutomaton::can_add_key(const SchemaNode& n, uint64_t used) const {
  if (n.additional >= 0) return true;
  for (size_t i = 0; i < n.keys.size(); ++i)
    if (!(used & bit(static_cast<int32_t>(i)))) return true;
  return false;
}

// The parent of a value that just ended, advanced past it (key >= -1: a key ended).
const Frame* JsonAutomaton::child_done(const Frame* p, FrameArena& a, int32_t key) const {
  Frame f = *p;
  f.ws = 0;
  switch (p->kind) {
    case FrameKind::Done: f.phase = 1; break;
    case FrameKind::Object:
      if (key >= -1) {
        f.phase = kObjColon;
        f.count = key;
      } else {
        f.phase = kObjAfterValue;
        f.used |= bit(p->count);
      }
      break;
    case FrameKind::Array:
      f.phase = kArrAfterItem;
      f.count = p->count + 1;
      break;
    default: return nullptr;
  }
  return a.make(f);
}

// A value of `node` beginning with byte c, under `parent`.
const Frame* JsonAutomaton::value(const Frame* parent, int32_t id, uint8_t c, FrameArena& a) const {
  const SchemaNode* n = &node(id);
  if (n->kind == NodeKind::AnyOf) {
    int32_t pick = -1;
    for (int32_t alt : n->alternatives)
      if (node(alt).first[c]) pick = alt;
    if (pick < 0) return nullptr;
    id = pick;
    n = &node(id);
  }
  if (n->kind == NodeKind::Any) {
    if (c == '{') id = schema_->any_object;
    else if (c == '[') id = schema_->any_array;
    else if (c == '"') id = schema_->any_string;
    else if (c == '-' || is_digit(c)) id = schema_->any_number;
    else if (c == 't' || c == 'f' || c == 'n') id = schema_->any_literal;
    else return nullptr;
    n = &node(id);
  }
  if (!n->first[c]) return nullptr;
  switch (n->kind) {
    case NodeKind::Object: return push(parent, FrameKind::Object, id, a);
    case NodeKind::Array: return push(parent, FrameKind::Array, id, a);
    case NodeKind::String: return push(parent, FrameKind::String, id, a);
    case NodeKind::Number:
    case NodeKind::Integer: {
      const Frame* f = push(parent, FrameKind::Number, id, a);
      return f ? step_number(f, c, a) : nullptr;
    }
    case NodeKind::Literals: {
      const Frame* f = push(parent, FrameKind::Literal, id, a);
      return f ? step_literal(f, c, a) : nullptr;
    }
    default: return nullptr;
  }
}

const Frame* JsonAutomaton::step(const Frame* f, uint8_t c, FrameArena& a) const {
  switch (f->kind) {
    case FrameKind::Done: return nullptr;
    case FrameKind::Value:
      if (is_ws(c)) {
        if (f->parent->kind == FrameKind::Done || f->ws >= kMaxWhitespaceRun) return nullptr;
        Frame g = *f;
        ++g.ws;
        return a.make(g);
      }
      return value(f->parent, f->node, c, a);
    case FrameKind::Object: return step_object(f, c, a);
    case FrameKind::Key: return step_key(f, c, a);
    case FrameKind::Array: return step_array(f, c, a);
    case FrameKind::String: return step_string(f, c, a);
    case FrameKind::Number: return step_number(f, c, a);
    case FrameKind::Literal: return step_literal(f, c, a);
  }
  return nullptr;
}

const Frame* JsonAutomaton::feed(const Frame* f, std::string_view bytes, FrameArena& a) const {
  for (char ch : bytes) {
    f = step(f, static_cast<uint8_t>(ch), a);
    if (!f) return nullptr;
  }
  return f;
}

const Frame* JsonAutomaton::step_object(const Frame* f, uint8_t c, FrameArena& a) const {
  const SchemaNode& n = node(f->node);
  Frame g = *f;
  if (is_ws(c)) {
    if (f->ws >= kMaxWhitespaceRun) return nullptr;
    ++g.ws;
    return a.make(g);
  }
  g.ws = 0;
  switch (f->phase) {
    case kObjOpen:
    case kObjAfterComma:
      if (c == '}' && f->phase == kObjOpen) return required_done(n, f->used) ? child_done(f->parent, a) : nullptr;
      if (c != '"' || !can_add_key(n, f->used)) return nullptr;
      g.phase = kObjKey;
      return push(a.make(g), FrameKind::Key, f->node, a);
    case kObjColon: {
      if (c != ':') return nullptr;
      g.phase = kObjValue;
      Frame v;
      v.parent = a.make(g);
      v.kind = FrameKind::Value;
      v.node = f->count >= 0 ? n.key_nodes[static_cast<size_t>(f->count)] : n.additional;
      v.depth = f->depth;
      return a.make(v);
    }
    case kObjAfterValue:
      if (c == '}') return required_done(n, f->used) ? child_done(f->parent, a) : nullptr;
      if (c != ',' || !can_add_key(n, f->used)) return nullptr;
      g.phase = kObjAfterComma;
      return a.make(g);
    default: return nullptr;
  }
}

const Frame* JsonAutomaton::step_array(const Frame* f, uint8_t c, FrameArena& a) const {
  const SchemaNode& n = node(f->node);
  Frame g = *f;
  if (is_ws(c)) {
    if (f->ws >= kMaxWhitespaceRun) return nullptr;
    ++g.ws;
    return a.make(g);
  }
  g.ws = 0;
  const bool room = n.max_items < 0 || f->count < n.max_items;
  switch (f->phase) {
    case kArrOpen:
      if (c == ']') return n.min_items == 0 ? child_done(f->parent, a) : nullptr;
      [[fallthrough]];
    case kArrAfterComma: {
      if (!room) return nullptr;
      g.phase = kArrItem;
      return value(a.make(g), n.items, c, a);
    }
    case kArrAfterItem:
      if (c == ']') return f->count >= n.min_items ? child_done(f->parent, a) : nullptr;
      if (c != ',' || !room) return nullptr;
      g.phase = kArrAfterComma;
      return a.make(g);
    default: return nullptr;
  }
}

const Frame* JsonAutomaton::step_string(const Frame* f, uint8_t c, FrameArena& a) const {
  const SchemaNode& n = node(f->node);
  if (c == '"' && f->sub == kStrPlain) return f->count >= n.min_length ? child_done(f->parent, a) : nullptr;
  Frame g = *f;
  bool starts = false;
  if (!string_byte(g.sub, c, starts)) return nullptr;
  if (starts) {
    if (n.max_length >= 0 && f->count >= n.max_length) return nullptr;
    ++g.count;
  }
  return a.make(g);
}

const Frame* JsonAutomaton::step_key(const Frame* f, uint8_t c, FrameArena& a) const {
  const SchemaNode& n = node(f->node);
  const Frame* obj = f->parent;
  auto unused = [&](int32_t i) { return !(obj->used & bit(i)); };
  if (c == '"' && f->sub == kStrPlain) {
    const bool exact = f->lo < f->hi && static_cast<int32_t>(n.keys[static_cast<size_t>(f->lo)].size()) == f->pos;
    if (exact) return unused(f->lo) ? child_done(obj, a, f->lo) : nullptr;
    return n.additional >= 0 ? child_done(obj, a, -1) : nullptr;
  }
  Frame g = *f;
  // Narrow the candidate property names to those continuing with c.
  int32_t lo = f->hi, hi = f->hi;
  for (int32_t i = f->lo; i < f->hi; ++i) {
    const std::string& k = n.keys[static_cast<size_t>(i)];
    if (static_cast<int32_t>(k.size()) > f->pos && static_cast<uint8_t>(k[static_cast<size_t>(f->pos)]) == c) {
      if (lo == f->hi) lo = i;
      hi = i + 1;
    }
  }
  if (lo == hi) lo = hi = 0;
  g.lo = lo, g.hi = hi;
  ++g.pos;
  if (n.additional < 0) {
    bool any = false;
    for (int32_t i = lo; i < hi && !any; ++i) any = unused(i);
    return any ? a.make(g) : nullptr;
  }
  // Free keys beside named ones: no escapes, so a name is always spelled one way.
  if (c == '\\' && !n.keys.empty()) return nullptr;
  bool starts = false;
  if (!string_byte(g.sub, c, starts)) return nullptr;
  return a.make(g);
}

const Frame* JsonAutomaton::step_number(const Frame* f, uint8_t c, FrameArena& a) const {
  const bool integer = node(f->node).kind == NodeKind::Integer;
  Frame g = *f;
  auto to = [&](uint8_t phase, uint8_t digits) {
    g.phase = phase;
    g.sub = digits;
    return a.make(g);
  };
  const bool d = is_digit(c);
  switch (f->phase) {
    case kNumStart:
      if (c == '-') return to(kNumMinus, 0);
      [[fallthrough]];
    case kNumMinus:
      if (c == '0') return to(kNumZero, 1);
      if (d) return to(kNumInt, 1);
      return nullptr;
    case kNumInt:
      if (d) return f->sub < kMaxIntDigits ? to(kNumInt, static_cast<uint8_t>(f->sub + 1)) : nullptr;
      [[fallthrough]];
    case kNumZero:
      if (c == '.' && !integer) return to(kNumDot, 0);
      if ((c == 'e' || c == 'E') && !integer) return to(kNumExp, 0);
      break;
    case kNumDot: return d ? to(kNumFrac, 1) : nullptr;
    case kNumFrac:
      if (d) return f->sub < kMaxFracDigits ? to(kNumFrac, static_cast<uint8_t>(f->sub + 1)) : nullptr;
      if (c == 'e' || c == 'E') return to(kNumExp, 0);
      break;
    case kNumExp:
      if (c == '+' || c == '-') return to(kNumExpSign, 0);
      [[fallthrough]];
    case kNumExpSign: return d ? to(kNumExpDigits, 1) : nullptr;
    case kNumExpDigits:
      if (d) return f->sub < kMaxExpDigits ? to(kNumExpDigits, static_cast<uint8_t>(f->sub + 1)) : nullptr;
      break;
  }
  // Any other byte ends the number and belongs to the parent.
  if (!number_accepting(f->phase) || d) return nullptr;
  const Frame* p = child_done(f->parent, a);
  return p ? step(p, c, a) : nullptr;
}

const Frame* JsonAutomaton::step_literal(const Frame* f, uint8_t c, FrameArena& a) const {
  const auto& lits = node(f->node).literals;
  int32_t lo = -1, hi = -1;
  for (int32_t i = f->lo; i < f->hi; ++i) {
    const std::string& l = lits[static_cast<size_t>(i)];
    if (static_cast<int32_t>(l.size()) > f->pos && static_cast<uint8_t>(l[static_cast<size_t>(f->pos)]) == c) {
      if (lo < 0) lo = i;
      hi = i + 1;
    }
  }
  if (lo < 0) {
    // No literal continues with c: c follows a literal that just ended.
    if (static_cast<int32_t>(lits[static_cast<size_t>(f->lo)].size()) != f->pos) return nullptr;
    const Frame* p = child_done(f->parent, a);
    return p ? step(p, c, a) : nullptr;
  }
  if (hi - lo == 1 && static_cast<int32_t>(lits[static_cast<size_t>(lo)].size()) == f->pos + 1)
    return child_done(f->parent, a);
  Frame g = *f;
  g.lo = lo, g.hi = hi;
  ++g.pos;
  return a.make(g);
}

bool JsonAutomaton::complete(const Frame* f) const {
  if (f->kind == FrameKind::Done) return f->phase == 1;
  if (f->parent == nullptr || f->parent->kind != FrameKind::Done) return false;
  if (f->kind == FrameKind::Number) return number_accepting(f->phase);
  if (f->kind == FrameKind::Literal)
    return static_cast<int32_t>(node(f->node).literals[static_cast<size_t>(f->lo)].size()) == f->pos;
  return false;
}

// The rest of an object once its current member (if any) is done: the
// missing required members, then '}'. After a comma one member must follow.
std::string JsonAutomaton::object_rest(const SchemaNode& n, uint64_t used, bool after_comma) const {
  std::string out;
  bool need_comma = !after_comma;
  for (size_t i = 0; i < n.keys.size(); ++i) {
    if (!n.key_required[i] || (used & bit(static_cast<int32_t>(i)))) continue;
    out += need_comma ? ",\"" : "\"";
    out += n.keys[i];
    out += "\":";
    out += node(n.key_nodes[i]).shortest;
    need_comma = true;
  }
  if (after_comma && out.empty()) {
    size_t i = 0;
    while (i < n.keys.size() && (used & bit(static_cast<int32_t>(i)))) ++i;
    out = i < n.keys.size() ? "\"" : "\"_";
    if (i < n.keys.size()) out += n.keys[i];
    out += "\":";
    out += node(i < n.keys.size() ? n.key_nodes[i] : n.additional).shortest;
  }
  out += '}';
  return out;
}

std::string JsonAutomaton::closing(const Frame* f) const {
  std::string out;
  int32_t chosen_key = -2;  // set by a Key frame for its object
  for (; f; f = f->parent) {
    switch (f->kind) {
      case FrameKind::Done: break;
      case FrameKind::Value: out += node(f->node).shortest; break;
      case FrameKind::String: {
        const SchemaNode& n = node(f->node);
        out += string_sub_rest(f->sub);
        if (n.min_length > f->count) out += std::string(static_cast<size_t>(n.min_length - f->count), 'a');
        out += '"';
        break;
      }
      case FrameKind::Key: {
        const SchemaNode& n = node(f->node);
        chosen_key = -1;
        for (int32_t i = f->lo; i < f->hi; ++i)
          if (!(f->parent->used & bit(i))) {
            chosen_key = i;
            break;
          }
        if (chosen_key >= 0) {
          out += n.keys[static_cast<size_t>(chosen_key)].substr(static_cast<size_t>(f->pos));
          out += '"';
        } else {
          out += string_sub_rest(f->sub);
          const bool clash = f->lo < f->hi && static_cast<int32_t>(n.keys[static_cast<size_t>(f->lo)].size()) == f->pos;
          out += clash ? "_\"" : "\"";
        }
        break;
      }
      case FrameKind::Number:
        if (!number_accepting(f->phase)) out += '0';
        break;
      case FrameKind::Literal:
        out += node(f->node).literals[static_cast<size_t>(f->lo)].substr(static_cast<size_t>(f->pos));
        break;
      case FrameKind::Object: {
        const SchemaNode& n = node(f->node);
        auto value_of = [&](int32_t k) { return node(k >= 0 ? n.key_nodes[static_cast<size_t>(k)] : n.additional); };
        switch (f->phase) {
          case kObjOpen: out += required_done(n, f->used) ? "}" : object_rest(n, f->used, true); break;
          case kObjKey:
          case kObjColon: {
            const int32_t k = f->phase == kObjKey ? chosen_key : f->count;
            out += ':';
            out += value_of(k).shortest;
            out += object_rest(n, f->used | bit(k), false);
            break;
          }
          case kObjValue: out += object_rest(n, f->used | bit(f->count), false); break;
          case kObjAfterValue: out += object_rest(n, f->used, false); break;
          case kObjAfterComma: out += object_rest(n, f->used, true); break;
        }
        break;
      }
      case FrameKind::Array: {
        const SchemaNode& n = node(f->node);
        const std::string& item = node(n.items).shortest;
        int64_t have = f->count + (f->phase == kArrItem ? 1 : 0);
        if (f->phase == kArrAfterComma) {
          out += item;
          ++have;
        }
        for (int64_t i = have; i < n.min_items; ++i) {
          if (i > 0 || f->phase != kArrOpen) out += ',';
          out += item;
        }
        out += ']';
        break;
      }
    }
  }
  return out;
}

}  // namespace ingot::grammar
