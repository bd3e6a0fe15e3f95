#include "speech/transcribe.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "audio/mel.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::speech {

using nlohmann::json;

namespace {

constexpr int kSampleRate = 16000;
constexpr double kSecondsPerTimestamp = 0.02;  // one timestamp token per 2 encoder frames

std::vector<int32_t> ints(const json& j, const char* key) {
  std::vector<int32_t> out;
  auto it = j.find(key);
  if (it == j.end()) return out;
  if (it->is_number_integer()) out.push_back(it->get<int32_t>());
  if (it->is_array())
    for (const json& v : *it)
      if (v.is_number_integer()) out.push_back(v.get<int32_t>());
  return out;
}

double compression_ratio(const std::string& s) {
  if (s.empty()) return 0.0;
  uLongf cap = compressBound(static_cast<uLong>(s.size()));
  std::vector<Bytef> buf(cap);
  if (compress2(buf.data(), &cap, reinterpret_cast<const Bytef*>(s.data()), static_cast<uLong>(s.size()), 9) != Z_OK)
    return 0.0;
  return static_cast<double>(s.size()) / static_cast<double>(cap);
}

struct WindowResult {
  std::vector<int32_t> tokens;  // generated, EOS excluded
  double sum_logprob = 0;
  double avg_logprob = 0;
  double compression = 0;
  std::string text;
};

class WindowDecoder {
 public:
  WindowDecoder(const WhisperModel& m, const WhisperGeneration& g, const TranscribeOptions& o, const TextFn& t)
      : model_(m), gen_(g), opt_(o), text_(t) {
    ts_begin_ = gen_.no_timestamps_id >= 0 ? gen_.no_timestamps_id + 1 : -1;
  }

  int32_t ts_begin() const { return ts_begin_; }
  bool is_eos(int32_t t) const {
    return std::find(gen_.eos_token_ids.begin(), gen_.eos_token_ids.end(), t) != gen_.eos_token_ids.end();
  }
  bool is_timestamp(int32_t t) const { return ts_begin_ >= 0 && t >= ts_begin_; }

  WindowResult run(const Tensor& enc, const std::vector<int32_t>& prompt, float temperature, std::mt19937_64& rng,
                   Dump* dump) const {
    auto st = model_.start(enc);
    const int64_t V = model_.config().vocab_size;
    int64_t limit = model_.config().max_target_positions - static_cast<int64_t>(prompt.size());
    if (opt_.max_new_tokens > 0) limit = std::min(limit, opt_.max_new_tokens);
    WindowResult r;
    std::vector<int32_t> feed = prompt;
    for (int64_t step = 0; step < limit; ++step) {
      std::vector<float> row = model_.decode(st, feed).to_f32_vector();
      if (dump) dump->step_logits.insert(dump->step_logits.end(), row.begin(), row.end());
      process(row, r.tokens, step);
      int32_t tok = choose(row, temperature, rng);
      // log-probability of the choice under the processed distribution
      float mx = *std::max_element(row.begin(), row.end());
      double se = 0;
      for (float v : row) se += std::exp(static_cast<double>(v) - mx);
      double lp = row[static_cast<size_t>(tok)] - mx - std::log(se);
      if (std::isfinite(lp)) r.sum_logprob += lp;
      if (dump) dump->decoder_ids.push_back(tok);
      if (is_eos(tok)) break;
      r.tokens.push_back(tok);
      feed = {tok};
      (void)V;
    }
    std::vector<int32_t> text_tokens;
    for (int32_t t : r.tokens)
      if (!is_timestamp(t)) text_tokens.push_back(t);
    r.text = text_ ? text_(text_tokens) : "";
    r.avg_logprob = r.sum_logprob / static_cast<double>(r.tokens.size() + 1);
    r.compression = compression_ratio(r.text);
    return r;
  }

