// POST /v1/audio/transcriptions and /v1/audio/translations (OpenAI's
// multipart API). The upload is checked here, on the HTTP thread, so bad
// audio gets its 400 at once; the speech worker decodes it again window by
// window while the model runs.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>

#include "audio/decode.h"
#include "server/api_error.h"
#include "server/multipart.h"
#include "server/routes.h"
#include "server/service.h"
#include "server/speech_worker.h"
#include "server/sse.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::server {

namespace {

constexpr int kRate = 16000;
constexpr size_t kMinSamples = kRate / 10 - 32;  // 0.1 s, less resampler rounding

struct AudioForm {
  const MultipartPart* file = nullptr;
  std::string model, language, prompt, response_format = "json", temperature, stream;
  std::vector<std::string> granularities;
  // Decoding options beyond OpenAI's fields, named as faster-whisper names them: field -> value.
  std::vector<std::pair<std::string, std::string>> decoding;
};

// The decoding fields a request may add to OpenAI's.
constexpr const char* kDecodingFields[] = {
    "beam_size",  "best_of",             "patience",                    "length_penalty",    "condition_on_previous_text",
    "vad_filter", "no_speech_threshold", "compression_ratio_threshold", "log_prob_threshold"};

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
    } else {
      for (const char* name : kDecodingFields)
        if (p.name == name) f.decoding.emplace_back(p.name, std::string(trim(p.content)));
    }  // other fields (include[], chunking_strategy, ...) are accepted and ignored
  }
  if (!f.file) bad_request("'file' is required: send the audio as a multipart part named 'file'", "file");
  const std::string& rf = f.response_format;
  if (rf != "json" && rf != "text" && rf != "srt" && rf != "verbose_json" && rf != "vtt")
    bad_request("'response_format' must be json, text, srt, verbose_json or vtt (got '" + rf + "')", "response_format");
  if (f.stream == "true") {
    if (translation) bad_request("translations are not streamed; leave 'stream' off", "stream");
    if (rf != "json" && rf != "text")
      bad_request("a streamed transcription sends text deltas: response_format must be json or text (got '" + rf + "')",
                  "stream");
  } else if (!f.stream.empty() && f.stream != "false") {
    bad_request("'stream' must be true or false (got '" + f.stream + "')", "stream");
  }
  for (const std::string& g : f.granularities) {
    if (g != "segment" && g != "word")
      bad_request("'timestamp_granularities' entries must be 'segment' or 'word' (got '" + g + "')",
                  "timestamp_granularities");
    if (rf != "verbose_json")
      bad_request("'timestamp_granularities' needs response_format verbose_json", "timestamp_granularities");
  }
  return f;
}

double parse_number(const std::string& field, const std::string& s, double lo, double hi) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end == s.c_str() || *end != '\0' || !(v >= lo && v <= hi))
    bad_request(str_cat("'", field, "' must be a number in [", lo, ", ", hi, "] (got '", s, "')"), field);
  return v;
}

int parse_int(const std::string& field, const std::string& s, int lo, int hi) {
  double v = parse_number(field, s, lo, hi);
  if (v != static_cast<double>(static_cast<int>(v)))
    bad_request(str_cat("'", field, "' must be a whole number in [", lo, ", ", hi, "] (got '", s, "')"), field);
  return static_cast<int>(v);
}

bool parse_bool(const std::string& field, const std::string& s) {
  const std::string v = lower(s);
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  bad_request("'" + field + "' must be true or false (got '" + s + "')", field);
}

// faster-whisper's decoding fields onto the options.
void apply_decoding(const AudioForm& f, speech::TranscribeOptions& o) {
  for (const auto& [k, v] : f.decoding) {
    if (k == "beam_size") o.beam_size = parse_int(k, v, 1, 32);
    else if (k == "best_of") o.best_of = parse_int(k, v, 1, 32);
    else if (k == "patience") o.patience = parse_number(k, v, 0.01, 32);
    else if (k == "length_penalty") o.length_penalty = parse_number(k, v, 0, 10);
    else if (k == "condition_on_previous_text") o.condition_on_previous_text = parse_bool(k, v);
    else if (k == "vad_filter") o.vad = parse_bool(k, v);
    else if (k == "no_speech_threshold") o.no_speech_threshold = parse_number(k, v, 0, 1);
    else if (k == "compression_ratio_threshold") o.compression_ratio_threshold = parse_number(k, v, 0, 1e6);
    else if (k == "log_prob_threshold") o.logprob_threshold = parse_number(k, v, -1e6, 0);
  }
}

bool has(const std::vector<std::string>& v, const char* x) { return std::find(v.begin(), v.end(), x) != v.end(); }

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

