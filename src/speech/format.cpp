// Output formats of `ingot transcribe` and /v1/audio/transcriptions.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "speech/transcribe.h"
#include "util/strings.h"

namespace ingot::speech {

using nlohmann::json;

namespace {
std::string stamp(double t, char sep) {
  int64_t ms = static_cast<int64_t>(std::llround(t * 1000));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%02lld:%02lld:%02lld%c%03lld", static_cast<long long>(ms / 3600000),
                static_cast<long long>(ms / 60000 % 60), static_cast<long long>(ms / 1000 % 60), sep,
                static_cast<long long>(ms % 1000));
  return buf;
}

json words_json(const std::vector<Word>& words) {
  json out = json::array();
  for (const Word& w : words)
    out.push_back({{"word", std::string(trim(w.word))}, {"start", w.start}, {"end", w.end}, {"probability", w.probability}});
  return out;
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

std::string format_json(const Transcript& t, bool verbose, bool segments, bool words) {
  json j = {{"text", t.text}};
  if (verbose) {
    j["task"] = t.task;
    j["language"] = t.language;
    j["duration"] = t.duration;
    if (segments) {
      json segs = json::array();
      int id = 0;
      for (const Segment& s : t.segments) {
        json js = {{"id", id++},
                   {"start", s.start},
                   {"end", s.end},
                   {"text", s.text},
                   {"tokens", s.tokens},
                   {"temperature", s.temperature},
                   {"avg_logprob", s.avg_logprob},
                   {"compression_ratio", s.compression_ratio},
                   {"no_speech_prob", s.no_speech_prob}};
        if (words) js["words"] = words_json(s.words);
        segs.push_back(js);
      }
      j["segments"] = segs;
    }
    if (words) {
      std::vector<Word> all;
      for (const Segment& s : t.segments) all.insert(all.end(), s.words.begin(), s.words.end());
      j["words"] = words_json(all);
    }
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace ingot::speech