 private:
  void process(std::vector<float>& row, const std::vector<int32_t>& generated, int64_t step) const {
    const float ninf = -std::numeric_limits<float>::infinity();
    const int64_t V = static_cast<int64_t>(row.size());
    auto suppress = [&](int32_t id) {
      if (id >= 0 && id < V) row[static_cast<size_t>(id)] = ninf;
    };
    for (int32_t id : gen_.suppress_tokens) suppress(id);
    if (step == 0)
      for (int32_t id : gen_.begin_suppress_tokens) suppress(id);
    if (ts_begin_ < 0 || ts_begin_ >= V) return;
    if (!opt_.timestamps) {
      for (int64_t id = ts_begin_; id < V; ++id) row[static_cast<size_t>(id)] = ninf;
      return;
    }
    suppress(gen_.no_timestamps_id);
    const size_t n = generated.size();
    bool last_ts = n >= 1 && is_timestamp(generated[n - 1]);
    bool penult_ts = n < 2 || is_timestamp(generated[n - 2]);
    int32_t eos = gen_.eos_token_ids.empty() ? ts_begin_ : gen_.eos_token_ids[0];
    if (last_ts) {
      if (penult_ts) {  // a pair just closed: text (or EOS) must follow
        for (int64_t id = ts_begin_; id < V; ++id) row[static_cast<size_t>(id)] = ninf;
      } else {  // an open segment: a timestamp or EOS must follow
        for (int64_t id = 0; id < eos; ++id) row[static_cast<size_t>(id)] = ninf;
      }
    }
    int32_t last_time = -1;
    for (int32_t t : generated)
      if (is_timestamp(t)) last_time = t;
    if (last_time >= 0) {  // time never runs backwards
      int32_t floor = last_ts && !penult_ts ? last_time : last_time + 1;
      for (int32_t id = ts_begin_; id < std::min<int32_t>(floor, static_cast<int32_t>(V)); ++id) suppress(id);
    }
    if (step == 0) {  // a window starts with a timestamp, not too late
      for (int64_t id = 0; id < ts_begin_; ++id) row[static_cast<size_t>(id)] = ninf;
      for (int64_t id = ts_begin_ + gen_.max_initial_timestamp_index + 1; id < V; ++id)
        row[static_cast<size_t>(id)] = ninf;
    }
    // When timestamps together are likelier than any single text token, take one.
    float mx = *std::max_element(row.begin(), row.end());
    if (!std::isfinite(mx)) return;
    double total = 0;
    for (float v : row) total += std::exp(static_cast<double>(v) - mx);
    double ts_mass = 0, text_max = 0;
    for (int64_t id = 0; id < V; ++id) {
      double p = std::exp(static_cast<double>(row[static_cast<size_t>(id)]) - mx) / total;
      if (id >= ts_begin_) ts_mass += p;
      else text_max = std::max(text_max, p);
    }
    if (ts_mass > text_max)
      for (int64_t id = 0; id < ts_begin_; ++id) row[static_cast<size_t>(id)] = ninf;
  }

  int32_t choose(const std::vector<float>& row, float temperature, std::mt19937_64& rng) const {
    if (temperature <= 0) {
      Tensor t = Tensor::from_f32(row, {1, static_cast<int64_t>(row.size())});
      return ops::argmax(t).to_i32_vector()[0];
    }
    float mx = *std::max_element(row.begin(), row.end());
    std::vector<double> p(row.size());
    double s = 0;
    for (size_t i = 0; i < row.size(); ++i) s += (p[i] = std::exp((row[i] - mx) / temperature));
    std::uniform_real_distribution<double> u(0.0, s);
    double x = u(rng), acc = 0;
    for (size_t i = 0; i < p.size(); ++i)
      if ((acc += p[i]) >= x && p[i] > 0) return static_cast<int32_t>(i);
    return static_cast<int32_t>(std::max_element(p.begin(), p.end()) - p.begin());
  }

