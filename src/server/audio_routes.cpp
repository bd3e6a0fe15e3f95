// POST /v1/audio/transcriptions and /v1/audio/translations (OpenAI's
// multipart API). The upload is decoded here, on the HTTP thread, so bad
// audio gets its 400 at once; the model runs on the speech worker.
#include <chrono>
#include <cstdlib>

#include "audio/decode.h"
#include "server/api_error.h"
#include "server/multipart.h"
#include "server/routes.h"
#include "server/service.h"
#include "server/speech_worker.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::server {

namespace {

constexpr int kRate = 16000;
constexpr double kMaxSeconds = 3600;           // longer uploads are refused from the container's duration
constexpr size_t kMinSamples = kRate / 10 - 32;  // 0.1 s, less resampler rounding

struct AudioForm {
  const MultipartPart* file = nullptr;
  std::string model, language, prompt, response_format = "json", temperature, stream;
  std::vector<std::string> granularities;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The request's parts (views into its body); a non-multipart or malformed body is a 400.
std::vector<MultipartPart> form_parts(const HttpRequest& req) {
  std::string type = req.header("content-type");
  if (!is_multipart_form_data(type))
    bad_request("audio requests must be multipart/form-data with the audio in a 'file' part (got Content-Type '" +
                    type + "')",
                "file");
  try {
    return parse_form_data(type, req.body);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "file", "invalid_value");
  }
}

AudioForm parse_form(const std::vector<MultipartPart>& parts, bool translation) {
  AudioForm f;
  for (const MultipartPart& p : parts) {
    if (p.name == "file") {
      if (f.file) bad_request("only one 'file' part is allowed", "file");
      f.file = &p;
    } else if (p.name == "timestamp_granularities[]" || p.name == "timestamp_granularities") {
      if (translation) bad_request("translations take no 'timestamp_granularities'", "timestamp_granularities");
      f.granularities.push_back(std::string(trim(p.content)));
    } else if (p.name == "model") {
      f.model = std::string(trim(p.content));
    } else if (p.name == "language") {
      f.language = lower(std::string(trim(p.content)));
    } else if (p.name == "prompt") {
      f.prompt = p.content;
    } else if (p.name == "response_format") {
      f.response_format = std::string(trim(p.content));
    } else if (p.name == "temperature") {
      f.temperature = std::string(trim(p.content));
    } else if (p.name == "stream") {
      f.stream = lower(std::string(trim(p.content)));
    }  // other fields (include[], chunking_strategy, ...) are accepted and ignored
  }
  if (!f.file) bad_request("'file' is required: send the audio as a multipart part named 'file'", "file");
  const std::string& rf = f.response_format;
  if (rf != "json" && rf != "text" && rf != "srt" && rf != "verbose_json" && rf != "vtt")
    bad_request("'response_format' must be json, text, srt, verbose_json or vtt (got '" + rf + "')", "response_format");
  if (f.stream == "true") bad_request("streamed transcriptions are not supported; leave 'stream' off", "stream");
  for (const std::string& g : f.granularities) {
    if (g == "word")
      bad_request("word-level timestamps are not supported (no word alignment); use 'segment'",
                  "timestamp_granularities");
    if (g != "segment") bad_request("'timestamp_granularities' entries must be 'segment' or 'word'", "timestamp_granularities");
    if (rf != "verbose_json")
      bad_request("'timestamp_granularities' needs response_format verbose_json", "timestamp_granularities");
  }
  return f;
}

float parse_temperature(const std::string& s) {
  if (s.empty()) return 0.0f;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !(v >= 0.0 && v <= 1.0))
    bad_request("'temperature' must be a number in [0, 1] (got '" + s + "')", "temperature");
  return static_cast<float>(v);
}

