#include <gtest/gtest.h>

#include "grammar/json_automaton.h"
#include "util/error.h"

using namespace ingot::grammar;
using nlohmann::json;

namespace {

struct Checker {
  explicit Checker(const json& schema) : a(std::make_shared<Schema>(compile_schema(schema))) {}
  explicit Checker(Schema s) : a(std::make_shared<Schema>(std::move(s))) {}
  // Whole text accepted and complete.
  bool accepts(const std::string& text) {
    FrameArena arena;
    const Frame* f = a.feed(a.start(arena), text, arena);
    return f && a.complete(f);
  }
  // The closing text of every prefix completes it into an accepted text.
  void closes_every_prefix(const std::string& text) {
    for (size_t n = 0; n <= text.size(); ++n) {
      FrameArena arena;
      const Frame* f = a.feed(a.start(arena), text.substr(0, n), arena);
      ASSERT_NE(f, nullptr) << text.substr(0, n);
      std::string done = text.substr(0, n);
      done += a.closing(f);
      EXPECT_TRUE(accepts(done)) << "prefix '" << text.substr(0, n) << "' closed as '" << done << "'";
      EXPECT_TRUE(json::accept(done)) << done;
    }
  }
  JsonAutomaton a;
};

}  // namespace

TEST(JsonAutomaton, AnyObjectAcceptsValidJsonOnly) {
  Checker c(any_object_schema());
  for (const char* ok : {"{}", "{\"a\":1}", "{\"a\": [1, 2.5e-3, true, null, \"x\\n\\u00e9\"], \"b\": {}}",
                         "{\"k\":{\"n\":{\"m\":[[]]}}}", "{\"\xC3\xA9\":\"\xE2\x82\xAC\xF0\x9F\x98\x80\"}", "{\"a\":-0}"})
    EXPECT_TRUE(c.accepts(ok)) << ok;
  for (const char* bad : {"", "[]", "{", "{\"a\"}", "{\"a\":}", "{\"a\":01}", "{\"a\":1,}", "{,}", "{\"a\":tru}",
                          "{\"a\":\"\x01\"}", "{\"a\":\"\xC0\xAF\"}", "{\"a\":\"\\x\"}", "{\"a\":1.}", "{} ",
                          " {}", "{\"a\":\"\\ud800\"}", "{\"a\":1e}", "{'a':1}", "{\"a\":NaN}"})
    EXPECT_FALSE(c.accepts(bad)) << bad;
}

TEST(JsonAutomaton, WhitespaceRunsAreBounded) {
  Checker c(any_object_schema());
  EXPECT_TRUE(c.accepts("{\n  \"a\": 1\n}"));
  std::string spaced(kMaxWhitespaceRun + 1, ' ');
  spaced.insert(spaced.begin(), '{');
  spaced.push_back('}');
  EXPECT_FALSE(c.accepts(spaced));
}

TEST(JsonAutomaton, ObjectPropertiesRequiredAndAdditional) {
  json s = {{"type", "object"},
            {"properties", {{"name", {{"type", "string"}}}, {"age", {{"type", "integer"}}}}},
            {"required", {"name", "age"}},
            {"additionalProperties", false}};
  Checker c(s);
  EXPECT_TRUE(c.accepts("{\"name\":\"x\",\"age\":3}"));
  EXPECT_TRUE(c.accepts("{\"age\":3,\"name\":\"\"}"));
  EXPECT_FALSE(c.accepts("{\"name\":\"x\"}"));              // missing required
  EXPECT_FALSE(c.accepts("{\"name\":\"x\",\"age\":3.5}"));  // integer
  EXPECT_FALSE(c.accepts("{\"name\":1,\"age\":3}"));        // type
  EXPECT_FALSE(c.accepts("{\"name\":\"x\",\"age\":3,\"z\":1}"));  // additional
  EXPECT_FALSE(c.accepts("{\"name\":\"x\",\"name\":\"y\",\"age\":3}"));  // duplicate
  json open = s;
  open.erase("additionalProperties");
  Checker o(open);
  EXPECT_TRUE(o.accepts("{\"name\":\"x\",\"age\":3,\"z\":[1]}"));
  EXPECT_FALSE(o.accepts("{\"name\":\"x\",\"age\":\"3\"}"));
  json typed_extra = {{"type", "object"}, {"additionalProperties", {{"type", "boolean"}}}};
  Checker t(typed_extra);
  EXPECT_TRUE(t.accepts("{\"a\":true,\"b\":false}"));
  EXPECT_FALSE(t.accepts("{\"a\":1}"));
}

