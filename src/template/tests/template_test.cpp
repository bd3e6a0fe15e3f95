// Interpreter features, each case checked against jinja2 in transformers'
// environment (the expected strings are jinja2's output).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "template/ast.h"
#include "template/chat_template.h"
#include "template/interpreter.h"
#include "template/loader.h"
#include "util/error.h"

namespace ingot {
namespace {

struct Case {
  const char* source;
  const char* context;
  std::optional<const char*> expected;  // nullopt: jinja2 raises
};

const Case kCases[] = {
    {R"J({% if true %}
  yes
{% endif %}
no)J", R"J({})J", R"J(  yes
no)J"},
    {R"J(  {% if x %}a{% endif %}
  b)J", R"J({"x": 1})J", R"J(a  b)J"},
    {R"J(a  {%- if true -%}  b  {%- endif -%}  c)J", R"J({})J", R"J(abc)J"},
    {R"J({{- ' x ' -}})J", R"J({})J", R"J( x )J"},
    {R"J(a
  {#- c -#}
 b)J", R"J({})J", R"J(ab)J"},
    {R"J(  {# comment #}
x)J", R"J({})J", R"J(x)J"},
    {R"J({% raw %}{{ not }}{% endraw %})J", R"J({})J", R"J({{ not }})J"},
    {R"J({% for x in [1,2,3] %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }};{% endfor %})J", R"J({})J", R"J(1/0/3/True/False/3;2/1/2/False/False/3;3/2/1/False/True/3;)J"},
    {R"J({% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %})J", R"J({"d": {"b": 1, "a": 2}})J", R"J(b=1,a=2,)J"},
    {R"J({% for x in [] %}x{% else %}empty{% endfor %})J", R"J({})J", R"J(empty)J"},
    {R"J({% for x in range(10) if x is odd %}{{ x }}{% if loop.last %}!{% endif %}{% endfor %})J", R"J({})J", R"J(13579!)J"},
    {R"J({% for x in range(5) %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %})J", R"J({})J", R"J(012)J"},
    {R"J({% for x in range(5) %}{% if x is even %}{% continue %}{% endif %}{{ x }}{% endfor %})J", R"J({})J", R"J(13)J"},
    {R"J({% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }})J", R"J({})J", R"J(1)J"},
    {R"J({% set ns = namespace(x=1) %}{% for i in [1,2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }})J", R"J({})J", R"J(4)J"},
    {R"J({% set b %}inner {{ 1 + 1 }}{% endset %}[{{ b }}])J", R"J({})J", R"J([inner 2])J"},
    {R"J({% set b | upper %}shout{% endset %}{{ b }})J", R"J({})J", R"J(SHOUT)J"},
    {R"J({% macro m(a, b='B') %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, 2) }} {{ m(b=3, a=4) }})J", R"J({})J", R"J(1-B 1-2 4-3)J"},
    {R"J({% macro m() %}[{{ caller() }}]{% endmacro %}{% call m() %}body{% endcall %})J", R"J({})J", R"J([body])J"},
    {R"J({% filter upper %}hello {{ 'x' }}{% endfilter %})J", R"J({})J", R"J(HELLO X)J"},
    {R"J({{ 'abcdef'[1:4] }} {{ 'abcdef'[::-1] }} {{ [1,2,3,4][-2:] }} {{ 'abc'[-1] }})J", R"J({})J", R"J(bcd fedcba [3, 4] c)J"},
    {R"J({{ 'y' if x else 'n' }} {{ 'only' if x }})J", R"J({"x": 0})J", R"J(n )J"},
    {R"J({{ 'a' in 'cat' }} {{ 2 in [1,2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }})J", R"J({})J", R"J(True True True True)J"},
    {R"J({{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} {{ 1 is number }} {{ [] is sequence }} {{ true is boolean }} {{ false is false }} {{ 3 is equalto 3 }})J", R"J({"x": 1})J", R"J(True True True True True True True True True True True)J"},
    {R"J({{ 1 ~ 'a' ~ none ~ true }})J", R"J({})J", R"J(1aNoneTrue)J"},
    {R"J({{ '  hi  '.strip() }}|{{ 'xxhixx'.lstrip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b  c'.split() }}|{{ 'Hello'.startswith('He') }}|{{ 'x'.upper() }}{{ 'Y'.lower() }}|{{ 'hello world'.title() }}|{{ 'aaa'.replace('a', 'b', 2) }})J", R"J({})J", R"J(hi|hixx|['a', 'b', '', 'c']|['a', 'b', 'c']|True|Xy|Hello World|bba)J"},
    {R"J({{ d.get('a') }} {{ d.get('z', 'dflt') }} {{ d.keys() | list }} {{ d.values() | list }})J", R"J({"d": {"a": 1}})J", R"J(1 dflt ['a'] [1])J"},
    {R"J({{ x | tojson }})J", R"J({"x": {"b": [1, 2.5, null, true], "a": "é\"\n<>&"}})J", R"J({"b": [1, 2.5, null, true], "a": "é\"\n<>&"})J"},
    {R"J({{ x | tojson(indent=2) }})J", R"J({"x": {"b": [1, {}], "a": []}})J", R"J({
  "b": [
    1,
    {}
  ],
  "a": []
})J"},
    {R"J({{ x | tojson(separators=(',', ':')) }})J", R"J({"x": {"b": [1, 2]}})J", R"J({"b":[1,2]})J"},
    {R"J({{ ' a ' | trim }}|{{ [1,2,3] | length }}|{{ [1,2] | join('-') }}|{{ u | default('d') }}|{{ [3,1] | first }}|{{ [3,1] | last }})J", R"J({})J", R"J(a|3|1-2|d|3|1)J"},
    {R"J({{ ['a','B'] | map('upper') | list }} {{ users | map(attribute='name') | join(',') }})J", R"J({"users": [{"name": "x"}, {"name": "y"}]})J", R"J(['A', 'B'] x,y)J"},
    {R"J({{ users | selectattr('role', 'equalto', 'user') | list | length }} {{ users | rejectattr('role', 'eq', 'user') | map(attribute='role') | list }})J", R"J({"users": [{"role": "user"}, {"role": "system"}, {"role": "user"}]})J", R"J(2 ['system'])J"},
    {R"J({{ [1,2,3,4] | select('even') | list }} {{ [1,2,3] | reject('odd') | list }})J", R"J({})J", R"J([2, 4] [2])J"},
    {R"J({{ 'Hello' | replace('l', 'L') }} {{ 'hELLO' | capitalize }} {{ 'a-b c' | title }} {{ 5 | string }}{{ '42' | int + 1 }} {{ '3.5' | float }} {{ 'x' | int }})J", R"J({})J", R"J(HeLLo Hello A-B C 543 3.5 0)J"},
    {R"J({{ 'a
b

c' | indent(2) }}|{{ 'a
b' | indent(2, true) }})J", R"J({})J", R"J(a
  b

  c|  a
  b)J"},
    {R"J({{ d | dictsort }} {{ d | items | list }})J", R"J({"d": {"b": 1, "A": 2}})J", R"J([('A', 2), ('b', 1)] [('b', 1), ('A', 2)])J"},
    {R"J({{ [3,1,2,1] | unique | list }} {{ [-3] | map('abs') | list }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ [1,2,3] | sum }} {{ [4,2,8] | min }} {{ [4,2,8] | max }} {{ [1,2,3] | reverse | list }})J", R"J({})J", R"J([3, 1, 2] [3] 2.57 2.0 6 2 8 [3, 2, 1])J"},
    {R"J({{ [1,2,3,4,5] | batch(2) | list }})J", R"J({})J", R"J([[1, 2], [3, 4], [5]])J"},
    {R"J({{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 1.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 1e-7 }})J", R"J({})J", R"J(3 -4 1 2 3.5 1024 7 9 1.0 1e+20 0.30000000000000004 1e-07)J"},
    {R"J({{ x }}|{{ x.y is defined }})J", R"J({})J", std::nullopt},
    {R"J({{ d.missing }}|{{ d.missing is defined }}|{{ d['missing'] is none }})J", R"J({"d": {}})J", R"J(|False|False)J"},
    {R"J({{ [1, 'a', none, true, 1.5, {'k': 'v'}] }} {{ ('a',) }} {{ "it's" }})J", R"J({})J", R"J([1, 'a', None, True, 1.5, {'k': 'v'}] ('a',) it's)J"},
    {R"J({{ raise_exception('boom') }})J", R"J({})J", std::nullopt},
    {R"J({% if %})J", R"J({})J", std::nullopt},
    {R"J({{ 1 + }})J", R"J({})J", std::nullopt},
    {R"J({% for %})J", R"J({})J", std::nullopt},
    {R"J({% endif %})J", R"J({})J", std::nullopt},
    {R"J({{ 'unterminated }})J", R"J({})J", std::nullopt},
    {R"J({% set x = [1,2] %}{{ x.append(3) }})J", R"J({})J", std::nullopt},
    {R"J({{ 'a' + 1 }})J", R"J({})J", std::nullopt},
    {R"J({{ '%s-%d' % ('a', 3) }} {{ '{}+{}'.format(1, 'b') }} {{ '%s!' | format('x') }})J", R"J({})J", R"J(a-3 1+b x!)J"},
    {R"J({% for m in msgs %}{% for c in m %}{{ loop.index }}{{ c }}{% endfor %}{{ loop.index }};{% endfor %})J", R"J({"msgs": ["ab", "c"]})J", R"J(1a2b1;1c2;)J"},
    {R"J({% with a = 1 %}{{ a }}{% endwith %}{{ a is defined }})J", R"J({})J", R"J(1False)J"},
    {R"J({{ 'x' ~ loop }})J", R"J({})J", R"J(x)J"},
    {R"J({%- for m in messages -%}
  {{- m.role }}: {{ m.content }}
{% endfor -%})J", R"J({"messages": [{"role": "u", "content": "c"}]})J", R"J(u: c
)J"},
    {R"J({{ '\u00e9\n\t\x41' }})J", R"J({})J", R"J(é
	A)J"},
    {R"J({% set a, b = [1, 2] %}{{ b }}{{ a }})J", R"J({})J", R"J(21)J"},
    {R"J({{ messages[0]['content'][0]['text'] }})J", R"J({"messages": [{"content": [{"text": "t"}]}]})J", R"J(t)J"},
    {R"J({{ 1 < 2 < 3 }} {{ 'a' < 'b' }} {{ [1] == [1] }} {{ 1 == 1.0 }} {{ true == 1 }})J", R"J({})J", R"J(True True True True True)J"},
    {R"J({{ x | length }} {{ x | list }} {{ x | default('u') }} {% for i in x %}no{% endfor %})J", R"J({})J", R"J(0 [] u )J"},
    {R"J({{ strftime_now('%Y') | length }})J", R"J({})J", R"J(4)J"},
    {R"J({{ 'ABC' | lower }}{{ 'Ünïcode' | upper }} {{ 'straße'.upper() }})J", R"J({})J", R"J(abcÜNÏCODE STRASSE)J"},
    {R"J({{ none | tojson }} {{ 'x' | tojson }} {{ 1.5 | tojson }} {{ [] | tojson }} {{ 'é' | tojson(ensure_ascii=true) }})J", R"J({})J", R"J(null "x" 1.5 [] "\u00e9")J"},
    {R"J({% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(3) }})J", R"J({})J", R"J(321)J"},
    {R"J({% for item in tree recursive %}[{{ item.name }}{% if item.children %}{{ loop(item.children) }}{% endif %}]{% endfor %})J", R"J({"tree": [{"name": "a", "children": [{"name": "b"}]}, {"name": "c"}]})J", R"J([a[b]][c])J"},
    {R"J({% generation %}gen{% endgeneration %})J", R"J({})J", R"J(gen)J"},
    {R"J({{ 'a,b'.split(',', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ 'x'.join(['1','2']) }} {{ 'abc'.find('c') }} {{ 'a\nb'.splitlines() }})J", R"J({})J", R"J(['a', 'b'] ['a b', 'c'] 1x2 2 ['a', 'b'])J"},
    {R"J({% for i in items %}[{{ v }}]{% set v = 1 %}{% endfor %})J", R"J({"v": "V", "items": [1, 2]})J", R"J([V][V])J"},
    {R"J({% for i in items %}[{{ v }}]{% endfor %}{% set v = 1 %})J", R"J({"v": "V", "items": [1, 2]})J", R"J([][])J"},
    {R"J({% macro m() %}[{{ v }}]{% endmacro %}{{ m() }}{% set v = 1 %}{{ m() }})J", R"J({"v": "V"})J", R"J([][1])J"},
    {R"J({% for i in items %}[{{ v }}]{% endfor %}{% if c %}{% set v = 1 %}{% endif %})J", R"J({"v": "V", "items": [1, 2], "c": true})J", R"J([V][V])J"},
    {R"J({{ 'a' | safe + '<b>' }} {{ '<i>' | escape }} {{ '<' ~ ('x' | safe) }})J", R"J({})J", R"J(a&lt;b&gt; &lt;i&gt; <x)J"},
    {R"J({{ [1] | map('string') | tojson }})J", R"J({})J", std::nullopt},
    {R"J({% if false %}{{ x | nofilter }}{% endif %}ok)J", R"J({})J", R"J(ok)J"},
    {R"J({{ x | nofilter }})J", R"J({})J", std::nullopt},
    {R"J({{ none | selectattr('a') | list }} {{ none | map('upper') | list }})J", R"J({})J", R"J([] [])J"},
    {R"J({{ messages | selectattr('role', 'equalto', 'system') | list | length }})J", R"J({"messages": [{"role": "system"}]})J", R"J(1)J"},
    {R"J({{ (messages | selectattr('role', 'equalto', 'x')) is iterable }}{% if messages | selectattr('role', 'equalto', 'x') %}T{% endif %})J", R"J({"messages": []})J", R"J(TrueT)J"},
};