  const WhisperModel& model_;
  const WhisperGeneration& gen_;
  const TranscribeOptions& opt_;
  const TextFn& text_;
  int32_t ts_begin_ = -1;
};

int32_t language_token(const WhisperGeneration& gen, const std::string& lang) {
  std::string want = starts_with(lang, "<|") ? lang : "<|" + lang + "|>";
  for (const auto& [name, id] : gen.lang_to_id)
    if (name == want) return id;
  fail(ErrorKind::InvalidArgument, "unknown language '", lang, "' for this model");
}

}  // namespace

WhisperGeneration load_whisper_generation(const std::string& dir, const ModelConfig& cfg) {
  WhisperGeneration g;
  g.decoder_start_token_id = static_cast<int32_t>(cfg.get_int("decoder_start_token_id", 0));
  g.eos_token_ids = cfg.eos_token_ids;
  std::string path = (std::filesystem::path(dir) / "generation_config.json").string();
  if (!file_exists(path)) return g;
  json j;
  try {
    j = json::parse(read_text_file(path));
  } catch (const std::exception& e) {
    fail(ErrorKind::BadFormat, path, ": ", e.what());
  }
  if (!j.is_object()) return g;
  if (j.contains("decoder_start_token_id") && j["decoder_start_token_id"].is_number_integer())
    g.decoder_start_token_id = j["decoder_start_token_id"].get<int32_t>();
  auto eos = ints(j, "eos_token_id");
  if (!eos.empty()) g.eos_token_ids = eos;
  g.suppress_tokens = ints(j, "suppress_tokens");
  g.begin_suppress_tokens = ints(j, "begin_suppress_tokens");
  if (j.contains("lang_to_id") && j["lang_to_id"].is_object())
    for (auto it = j["lang_to_id"].begin(); it != j["lang_to_id"].end(); ++it)
      if (it->is_number_integer()) g.lang_to_id.emplace_back(it.key(), it->get<int32_t>());
  if (j.contains("task_to_id") && j["task_to_id"].is_object()) {
    g.transcribe_id = j["task_to_id"].value("transcribe", -1);
    g.translate_id = j["task_to_id"].value("translate", -1);
  }
  if (j.contains("no_timestamps_token_id") && j["no_timestamps_token_id"].is_number_integer())
    g.no_timestamps_id = j["no_timestamps_token_id"].get<int32_t>();
  if (j.contains("prev_sot_token_id") && j["prev_sot_token_id"].is_number_integer())
    g.prev_sot_id = j["prev_sot_token_id"].get<int32_t>();
  if (j.contains("max_initial_timestamp_index") && j["max_initial_timestamp_index"].is_number_integer())
    g.max_initial_timestamp_index = j["max_initial_timestamp_index"].get<int32_t>();
  g.is_multilingual = j.value("is_multilingual", !g.lang_to_id.empty());
  return g;
}

