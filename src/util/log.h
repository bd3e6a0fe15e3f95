// Leveled logging to stderr. The level is process-wide (set by --log-level).
#pragma once
#include <string>

#include "util/error.h"

namespace ingot::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3 };
void set_level(Level l);
Level level();
// Parses debug|info|warning|warn|error (case-insensitive); throws InvalidArgument.
Level parse_level(const std::string& s);
void write(Level l, const std::string& msg);

template <typename... Args>
void debug(Args&&... a) { if (level() <= Level::Debug) write(Level::Debug, str_cat(a...)); }
template <typename... Args>
void info(Args&&... a) { if (level() <= Level::Info) write(Level::Info, str_cat(a...)); }
template <typename... Args>
void warn(Args&&... a) { if (level() <= Level::Warn) write(Level::Warn, str_cat(a...)); }
template <typename... Args>
void error(Args&&... a) { write(Level::Error, str_cat(a...)); }

}  // namespace ingot::log