std::string render(const std::string& source, const std::string& context) {
  return ChatTemplate::compile(source)->render(nlohmann::ordered_json::parse(context));
}

TEST(Template, MatchesJinja2) {
  int index = 0;
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << "case " << index++ << ": " << c.source);
    if (c.expected) {
      EXPECT_EQ(render(c.source, c.context), *c.expected);
    } else {
      EXPECT_THROW(render(c.source, c.context), Error);
    }
  }
}

TEST(Template, SyntaxErrorNamesTheLine) {
  try {
    ChatTemplate::compile("line one\n{{ ok }}\n{% if x %}\n{{ 1 + }}\n{% endif %}");
    FAIL() << "expected a syntax error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadFormat);
    EXPECT_NE(std::string(e.what()).find("line 4"), std::string::npos) << e.what();
  }
  try {
    ChatTemplate::compile("{% for x in y %}\n\nno end");
    FAIL() << "expected a syntax error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("endfor"), std::string::npos) << e.what();
  }
}

TEST(Template, RaiseExceptionCarriesTheMessage) {
  auto t = ChatTemplate::compile("{% if messages | length == 0 %}{{ raise_exception('No messages given!') }}{% endif %}");
  try {
    t->render(nlohmann::json{{"messages", nlohmann::json::array()}});
    FAIL() << "expected raise_exception to throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("No messages given!"), std::string::npos) << e.what();
  }
}

