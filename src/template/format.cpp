#include "template/format.h"

#include <cstdio>

#include "template/interpreter.h"

namespace ingot::tmpl {

namespace {

std::string pad(const std::string& s, int width, char align, char fill) {
  int len = static_cast<int>(utf8_length(s));
  if (width <= len) return s;
  std::string f;
  int total = width - len;
  if (align == '<') return s + std::string(static_cast<size_t>(total), fill);
  if (align == '^') {
    int left = total / 2;
    return std::string(static_cast<size_t>(left), fill) + s + std::string(static_cast<size_t>(total - left), fill);
  }
  return std::string(static_cast<size_t>(total), fill) + s;
}

std::string format_number(Interpreter& in, const Value& v, char conv, int precision, bool plus, bool space,
                          int line) {
  if (!v.is_number()) in.error(line, "%", conv, " format: a real number is required, not ", type_name(v));
  char buf[512];
  std::string flags = plus ? "+" : (space ? " " : "");
  if (conv == 'd' || conv == 'i') {
    long long x = v.type == Value::Type::Float ? static_cast<long long>(v.f) : (v.type == Value::Type::Bool ? v.b : v.i);
    std::snprintf(buf, sizeof(buf), ("%" + flags + "lld").c_str(), x);
  } else if (conv == 'x' || conv == 'X' || conv == 'o') {
    if (v.type == Value::Type::Float) in.error(line, "%", conv, " format: an integer is required, not float");
    long long x = v.type == Value::Type::Bool ? v.b : v.i;
    std::string f = "%" + flags + "ll" + conv;
    if (x < 0) {
      std::snprintf(buf, sizeof(buf), f.c_str(), -x);
      return std::string("-") + buf;
    }
    std::snprintf(buf, sizeof(buf), f.c_str(), x);
  } else {
    std::string f = "%" + flags + "." + std::to_string(precision < 0 ? 6 : std::min(precision, 100)) + conv;
    std::snprintf(buf, sizeof(buf), f.c_str(), v.as_double());
  }
  return buf;
}

}  // namespace

std::string percent_format(Interpreter& in, const std::string& fmt, const Value& args, int line) {
  std::vector<Value> items;
  const DictObj* mapping = nullptr;
  if (args.is_list() && args.list->kind == ListObj::Kind::Tuple) items = args.list->items;
  else if (args.is_mapping()) mapping = args.dict.get();
  else items.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out += fmt[k];
      continue;
    }
    if (++k >= fmt.size()) in.error(line, "incomplete format");
    const Value* arg = nullptr;
    if (fmt[k] == '(') {
      size_t close = fmt.find(')', k);
      if (close == std::string::npos || !mapping) in.error(line, "format requires a mapping");
      arg = mapping->find(std::string_view(fmt).substr(k + 1, close - k - 1));
      if (!arg) in.error(line, "format key '", fmt.substr(k + 1, close - k - 1), "' not found");
      k = close + 1;
    }
    bool left = false, plus = false, space = false, zero = false;
    for (; k < fmt.size() && std::string("-+ #0").find(fmt[k]) != std::string::npos; ++k) {
      if (fmt[k] == '-') left = true;
      if (fmt[k] == '+') plus = true;
      if (fmt[k] == ' ') space = true;
      if (fmt[k] == '0') zero = true;
    }
    int width = 0, precision = -1;
    for (; k < fmt.size() && isdigit(static_cast<unsigned char>(fmt[k])); ++k) width = std::min(width * 10 + (fmt[k] - '0'), 10000);
    if (k < fmt.size() && fmt[k] == '.') {
      precision = 0;
      for (++k; k < fmt.size() && isdigit(static_cast<unsigned char>(fmt[k])); ++k)
        precision = std::min(precision * 10 + (fmt[k] - '0'), 10000);
    }
    if (k >= fmt.size()) in.error(line, "incomplete format");
    char conv = fmt[k];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (mapping) in.error(line, "format requires a mapping");
      if (next >= items.size()) in.error(line, "not enough arguments for format string");
      arg = &items[next++];
    }
    std::string piece;
    if (conv == 's') piece = py_str(*arg);
    else if (conv == 'r' || conv == 'a') piece = py_repr(*arg);
    else if (std::string("diouxXeEfFgG").find(conv) != std::string::npos)
      piece = format_number(in, *arg, conv == 'u' ? 'd' : conv, precision, plus, space, line);
    else
      in.error(line, "unsupported format character '", conv, "'");
    if ((conv == 's' || conv == 'r') && precision >= 0) {
      auto cps = utf8_decode(piece);
      if (cps.size() > static_cast<size_t>(precision)) cps.resize(static_cast<size_t>(precision));
      piece = utf8_encode(cps);
    }
    bool numeric = conv != 's' && conv != 'r' && conv != 'a';
    if (zero && !left && numeric && static_cast<int>(piece.size()) < width) {
      size_t sign = (!piece.empty() && (piece[0] == '-' || piece[0] == '+' || piece[0] == ' ')) ? 1 : 0;
      piece.insert(sign, static_cast<size_t>(width) - piece.size(), '0');
    }
    out += pad(piece, width, left ? '<' : '>', ' ');
  }
  if (!mapping && next < items.size()) in.error(line, "not all arguments converted during string formatting");
  return out;
}

