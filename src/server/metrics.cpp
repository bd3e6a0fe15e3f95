#include "server/metrics.h"

#include <sstream>

namespace ingot::server {

namespace {
std::string fmt(double v) {
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}
}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream os;
  os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    os << name << "_bucket{le=\"" << fmt(bounds_[i]) << "\"} " << cum << '\n';
  }
  cum += counts_.back();
  os << name << "_bucket{le=\"+Inf\"} " << cum << '\n';
  os << name << "_sum " << fmt(sum_) << '\n' << name << "_count " << count_ << '\n';
  return os.str();
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      tpot_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      e2e_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}) {}

void Metrics::count_request(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{route, status}];
}

void Metrics::add_tokens(int64_t prompt, int64_t completion) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += prompt;
  completion_tokens_ += completion;
}

void Metrics::count_finish(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++finishes_[reason];
}

void Metrics::count_http_event(const std::string& event) {
  std::lock_guard<std::mutex> lock(mu_);
  ++http_events_[event];
}

void Metrics::set_http_connections(size_t open) {
  std::lock_guard<std::mutex> lock(mu_);
  http_connections_ = open;
}

std::string Metrics::render(const engine::Stats& s) const {
  std::ostringstream os;
  auto gauge = [&](const char* name, const char* help, double v) {
    os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " gauge\n" << name << ' ' << fmt(v) << '\n';
  };
  auto counter = [&](const char* name, const char* help, double v) {
    os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " counter\n" << name << ' ' << fmt(v) << '\n';
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    os << "# HELP ingot_http_requests_total HTTP requests by route and status.\n"
          "# TYPE ingot_http_requests_total counter\n";
    for (auto& [key, n] : requests_)
      os << "ingot_http_requests_total{route=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << '\n';
    os << "# HELP ingot_request_finish_total Generations by finish reason.\n"
          "# TYPE ingot_request_finish_total counter\n";
    for (auto& [reason, n] : finishes_) os << "ingot_request_finish_total{reason=\"" << reason << "\"} " << n << '\n';
    os << "# HELP ingot_http_connection_events_total Connections refused or closed by the server, by cause.\n"
          "# TYPE ingot_http_connection_events_total counter\n";
    for (auto& [event, n] : http_events_)
      os << "ingot_http_connection_events_total{event=\"" << event << "\"} " << n << '\n';
    gauge("ingot_http_connections_open", "Open HTTP connections.", static_cast<double>(http_connections_));
    counter("ingot_prompt_tokens_total", "Prompt tokens of served requests.", static_cast<double>(prompt_tokens_));
    counter("ingot_generation_tokens_total", "Tokens generated for served requests.",
            static_cast<double>(completion_tokens_));
  }
  counter("ingot_engine_requests_total", "Requests the engine accepted.", static_cast<double>(s.requests_total));
  counter("ingot_engine_requests_rejected_total", "Requests the engine rejected (queue full).",
          static_cast<double>(s.requests_rejected));
  counter("ingot_engine_prompt_tokens_total", "Prompt tokens the engine processed.",
          static_cast<double>(s.prompt_tokens_total));
  counter("ingot_engine_generation_tokens_total", "Tokens the engine generated.",
          static_cast<double>(s.generated_tokens_total));
  gauge("ingot_requests_running", "Sequences decoding now.", static_cast<double>(s.running));
  gauge("ingot_requests_waiting", "Requests queued for admission.", static_cast<double>(s.waiting));
  gauge("ingot_kv_blocks_used", "KV cache blocks in use.", static_cast<double>(s.kv_blocks_used));
  gauge("ingot_kv_blocks_total", "KV cache blocks available.", static_cast<double>(s.kv_blocks_total));
  gauge("ingot_kv_bytes_used", "Bytes of KV cache in use.", s.kv_bytes_used);
  gauge("ingot_kv_usage_ratio", "Fraction of KV cache blocks in use.",
        s.kv_blocks_total > 0 ? static_cast<double>(s.kv_blocks_used) / static_cast<double>(s.kv_blocks_total) : 0.0);
  counter("ingot_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache.",
          static_cast<double>(s.prefix_hit_tokens));
  counter("ingot_prefix_cache_lookup_tokens_total", "Prompt tokens looked up in the prefix cache.",
          static_cast<double>(s.prefix_lookup_tokens));
  gauge("ingot_prefix_cache_hit_rate", "Prefix-cache hit tokens over looked-up tokens.",
        s.prefix_lookup_tokens > 0
            ? static_cast<double>(s.prefix_hit_tokens) / static_cast<double>(s.prefix_lookup_tokens)
            : 0.0);
  counter("ingot_spec_decode_drafts_total", "Verifications of draft tokens (speculative decoding).",
          static_cast<double>(s.spec_drafts));
  counter("ingot_spec_decode_draft_tokens_total", "Draft tokens verified.", static_cast<double>(s.spec_draft_tokens));
  counter("ingot_spec_decode_accepted_tokens_total", "Draft tokens the model kept.",
          static_cast<double>(s.spec_accepted_tokens));
  counter("ingot_engine_steps_total", "Batched forward passes (engine steps).", static_cast<double>(s.steps));
  counter("ingot_engine_step_sequences_total", "Sequences carried by engine steps (decode rows and prefill chunks).",
          static_cast<double>(s.step_sequences));
  counter("ingot_engine_step_tokens_total", "Tokens carried by engine steps.", static_cast<double>(s.step_tokens));
  counter("ingot_engine_graph_steps_total", "Decode-only engine steps replayed from a captured graph.",
          static_cast<double>(s.graph_steps));
  counter("ingot_engine_graphs_captured_total", "Decode step graphs captured (one per batch size and key bucket).",
          static_cast<double>(s.graphs_captured));
  os << "# HELP ingot_engine_step_seconds_total Wall time of engine steps by phase: schedule (admission, batch "
        "building), forward (the pass, with batched token selection), sample (token selection on the host), emit "
        "(stop checks, detokenizing, streaming).\n"
     << "# TYPE ingot_engine_step_seconds_total counter\n"
     << "ingot_engine_step_seconds_total{phase=\"schedule\"} " << fmt(s.step_schedule_seconds) << '\n'
     << "ingot_engine_step_seconds_total{phase=\"forward\"} " << fmt(s.step_forward_seconds) << '\n'
     << "ingot_engine_step_seconds_total{phase=\"sample\"} " << fmt(s.step_sample_seconds) << '\n'
     << "ingot_engine_step_seconds_total{phase=\"emit\"} " << fmt(s.step_emit_seconds) << '\n';
  // Per tier: RAM (forked from an entry) and disk (restored from a snapshot).
  auto by_tier = [&](const char* name, const char* help, double ram, double disk) {
    os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " counter\n"
       << name << "{tier=\"ram\"} " << fmt(ram) << '\n' << name << "{tier=\"disk\"} " << fmt(disk) << '\n';
  };
  by_tier("ingot_prefix_cache_hits_total", "Requests that reused a cached prefix, by the tier it came from.",
          static_cast<double>(s.prefix_ram_hits), static_cast<double>(s.prefix_disk_hits));
  by_tier("ingot_prefix_cache_reused_tokens_total", "Prompt tokens reused from the prefix cache, by tier.",
          static_cast<double>(s.prefix_ram_hit_tokens), static_cast<double>(s.prefix_disk_hit_tokens));
  by_tier("ingot_prefix_cache_evictions_total", "Prefix-cache entries evicted (RAM) and snapshot files evicted (disk).",
          static_cast<double>(s.prefix_evictions), static_cast<double>(s.disk_cache_evictions));
  gauge("ingot_prompt_cache_disk_enabled", "1 when prefixes are kept on disk.", s.disk_cache ? 1.0 : 0.0);
  gauge("ingot_prompt_cache_disk_files", "Snapshot files of this model on disk.", static_cast<double>(s.disk_cache_files));
  gauge("ingot_prompt_cache_disk_bytes", "Bytes of this model's snapshot files.", static_cast<double>(s.disk_cache_bytes));
  counter("ingot_prompt_cache_disk_writes_total", "Snapshots written.", static_cast<double>(s.disk_cache_writes));
  counter("ingot_prompt_cache_disk_dropped_total", "Snapshots not written because the write queue was full.",
          static_cast<double>(s.disk_cache_dropped));
  counter("ingot_prompt_cache_disk_write_errors_total", "Snapshot writes that failed (disk full, permissions).",
          static_cast<double>(s.disk_cache_failed));
  counter("ingot_prompt_cache_disk_refused_total", "Snapshot files refused (corrupt, truncated or foreign) and deleted.",
          static_cast<double>(s.disk_cache_refused));
  os << ttft_.render("ingot_time_to_first_token_seconds", "Time from submission to the first token.");
  os << tpot_.render("ingot_time_per_output_token_seconds", "Mean time between tokens after the first.");
  os << e2e_.render("ingot_request_duration_seconds", "Time from submission to the last token.");
  return os.str();
}

}  // namespace ingot::server
