// POST /v1/embeddings: the prompt's final hidden states pooled (last token or
// mean), L2-normalised; `dimensions` truncates then renormalises (Matryoshka).
#include "server/embeddings.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/routes.h"
#include "server/service.h"

namespace ingot::server {

std::string detect_pooling(const std::string& model_path) {
  std::filesystem::path p = std::filesystem::path(model_path) / "1_Pooling" / "config.json";
  std::ifstream in(p);
  if (!in) return "last";
  json cfg = json::parse(in, nullptr, false);
  if (!cfg.is_object()) return "last";
  if (cfg.value("pooling_mode_lasttoken", false)) return "last";
  if (cfg.value("pooling_mode_mean_tokens", false)) return "mean";
  for (const char* mode : {"pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                           "pooling_mode_weightedmean_tokens"})
    if (cfg.value(mode, false)) return std::string(mode).substr(13);
  return "last";
}

namespace {

std::string base64(const std::vector<float>& v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* b = reinterpret_cast<const unsigned char*>(v.data());  // little-endian float32, as OpenAI sends
  const size_t n = v.size() * sizeof(float);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t x = static_cast<uint32_t>(b[i]) << 16;
    if (i + 1 < n) x |= static_cast<uint32_t>(b[i + 1]) << 8;
    if (i + 2 < n) x |= b[i + 2];
    out += kAlphabet[(x >> 18) & 63];
    out += kAlphabet[(x >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(x >> 6) & 63] : '=';
    out += i + 2 < n ? kAlphabet[x & 63] : '=';
  }
  return out;
}

std::vector<int32_t> ids_of(const Service& svc, const json& a) {
  std::vector<int32_t> ids;
  const int64_t vocab = svc.tokenizer().vocab_size();
  for (const json& x : a) {
    if (!x.is_number_integer()) bad_request("token ids must be integers", "input");
    const int64_t v = x.get<int64_t>();
    if (v < 0 || v >= vocab) bad_request("token id " + std::to_string(v) + " is out of range", "input");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

// string | [string] | [int] | [[int]] as token lists.
std::vector<std::vector<int32_t>> inputs(const Service& svc, const json& in) {
  const char* shape = "'input' must be a string, an array of strings, an array of token ids or an array of those";
  auto is_ids = [](const json& a) { return a.is_array() && !a.empty() && a[0].is_number(); };
  std::vector<std::vector<int32_t>> out;
  if (in.is_string()) {
    out.push_back(svc.encode(in.get<std::string>(), true));
  } else if (is_ids(in)) {
    out.push_back(ids_of(svc, in));
  } else if (in.is_array() && !in.empty()) {
    for (const json& x : in) {
      if (x.is_string()) out.push_back(svc.encode(x.get<std::string>(), true));
      else if (is_ids(x)) out.push_back(ids_of(svc, x));
      else bad_request(shape, "input");
    }
  } else {
    bad_request(shape, "input");
  }
  if (out.size() > 2048) bad_request("at most 2048 inputs per request", "input");
  for (const auto& ids : out) {
    if (ids.empty()) bad_request("an input is empty", "input");
    if (static_cast<int64_t>(ids.size()) > svc.options().context_length)
      throw ApiError(400, "an input has " + std::to_string(ids.size()) + " tokens; the context length is " +
                              std::to_string(svc.options().context_length), "input", "context_length_exceeded");
  }
  return out;
}

void normalise(std::vector<float>& v) {
  double ss = 0;
  for (float x : v) ss += static_cast<double>(x) * x;
  const double norm = std::sqrt(ss);
  if (norm > 0)
    for (float& x : v) x = static_cast<float>(x / norm);
}

}  // namespace

HttpResponse embeddings(Service& svc, const HttpRequest& req) {
  json body = parse_json_body(req.body);
  svc.check_model(body);
  if (!body.contains("input")) bad_request("'input' is required", "input");
  std::string fmt = opt_string(body, "encoding_format").value_or("float");
  if (fmt != "float" && fmt != "base64") bad_request("'encoding_format' must be float or base64", "encoding_format");
  auto dims = opt_int(body, "dimensions", 1, 1 << 20);
  opt_string(body, "user");
  const std::string& pooling = svc.options().embedding_pooling;
  if (pooling != "last" && pooling != "mean")
    throw ApiError(400, "model '" + svc.options().model_id + "' pools with '" + pooling + "', which is not supported",
                   "model", "model_not_supported");
  auto lists = inputs(svc, body["input"]);
  std::vector<engine::Request> reqs;
  for (auto& ids : lists) {
    engine::Request r;
    r.prompt = std::move(ids);
    r.pooling = pooling == "mean" ? engine::Request::Pooling::Mean : engine::Request::Pooling::Last;
    r.stop.max_tokens = 0;
    reqs.push_back(std::move(r));
  }
  Generation gen(svc, std::move(reqs));
  if (!gen.run(nullptr, req.client_gone)) return json_response(openai_error_body(499, "client closed the request"), 499);
  json data = json::array();
  int64_t tokens = 0;
  for (size_t i = 0; i < gen.outputs().size(); ++i) {
    GenOutput& o = gen.outputs()[i];
    if (o.reason == engine::FinishReason::Error) {
      if (o.error.find("does not produce embeddings") != std::string::npos)
        throw ApiError(400, o.error, "model", "model_not_supported");
      throw ApiError(500, "embedding failed: " + o.error);
    }
    if (o.embedding.empty()) throw ApiError(500, "the engine returned no embedding");
    std::vector<float> v = std::move(o.embedding);
    normalise(v);
    if (dims) {
      if (*dims > static_cast<int64_t>(v.size()))
        bad_request("'dimensions' (" + std::to_string(*dims) + ") exceeds the model's " + std::to_string(v.size()),
                    "dimensions");
      v.resize(static_cast<size_t>(*dims));
      normalise(v);
    }
    tokens += o.usage.prompt_tokens;
    json e = {{"object", "embedding"}, {"index", i}};
    if (fmt == "base64")
      e["embedding"] = base64(v);
    else
      e["embedding"] = v;
    data.push_back(std::move(e));
  }
  return json_response({{"object", "list"}, {"data", data}, {"model", svc.options().model_id},
                        {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

}  // namespace ingot::server