Transcript transcribe(const WhisperModel& model, const WhisperGeneration& gen, const std::vector<float>& pcm,
                      const TranscribeOptions& opt, const TextFn& text, Dump* dump) {
  if (pcm.empty()) fail(ErrorKind::InvalidArgument, "the audio is empty");
  if (opt.task != "transcribe" && opt.task != "translate")
    fail(ErrorKind::InvalidArgument, "task must be transcribe or translate");
  if (opt.temperatures.empty()) fail(ErrorKind::InvalidArgument, "no decoding temperature given");
  if (opt.task == "translate" && (!gen.is_multilingual || gen.translate_id < 0))
    fail(ErrorKind::InvalidArgument, "this model cannot translate (it is English-only or has no translate token)");
  if (!gen.is_multilingual && !opt.language.empty() && opt.language != "en" && opt.language != "<|en|>")
    fail(ErrorKind::InvalidArgument, "this model is English-only; language '", opt.language, "' is not available");
  if (gen.is_multilingual && !gen.lang_to_id.empty() && !opt.language.empty()) language_token(gen, opt.language);
  if (!opt.prompt_ids.empty() && gen.prev_sot_id < 0)
    fail(ErrorKind::InvalidArgument, "this model has no <|startofprev|> token, so it takes no text prompt");
  // Like the reference, keep the prompt's last max_target_positions / 2 - 1 tokens.
  std::vector<int32_t> prev;
  if (!opt.prompt_ids.empty()) {
    size_t keep = static_cast<size_t>(std::max<int64_t>(0, model.config().max_target_positions / 2 - 1));
    prev.push_back(gen.prev_sot_id);
    size_t from = opt.prompt_ids.size() > keep ? opt.prompt_ids.size() - keep : 0;
    prev.insert(prev.end(), opt.prompt_ids.begin() + static_cast<std::ptrdiff_t>(from), opt.prompt_ids.end());
  }
  for (float t : opt.temperatures)
    if (!(t >= 0.0f) || t > 2.0f) fail(ErrorKind::InvalidArgument, "temperature must be in [0, 2]");
  audio::MelConfig mc;
  mc.n_mels = static_cast<int>(model.config().num_mel_bins);
  const int64_t window = mc.n_samples;
  WindowDecoder dec(model, gen, opt, text);
  Transcript out;
  out.task = opt.task;
  if (!gen.is_multilingual) out.language = "en";  // English-only checkpoints
  out.duration = static_cast<double>(pcm.size()) / kSampleRate;
  std::mt19937_64 rng(opt.seed);
  int32_t lang_id = -1;
  for (int64_t seek = 0; seek < static_cast<int64_t>(pcm.size());) {
    const int64_t len = std::min<int64_t>(window, static_cast<int64_t>(pcm.size()) - seek);
    std::vector<float> chunk(pcm.begin() + seek, pcm.begin() + seek + len);
    Tensor mel = audio::log_mel(chunk, mc, model.device());
    Tensor enc = model.encode(mel);
    bool first = dump && out.segments.empty() && seek == 0;
    std::vector<int32_t> prompt = prev;
    prompt.push_back(gen.decoder_start_token_id);
    if (gen.is_multilingual && !gen.lang_to_id.empty()) {
      if (lang_id < 0) {
        if (!opt.language.empty()) {
          lang_id = language_token(gen, opt.language);
        } else {  // detect from the first window
          auto st = model.start(enc);
          std::vector<float> row = model.decode(st, {gen.decoder_start_token_id}).to_f32_vector();
          float best = -std::numeric_limits<float>::infinity();
          for (const auto& [name, id] : gen.lang_to_id)
            if (id < static_cast<int32_t>(row.size()) && row[static_cast<size_t>(id)] > best) {
              best = row[static_cast<size_t>(id)];
              lang_id = id;
            }
        }
      }
      prompt.push_back(lang_id);
      for (const auto& [name, id] : gen.lang_to_id)
        if (id == lang_id) out.language = name.substr(2, name.size() - 4);
    }
    int32_t task_id = opt.task == "translate" ? gen.translate_id : gen.transcribe_id;
    if (task_id >= 0) prompt.push_back(task_id);
    if (!opt.timestamps && gen.no_timestamps_id >= 0) prompt.push_back(gen.no_timestamps_id);
    if (first) {
      dump->mel = mel;
      dump->encoder_out = enc.to(Device::CPU);
      dump->decoder_ids = prompt;
    }
    WindowResult r;
    float used_t = 0;
    for (size_t ti = 0; ti < opt.temperatures.size(); ++ti) {
      used_t = opt.temperatures[ti];
      r = dec.run(enc, prompt, used_t, rng, first && ti == 0 ? dump : nullptr);
      bool last = ti + 1 == opt.temperatures.size() || !opt.fallback;
      bool bad = r.compression > opt.compression_ratio_threshold || r.avg_logprob < opt.logprob_threshold;
      if (!bad || last) break;
    }
    const double t0 = static_cast<double>(seek) / kSampleRate;
    int64_t advance = len;
    std::vector<Segment> segs;
    if (opt.timestamps && dec.ts_begin() >= 0) {
      // Segments between consecutive timestamp tokens.
      Segment cur;
      bool open = false;
      int32_t last_ts = -1;
      for (int32_t t : r.tokens) {
        if (dec.is_timestamp(t)) {
          double at = t0 + (t - dec.ts_begin()) * kSecondsPerTimestamp;
          last_ts = t;
          if (!open) {
            cur = Segment();
            cur.start = at;
            open = true;
          } else {
            cur.end = at;
            open = false;
            segs.push_back(cur);
          }
        } else if (open) {
          cur.tokens.push_back(t);
        }
      }
      size_t n = r.tokens.size();
      bool single_ending = n >= 1 && dec.is_timestamp(r.tokens[n - 1]) && !(n >= 2 && dec.is_timestamp(r.tokens[n - 2]));
      if (!single_ending && last_ts >= 0 && len == window) {
        advance = static_cast<int64_t>((last_ts - dec.ts_begin()) * kSecondsPerTimestamp * kSampleRate);
        // A window always moves on by at least a second, so the number of windows stays bounded by the
        // duration whatever the timestamps say.
        advance = std::max<int64_t>(advance, kSampleRate);
      }
      if (open && !cur.tokens.empty()) {  // unterminated text runs to the window's end
        cur.end = t0 + static_cast<double>(len) / kSampleRate;
        segs.push_back(cur);
      }
      for (Segment& s : segs) s.text = text ? text(s.tokens) : "";
    } else {
      Segment s;
      s.start = t0;
      s.end = t0 + static_cast<double>(len) / kSampleRate;
      s.tokens = r.tokens;
      s.text = r.text;
      segs.push_back(s);
    }
    for (Segment& s : segs) {
      s.avg_logprob = r.avg_logprob;
      s.compression_ratio = r.compression;
      s.temperature = used_t;
      out.text += s.text;
      out.segments.push_back(std::move(s));
    }
    seek += advance;
  }
  return out;
}

