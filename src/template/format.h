// Python's two string formatting mini-languages as templates reach them:
// `"%s" % x` / the `format` filter, and str.format().
#pragma once
#include <string>

#include "template/value.h"

namespace ingot::tmpl {

class Interpreter;

// printf-style: %s %r %d %i %f %x %%, with flags, width and precision.
std::string percent_format(Interpreter& in, const std::string& fmt, const Value& args, int line);
// "{}", "{0}", "{name}", "{name.attr}", with conversions !s/!r and simple specs.
std::string brace_format(Interpreter& in, const std::string& fmt, const CallArgs& args, int line);

}  // namespace ingot::tmpl