SpeechWorker& speech_model(Service& svc, const std::string& requested) {
  SpeechWorker* w = svc.speech();
  if (!w)
    throw ApiError(400,
                   "model '" + svc.options().model_id +
                       "' does not support audio transcription; start the server with a Whisper model "
                       "(--model DIR or --audio-model DIR)",
                   "model", "model_not_supported");
  // "whisper-1" is the name OpenAI's own examples and many clients send.
  if (requested.empty() || requested == "whisper-1" || w->serves(requested)) return *w;
  const ServeOptions& o = svc.options();
  bool chat_model = requested == o.model_id;
  for (const auto& a : o.model_aliases) chat_model |= requested == a;
  if (chat_model)
    throw ApiError(400, "model '" + requested + "' does not support audio transcription; use '" + w->model_id() + "'",
                   "model", "model_not_supported");
  throw ApiError(404, "model '" + requested + "' is not served here; the audio model is '" + w->model_id() + "'",
                 "model", "model_not_found");
}

std::vector<float> decode_upload(const MultipartPart& file) {
  if (file.content.empty()) throw ApiError(400, "the uploaded file is empty", "file", "invalid_value");
  std::vector<float> pcm;
  try {
    audio::DecodeLimits lim;
    lim.max_seconds = kMaxSeconds;
    pcm = audio::decode_memory(std::string(file.content), kRate, lim);
  } catch (const Error& e) {
    std::string name = file.filename.empty() ? "the upload" : "'" + file.filename + "'";
    throw ApiError(400, name + " is not usable audio: " + e.what(), "file", "invalid_value");
  }
  if (pcm.size() < kMinSamples)
    throw ApiError(400,
                   str_cat("the audio is too short (", static_cast<double>(pcm.size()) / kRate,
                           " s); the minimum is 0.1 s"),
                   "file", "audio_too_short");
  return pcm;
}

std::string trimmed(std::string_view s) { return std::string(trim(s)); }

HttpResponse render(speech::Transcript t, const std::string& format) {
  t.text = trimmed(t.text);
  HttpResponse r;
  if (format == "json" || format == "verbose_json") {
    r.body = speech::format_json(t, format == "verbose_json");
    return r;
  }
  r.content_type = format == "vtt" ? "text/vtt; charset=utf-8" : "text/plain; charset=utf-8";
  r.body = format == "srt" ? speech::format_srt(t) : format == "vtt" ? speech::format_vtt(t) : t.text + "\n";
  return r;
}

HttpResponse run_audio(Service& svc, const HttpRequest& req, bool translation) {
  std::vector<MultipartPart> parts = form_parts(req);
  SpeechWorker& w = speech_model(svc, [&] {
    for (const MultipartPart& p : parts)
      if (p.name == "model") return trimmed(p.content);
    return std::string();
  }());
  AudioForm f = parse_form(parts, translation);
  SpeechJob job;
  job.options.task = translation ? "translate" : "transcribe";
  if (!translation) job.options.language = f.language;
  float temp = parse_temperature(f.temperature);
  // 0 (the default) keeps the fallback ladder, as OpenAI documents; any other value is used alone.
  if (temp > 0) job.options.temperatures = {temp};
  job.options.timestamps = f.response_format == "srt" || f.response_format == "vtt" || f.response_format == "verbose_json";
  job.prompt = f.prompt;
  job.pcm = decode_upload(*f.file);
  SpeechWorker::Ticket ticket = w.submit(std::move(job));
  while (!ticket.wait(std::chrono::milliseconds(100))) {
    if (req.client_gone()) {
      ticket.cancel();
      throw ApiError(499, "the client closed the connection");
    }
  }
  return render(ticket.get(), f.response_format);
}

}  // namespace

bool needs_text_model(const std::string& method, const std::string& path) {
  return method == "POST" && !starts_with(path, "/v1/audio/");
}

HttpResponse audio_transcriptions(Service& svc, const HttpRequest& req) { return run_audio(svc, req, false); }
HttpResponse audio_translations(Service& svc, const HttpRequest& req) { return run_audio(svc, req, true); }

}  // namespace ingot::server