namespace {
std::string stamp(double t, char sep) {
  int64_t ms = static_cast<int64_t>(std::llround(t * 1000));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%02lld:%02lld:%02lld%c%03lld", static_cast<long long>(ms / 3600000),
                static_cast<long long>(ms / 60000 % 60), static_cast<long long>(ms / 1000 % 60), sep,
                static_cast<long long>(ms % 1000));
  return buf;
}
}  // namespace

std::string format_srt(const Transcript& t) {
  std::string out;
  int i = 1;
  for (const Segment& s : t.segments)
    out += std::to_string(i++) + "\n" + stamp(s.start, ',') + " --> " + stamp(s.end, ',') + "\n" +
           std::string(trim(s.text)) + "\n\n";
  return out;
}

std::string format_vtt(const Transcript& t) {
  std::string out = "WEBVTT\n\n";
  for (const Segment& s : t.segments)
    out += stamp(s.start, '.') + " --> " + stamp(s.end, '.') + "\n" + std::string(trim(s.text)) + "\n\n";
  return out;
}

std::string format_json(const Transcript& t, bool verbose) {
  json j = {{"text", t.text}};
  if (verbose) {
    j["task"] = t.task;
    j["language"] = t.language;
    j["duration"] = t.duration;
    json segs = json::array();
    int id = 0;
    for (const Segment& s : t.segments)
      segs.push_back({{"id", id++}, {"start", s.start}, {"end", s.end}, {"text", s.text}, {"tokens", s.tokens},
                      {"temperature", s.temperature}, {"avg_logprob", s.avg_logprob},
                      {"compression_ratio", s.compression_ratio}});
    j["segments"] = segs;
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace ingot::speech
