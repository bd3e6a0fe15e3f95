// The HTTP side of `ingot bench serve`: streamed /v1/completions requests
// against any OpenAI-compatible server, many at once from one thread (curl's
// multi interface), so the client does not distort what it measures.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loadgen/stream.h"

namespace ingot::loadgen {

struct ServerTarget {
  std::string url;         // the server's base URL (see endpoint_urls)
  std::string model;       // the request's "model"
  std::string api_key;     // sent as a Bearer token when set
  double timeout_s = 600;  // per request, connect to last byte
  nlohmann::json extra_body = nlohmann::json::object();  // merged into every request body
};

struct Endpoints {
  std::string completions, models;
};
// "http://h:p", "http://h:p/v1" or "http://h:p/v1/completions" -> both
// routes; throws InvalidArgument for a URL that is not http(s).
Endpoints endpoint_urls(const std::string& url);

// The body of one streamed completion: the prompt as token ids, exactly
// `output_len` tokens asked for (max_tokens, min_tokens, ignore_eos) and the
// final usage chunk requested.
std::string completion_body(const ServerTarget& target, const std::vector<int32_t>& prompt, int64_t output_len);

// How one level sends its requests: request i leaves at arrivals[i] seconds
// after the start, or later while `max_concurrency` requests are in flight.
struct LevelLoad {
  int64_t max_concurrency = 0;   // 0: no limit
  std::vector<double> arrivals;  // one per prompt
};

struct LevelRun {
  std::vector<RequestResult> results;  // in prompt order
  double duration_s = 0;               // from the first send to the last answer
};

// Sends every prompt and waits for every answer; failures are recorded in
// the results, never thrown (only a bad argument or a curl set-up failure is).
LevelRun run_level(const ServerTarget& target, const std::vector<std::vector<int32_t>>& prompts, int64_t output_len,
                   const LevelLoad& load);

// The first model id that GET /v1/models lists; throws Io when the server
// cannot be reached or does not answer with a model list.
std::string discover_model(const ServerTarget& target);

}  // namespace ingot::loadgen