// Checks the upload by decoding all of it here, so bad or too-short audio is
// a 400 at once, without keeping its samples: the job decodes it again as it
// goes, a window at a time, from the bytes (held within --max-body-mb).
void attach_upload(const MultipartPart& file, double max_seconds, SpeechJob& job) {
  if (file.content.empty()) throw ApiError(400, "the uploaded file is empty", "file", "invalid_value");
  int64_t samples = 0;
  std::unique_ptr<audio::PcmReader> reader;
  try {
    audio::DecodeLimits lim;
    lim.max_seconds = max_seconds;
    reader = audio::PcmReader::open_memory(std::make_shared<const std::string>(file.content), kRate, lim);
    std::vector<float> buf(1 << 16);
    for (size_t got; (got = reader->read(buf.data(), buf.size())) > 0;) samples += static_cast<int64_t>(got);
    reader->rewind();
  } catch (const Error& e) {
    std::string name = file.filename.empty() ? "the upload" : "'" + file.filename + "'";
    throw ApiError(400, name + " is not usable audio: " + e.what(), "file", "invalid_value");
  }
  if (samples < static_cast<int64_t>(kMinSamples))
    throw ApiError(400,
                   str_cat("the audio is too short (", static_cast<double>(samples) / kRate,
                           " s); the minimum is 0.1 s"),
                   "file", "audio_too_short");
  job.audio = std::move(reader);
  job.samples = samples;
}

std::string trimmed(std::string_view s) { return std::string(trim(s)); }

HttpResponse render(speech::Transcript t, const AudioForm& f) {
  const std::string& format = f.response_format;
  t.text = trimmed(t.text);
  HttpResponse r;
  if (format == "json" || format == "verbose_json") {
    // Segments unless only words were asked for, as OpenAI answers.
    const bool words = has(f.granularities, "word");
    const bool segments = f.granularities.empty() || has(f.granularities, "segment");
    r.body = speech::format_json(t, format == "verbose_json", segments, words);
    return r;
  }
  r.content_type = format == "vtt" ? "text/vtt; charset=utf-8" : "text/plain; charset=utf-8";
  r.body = format == "srt" ? speech::format_srt(t) : format == "vtt" ? speech::format_vtt(t) : t.text + "\n";
  return r;
}

// Segment texts on their way from the speech worker to a streamed response.
class SegmentFeed {
 public:
  void push(std::string text) {
    std::lock_guard<std::mutex> lock(mu_);
    texts_.push_back(std::move(text));
  }
  std::vector<std::string> take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out(std::make_move_iterator(texts_.begin()), std::make_move_iterator(texts_.end()));
    texts_.clear();
    return out;
  }
  std::atomic<bool> gone{false};  // the client hung up: the job stops at its next window

 private:
  std::mutex mu_;
  std::deque<std::string> texts_;
};

// OpenAI's streamed transcription: a transcript.text.delta event per segment
// as its window is decoded, then transcript.text.done with the whole text
// (or an error event if the transcription failed after the stream began).
HttpResponse stream_transcription(SpeechWorker& w, SpeechJob job) {
  auto feed = std::make_shared<SegmentFeed>();
  job.options.on_segment = [feed](const speech::Segment& s) { feed->push(s.text); };
  job.options.cancelled = [feed] { return feed->gone.load(); };
  auto ticket = std::make_shared<SpeechWorker::Ticket>(w.submit(std::move(job)));  // a full queue is a 429 here
  return sse_response([feed, ticket](StreamSink& sink) {
    auto event = [&](const nlohmann::json& e) { return sink.write(sse_data(e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))); };
    while (true) {
      const bool done = ticket->wait(std::chrono::milliseconds(100));
      for (const std::string& d : feed->take())
        if (!event({{"type", "transcript.text.delta"}, {"delta", d}})) {
          feed->gone = true;
          ticket->cancel();
          return;
        }
      if (done) break;
    }
    try {
      event({{"type", "transcript.text.done"}, {"text", trimmed(ticket->get().text)}});
    } catch (const std::exception& e) {
      const ErrorInfo info = classify_exception(e);
      event({{"type", "error"}, {"error", openai_error_body(info.status, info.message, info.param, info.code)["error"]}});
    }
  });
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
  job.options.word_timestamps = has(f.granularities, "word");
  apply_decoding(f, job.options);
  job.prompt = f.prompt;
  try {
    w.prepare(job);
  } catch (const speech::OptionError& e) {
    throw ApiError(400, e.what(), e.field(), "invalid_value");
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "", "invalid_value");
  }
  attach_upload(*f.file, svc.options().audio_max_seconds, job);
  if (f.stream == "true") return stream_transcription(w, std::move(job));
  SpeechWorker::Ticket ticket = w.submit(std::move(job));
  while (!ticket.wait(std::chrono::milliseconds(100))) {
    if (req.client_gone()) {
      ticket.cancel();
      throw ApiError(499, "the client closed the connection");
    }
  }
  return render(ticket.get(), f);
}

}  // namespace

bool needs_text_model(const std::string& method, const std::string& path) {
  return method == "POST" && !starts_with(path, "/v1/audio/");
}

HttpResponse audio_transcriptions(Service& svc, const HttpRequest& req) { return run_audio(svc, req, false); }
HttpResponse audio_translations(Service& svc, const HttpRequest& req) { return run_audio(svc, req, true); }

}  // namespace ingot::server