TEST(JsonAutomaton, ArraysEnumsConstAnyOf) {
  Checker arr(json{{"type", "array"}, {"items", {{"type", "number"}}}, {"minItems", 2}, {"maxItems", 3}});
  EXPECT_TRUE(arr.accepts("[1,2]"));
  EXPECT_TRUE(arr.accepts("[1, 2.5, -3e2]"));
  EXPECT_FALSE(arr.accepts("[1]"));
  EXPECT_FALSE(arr.accepts("[1,2,3,4]"));
  EXPECT_FALSE(arr.accepts("[1,\"a\"]"));
  Checker en(json{{"enum", {"red", "green", 12, 1, nullptr}}});
  for (const char* ok : {"\"red\"", "\"green\"", "12", "1", "null"}) EXPECT_TRUE(en.accepts(ok)) << ok;
  for (const char* bad : {"\"re\"", "\"blue\"", "2", "123", "true"}) EXPECT_FALSE(en.accepts(bad)) << bad;
  Checker cst(json{{"const", {{"a", 1}}}});
  EXPECT_TRUE(cst.accepts("{\"a\":1}"));
  EXPECT_FALSE(cst.accepts("{\"a\":2}"));
  Checker any(json{{"anyOf", {{{"type", "string"}}, {{"type", "null"}}, {{"type", "array"}, {"items", {{"type", "integer"}}}}}}});
  EXPECT_TRUE(any.accepts("\"s\""));
  EXPECT_TRUE(any.accepts("null"));
  EXPECT_TRUE(any.accepts("[1,2]"));
  EXPECT_FALSE(any.accepts("1"));
  Checker multi(json{{"type", {"integer", "null"}}});
  EXPECT_TRUE(multi.accepts("7"));
  EXPECT_TRUE(multi.accepts("null"));
  EXPECT_FALSE(multi.accepts("7.5"));
  Checker str(json{{"type", "string"}, {"minLength", 2}, {"maxLength", 3}});
  EXPECT_TRUE(str.accepts("\"ab\""));
  EXPECT_TRUE(str.accepts("\"\xC3\xA9\xC3\xA9\xC3\xA9\""));  // three characters, six bytes
  EXPECT_FALSE(str.accepts("\"a\""));
  EXPECT_FALSE(str.accepts("\"abcd\""));
}

TEST(JsonAutomaton, ClosingTextCompletesEveryPrefix) {
  json s = {{"type", "object"},
            {"properties",
             {{"id", {{"type", "integer"}}},
              {"tags", {{"type", "array"}, {"items", {{"type", "string"}, {"minLength", 1}}}, {"minItems", 1}}},
              {"kind", {{"enum", {"a", "bb"}}}},
              {"child", {{"type", "object"}, {"properties", {{"x", {{"type", "number"}}}}}, {"required", {"x"}}}}}},
            {"required", {"id", "tags", "kind", "child"}},
            {"additionalProperties", false}};
  Checker c(s);
  std::string text = "{\"kind\":\"bb\",\"tags\":[\"q\\u00e9\",\"\xE2\x82\xAC\"],\"id\":-12,\"child\":{\"x\":1.5e3}}";
  ASSERT_TRUE(c.accepts(text));
  c.closes_every_prefix(text);
  Checker any(any_object_schema());
  any.closes_every_prefix("{\"a\":[1,{\"b\":\"\xF0\x9F\x98\x80 \\\"\"},tr");
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  auto message = [](const json& s) {
    try {
      compile_schema(s);
    } catch (const ingot::Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(json{{"type", "string"}, {"pattern", "^a"}}).find("'pattern'"), std::string::npos);
  EXPECT_NE(message(json{{"$ref", "#/$defs/x"}}).find("'$ref'"), std::string::npos);
  EXPECT_NE(message(json{{"type", "object"}, {"properties", {{"a", {{"format", "date"}}}}}}).find("#/properties/a"),
            std::string::npos);
  EXPECT_NE(message(json{{"type", "nope"}}).find("unknown type"), std::string::npos);
  EXPECT_NE(message(json{{"anyOf", {{{"type", "object"}}, {{"type", "object"}}}}}).find("cannot be told apart"),
            std::string::npos);
  EXPECT_NE(message(json{{"type", "object"}, {"required", {"x"}}}).find("not in 'properties'"), std::string::npos);
  EXPECT_EQ(message(json{{"type", "object"}, {"title", "T"}, {"description", "d"}}), "accepted");
}