TEST(Template, KeepsRequestKeyOrderInToJson) {
  auto t = ChatTemplate::compile("{{ tools | tojson }}");
  auto ctx = nlohmann::ordered_json::parse(R"({"tools": {"zeta": 1, "alpha": {"b": 2, "a": 3}}})");
  EXPECT_EQ(t->render(ctx), R"({"zeta": 1, "alpha": {"b": 2, "a": 3}})");
}

TEST(Template, HugeLoopsAreBounded) {
  auto tpl = tmpl::parse_template("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}");
  tmpl::Limits limits;
  limits.max_steps = 200000;
  tmpl::Interpreter in(*tpl, limits);
  EXPECT_THROW(in.render(tmpl::Value::new_dict()), Error);
  EXPECT_THROW(render("{{ range(1000000) | length }}", "{}"), Error);
  EXPECT_THROW(render("{{ 'x' * 1000000000000 }}", "{}"), Error);
}

TEST(Template, DeepRecursionIsBounded) {
  EXPECT_THROW(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "{}"), Error);
  EXPECT_THROW(render("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}", "{}"), Error);
  EXPECT_THROW(render("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}", "{}"), Error);
  std::string filters, sums, attrs;
  for (int k = 0; k < 100000; ++k) {
    filters += "|trim";
    sums += " + 1";
    attrs += ".b";
  }
  EXPECT_THROW(render("{{ 'x'" + filters + " }}", "{}"), Error);
  EXPECT_THROW(render("{{ 1" + sums + " }}", "{}"), Error);
  EXPECT_THROW(render("{{ a" + attrs + " }}", "{}"), Error);
  std::string nested;
  for (int k = 0; k < 500; ++k) nested += "{% if true %}";
  EXPECT_THROW(render(nested, "{}"), Error);
  std::string deep_json = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THROW(render("{{ x }}", "{\"x\": " + deep_json + "}"), Error);
}

