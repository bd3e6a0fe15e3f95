// How benchmark results are shown: markdown tables (they paste into
// bench/RESULTS.md) and JSON with every number, per level and per request.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loadgen/stats.h"

namespace ingot::loadgen {

// A markdown table; columns after the first are right-aligned.
std::string format_table(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& rows);
// printf-style number formatting for table cells.
std::string fixed(double v, int decimals);

// One level of `ingot bench serve`.
struct LevelReport {
  int64_t concurrency = 0;  // in-flight limit; 0: none
  double request_rate = 0;  // requests/s; 0: all at once (a closed loop at `concurrency`)
  LevelSummary summary;
  std::vector<RequestResult> results;
};

// The table of every level, then a line per level that had failures or
// token counts other than the one asked for.
std::string serve_report_text(const std::vector<LevelReport>& levels, int64_t output_len);
nlohmann::json level_json(const LevelReport& level);

}  // namespace ingot::loadgen
