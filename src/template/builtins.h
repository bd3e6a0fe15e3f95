// jinja2's built-in filters, tests and globals, Python's str/list/dict methods
// (as ImmutableSandboxedEnvironment allows them), and transformers' additions
// (tojson with indent/separators, raise_exception, strftime_now).
#pragma once
#include <string>

#include "template/value.h"

namespace ingot::tmpl {

class Interpreter;

bool has_filter(const std::string& name);
bool has_test(const std::string& name);
Value apply_filter(Interpreter& in, const std::string& name, const Value& input, CallArgs& args);
bool apply_test(Interpreter& in, const std::string& name, const Value& input, CallArgs& args);

// A bound method of a str, list or dict, or Undefined when Python has no such
// attribute (or the sandbox forbids it, e.g. list.append).
Value get_method(Interpreter& in, const Value& obj, const std::string& name, int line);

// The globals every template sees: range, dict, namespace, cycler, joiner,
// raise_exception, strftime_now.
void add_globals(Value& globals_dict);

// Python string helpers shared by filters and methods.
std::string py_strip(const std::string& s, const Value* chars, bool left, bool right);
std::string py_lower(const std::string& s);
std::string py_upper(const std::string& s);
std::string py_replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count);
std::vector<std::string> py_splitlines(const std::string& s);
Value py_split(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right, int line,
               Interpreter& in);
std::string to_str_arg(Interpreter& in, const Value& v, int line, const char* what);
int64_t to_int_arg(Interpreter& in, const Value& v, int line, const char* what);

}  // namespace ingot::tmpl
