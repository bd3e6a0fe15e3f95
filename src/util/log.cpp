#include "util/log.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>

namespace ingot::log {

namespace {
std::atomic<int> g_level{static_cast<int>(Level::Info)};
std::mutex g_mu;
}  // namespace

void set_level(Level l) { g_level = static_cast<int>(l); }
Level level() { return static_cast<Level>(g_level.load()); }

Level parse_level(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  if (l == "debug") return Level::Debug;
  if (l == "info") return Level::Info;
  if (l == "warning" || l == "warn") return Level::Warn;
  if (l == "error" || l == "critical") return Level::Error;
  fail(ErrorKind::InvalidArgument, "unknown log level '", s, "' (debug, info, warning, error)");
}

void write(Level l, const std::string& msg) {
  static const char* names[] = {"debug", "info", "warning", "error"};
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "[%s] %s\n", names[static_cast<int>(l)], msg.c_str());
}

}  // namespace ingot::log
