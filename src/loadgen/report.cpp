#include "loadgen/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "util/error.h"

namespace ingot::loadgen {

using json = nlohmann::json;

namespace {

constexpr size_t kFailureKinds = 5;

std::string ms3(const Distribution& d) {
  return fixed(d.p50 * 1e3, 2) + " / " + fixed(d.p90 * 1e3, 2) + " / " + fixed(d.p99 * 1e3, 2);
}

std::string load_label(const LevelReport& l) {
  std::string s = l.request_rate > 0 ? fixed(l.request_rate, 2) + " req/s" : "";
  if (l.concurrency > 0) s += (s.empty() ? "" : ", max ") + std::to_string(l.concurrency);
  return s.empty() ? "unbounded" : s;
}

json ms_json(const Distribution& d) {
  return {{"mean", d.mean * 1e3}, {"p50", d.p50 * 1e3}, {"p90", d.p90 * 1e3}, {"p99", d.p99 * 1e3}, {"count", d.count}};
}

json request_json(const RequestResult& r) {
  json j = {{"prompt_tokens", r.prompt_len},
            {"output_tokens", r.output_tokens},
            {"usage_reported", r.usage_reported},
            {"text_chunks", r.chunks},
            {"start_ms", r.start_s * 1e3},
            {"latency_ms", r.latency_s * 1e3},
            {"ttft_ms", r.ttft_s >= 0 ? json(r.ttft_s * 1e3) : json()},
            {"http_status", r.http_status}};
  const double tpot = tpot_of(r);
  j["tpot_ms"] = tpot >= 0 ? json(tpot * 1e3) : json();
  if (r.usage_prompt_tokens >= 0) j["usage_prompt_tokens"] = r.usage_prompt_tokens;
  json itl = json::array();
  for (double x : r.itl_s) itl.push_back(x * 1e3);
  j["itl_ms"] = std::move(itl);
  j["error"] = r.ok() ? json() : json{{"kind", failure_name(r.failure)}, {"message", r.error}};
  return j;
}

}  // namespace

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string format_table(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(headers.size());
  for (size_t c = 0; c < headers.size(); ++c) width[c] = std::max<size_t>(3, headers[c].size());
  for (const auto& row : rows) {
    if (row.size() != headers.size())
      fail(ErrorKind::Internal, "table row of ", row.size(), " cells, not ", headers.size());
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  // The first column is left-aligned, the numbers after it right-aligned.
  auto line = [&](const std::vector<std::string>& cells) {
    out.push_back('|');
    for (size_t c = 0; c < cells.size(); ++c) {
      out.push_back(' ');
      if (c > 0) out.append(width[c] - cells[c].size(), ' ');
      out.append(cells[c]);
      if (c == 0) out.append(width[c] - cells[c].size(), ' ');
      out.append(" |");
    }
    out.push_back('\n');
  };
  line(headers);
  out.push_back('|');
  for (size_t c = 0; c < headers.size(); ++c) {
    out.push_back(' ');
    out.append(c == 0 ? width[c] : width[c] - 1, '-');
    out.append(c == 0 ? " |" : ": |");
  }
  out.push_back('\n');
  for (const auto& row : rows) line(row);
  return out;
}

std::string serve_report_text(const std::vector<LevelReport>& levels, int64_t output_len) {
  const bool by_rate = std::any_of(levels.begin(), levels.end(), [](const LevelReport& l) { return l.request_rate > 0; });
  std::vector<std::vector<std::string>> rows;
  for (const LevelReport& l : levels) {
    const LevelSummary& s = l.summary;
    rows.push_back({by_rate ? load_label(l) : std::to_string(l.concurrency), std::to_string(s.requests),
                    std::to_string(s.errors()), fixed(s.duration_s, 2), fixed(s.request_throughput, 2),
                    fixed(s.output_throughput, 1), ms3(s.ttft), ms3(s.tpot),
                    fixed(s.itl.p50 * 1e3, 2) + " / " + fixed(s.itl.p99 * 1e3, 2)});
  }
  std::string out = format_table({by_rate ? "request rate" : "concurrency", "requests", "errors", "duration s", "req/s",
                                  "output tok/s", "TTFT ms p50 / p90 / p99", "TPOT ms p50 / p90 / p99",
                                  "ITL ms p50 / p99"},
                                 rows);
  for (const LevelReport& l : levels) {
    const LevelSummary& s = l.summary;
    const std::string who = by_rate ? load_label(l) : "concurrency " + std::to_string(l.concurrency);
    if (s.errors() > 0) {
      std::string kinds;
      for (size_t k = 1; k < kFailureKinds; ++k)
        if (s.failures[k] > 0)
          kinds += str_cat(kinds.empty() ? "" : ", ", failure_name(static_cast<Failure>(k)), " ", s.failures[k]);
      out += str_cat(who, ": ", s.errors(), " of ", s.requests, " requests failed (", kinds, ")");
      if (!s.error_samples.empty()) out += "; first: " + s.error_samples.front();
      out += "\n";
    }
    if (s.output_len_mismatch > 0)
      out += str_cat(who, ": ", s.output_len_mismatch, " completed requests returned a token count other than ",
                     output_len, " (ignore_eos not honoured?)\n");
    if (s.completed > s.usage_reported)
      out += str_cat(who, ": ", s.completed - s.usage_reported,
                     " completed requests had no usage in the stream; their tokens were counted as text chunks\n");
  }
  return out;
}

json level_json(const LevelReport& l) {
  const LevelSummary& s = l.summary;
  json by_kind = json::object();
  for (size_t k = 1; k < kFailureKinds; ++k) by_kind[failure_name(static_cast<Failure>(k))] = s.failures[k];
  json requests = json::array();
  for (const RequestResult& r : l.results) requests.push_back(request_json(r));
  json rate = l.request_rate > 0 ? json(l.request_rate) : json();
  if (std::isinf(l.request_rate)) rate = "inf";  // JSON has no infinity
  return {{"concurrency", l.concurrency > 0 ? json(l.concurrency) : json()},
          {"request_rate", rate},
          {"requests", s.requests},
          {"completed", s.completed},
          {"errors", s.errors()},
          {"errors_by_kind", by_kind},
          {"error_samples", s.error_samples},
          {"output_len_mismatch", s.output_len_mismatch},
          {"usage_reported", s.usage_reported},
          {"duration_s", s.duration_s},
          {"request_throughput", s.request_throughput},
          {"output_throughput", s.output_throughput},
          {"total_token_throughput", s.total_throughput},
          {"total_input_tokens", s.input_tokens},
          {"total_output_tokens", s.output_tokens},
          {"ttft_ms", ms_json(s.ttft)},
          {"tpot_ms", ms_json(s.tpot)},
          {"itl_ms", ms_json(s.itl)},
          {"e2el_ms", ms_json(s.e2el)},
          {"per_request", std::move(requests)}};
}

}  // namespace ingot::loadgen