std::string brace_format(Interpreter& in, const std::string& fmt, const CallArgs& args, int line) {
  std::string out;
  size_t auto_index = 0;
  for (size_t k = 0; k < fmt.size(); ++k) {
    char c = fmt[k];
    if (c == '}') {
      if (k + 1 < fmt.size() && fmt[k + 1] == '}') ++k;
      else in.error(line, "single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out += '{';
      ++k;
      continue;
    }
    size_t close = fmt.find('}', k);
    if (close == std::string::npos) in.error(line, "single '{' encountered in format string");
    std::string field = fmt.substr(k + 1, close - k - 1);
    k = close;
    std::string spec, conv;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conv = field.substr(bang + 1);
      field = field.substr(0, bang);
    }
    std::string head = field.substr(0, field.find_first_of(".["));
    std::string rest = field.substr(head.size());
    Value v;
    if (head.empty()) {
      if (auto_index >= args.pos.size()) in.error(line, "replacement index ", auto_index, " out of range");
      v = args.pos[auto_index++];
    } else if (isdigit(static_cast<unsigned char>(head[0]))) {
      size_t idx = std::stoul(head);
      if (idx >= args.pos.size()) in.error(line, "replacement index ", idx, " out of range");
      v = args.pos[idx];
    } else {
      const Value* found = args.get(SIZE_MAX, head);
      if (!found) in.error(line, "format: missing key '", head, "'");
      v = *found;
    }
    while (!rest.empty()) {
      if (rest[0] == '.') {
        size_t end = rest.find_first_of(".[", 1);
        v = in.getattr(v, rest.substr(1, end == std::string::npos ? std::string::npos : end - 1), line);
        rest = end == std::string::npos ? "" : rest.substr(end);
      } else {
        size_t end = rest.find(']');
        if (end == std::string::npos) in.error(line, "format: missing ']'");
        std::string key = rest.substr(1, end - 1);
        bool digits = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
        v = in.getitem(v, digits ? Value::integer(std::stoll(key)) : Value::string(key), line);
        rest = rest.substr(end + 1);
      }
    }
    std::string piece = conv == "r" ? py_repr(v) : py_str(v);
    if (!spec.empty()) {
      char fill = ' ', align = v.is_number() ? '>' : '<';
      size_t p = 0;
      if (spec.size() >= 2 && std::string("<>^").find(spec[1]) != std::string::npos) {
        fill = spec[0];
        align = spec[1];
        p = 2;
      } else if (std::string("<>^").find(spec[0]) != std::string::npos) {
        align = spec[0];
        p = 1;
      }
      int width = 0;
      for (; p < spec.size() && isdigit(static_cast<unsigned char>(spec[p])); ++p) width = std::min(width * 10 + (spec[p] - '0'), 10000);
      int precision = -1;
      if (p < spec.size() && spec[p] == '.') {
        precision = 0;
        for (++p; p < spec.size() && isdigit(static_cast<unsigned char>(spec[p])); ++p) precision = precision * 10 + (spec[p] - '0');
      }
      char type = p < spec.size() ? spec[p++] : 0;
      if (p != spec.size()) in.error(line, "unsupported format spec '", spec, "'");
      if (type == 'f' || type == 'e' || type == 'g' || type == 'd' || type == 'x')
        piece = format_number(in, v, type, precision, false, false, line);
      else if (type != 0 && type != 's')
        in.error(line, "unsupported format spec '", spec, "'");
      else if (precision >= 0 && v.is_string()) {
        auto cps = utf8_decode(piece);
        if (cps.size() > static_cast<size_t>(precision)) cps.resize(static_cast<size_t>(precision));
        piece = utf8_encode(cps);
      }
      piece = pad(piece, width, align, fill);
    }
    out += piece;
  }
  return out;
}

}  // namespace ingot::tmpl