TEST(Template, StrftimeNowFormatsTheCurrentDate) {
  std::string year = render("{{ strftime_now('%Y') }}", "{}");
  ASSERT_EQ(year.size(), 4u);
  EXPECT_GE(std::stoi(year), 2024);
}

TEST(TemplateLoader, FromTokenizerConfigText) {
  // What a GGUF file's metadata becomes: one config text, no directory.
  ChatTemplateFiles f = chat_template_files_from_config(
      R"({"chat_template": "{{ bos_token }}{{ messages[0]['content'] }}", "bos_token": "<s>",
          "eos_token": {"content": "</s>"}, "pad_token": null})",
      "m.gguf");
  EXPECT_EQ(f.default_template, "{{ bos_token }}{{ messages[0]['content'] }}");
  EXPECT_EQ(f.special_tokens["bos_token"], "<s>");
  EXPECT_EQ(f.special_tokens["eos_token"], "</s>");
  EXPECT_FALSE(f.special_tokens.contains("pad_token"));
  nlohmann::ordered_json req = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  EXPECT_EQ(ChatTemplate::compile(select_chat_template(f, "", false, "m.gguf"))->render(chat_template_context(f, req)),
            "<s>hi");
  EXPECT_TRUE(chat_template_files_from_config("{}", "m.gguf").default_template.empty());
  try {
    chat_template_files_from_config("{not json", "m.gguf");
    FAIL() << "expected BadFormat";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadFormat);
    EXPECT_NE(std::string(e.what()).find("m.gguf"), std::string::npos);
  }
  EXPECT_THROW(chat_template_files_from_config("[1]", "m.gguf"), Error);
  EXPECT_THROW(chat_template_files_from_config(R"({"chat_template": 5})", "m.gguf"), Error);
}

}  // namespace
}  // namespace ingot
