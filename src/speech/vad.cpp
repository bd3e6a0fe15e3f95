#include "speech/vad.h"

#include <algorithm>
#include <cmath>

namespace ingot::speech {

namespace {
constexpr int kRate = 16000;
constexpr int64_t kFrame = kRate / 50;  // 20 ms
}  // namespace

std::vector<Span> detect_speech(const std::vector<float>& pcm, const VadOptions& opt) {
  EnergyMeter m;
  m.add(pcm.data(), pcm.size());
  return m.speech(opt);
}

void EnergyMeter::add(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    energy_ += static_cast<double>(x[i]) * x[i];
    if (++in_frame_ == kFrame) {
      db_.push_back(10.0 * std::log10(energy_ / static_cast<double>(kFrame) + 1e-10));
      energy_ = 0;
      in_frame_ = 0;
    }
  }
  samples_ += static_cast<int64_t>(n);
}

std::vector<Span> EnergyMeter::speech(const VadOptions& opt) const {
  const int64_t n = samples_;
  std::vector<double> db = db_;
  if (in_frame_ > 0) db.push_back(10.0 * std::log10(energy_ / static_cast<double>(in_frame_) + 1e-10));  // the short last frame
  const int64_t frames = static_cast<int64_t>(db.size());
  if (frames == 0) return {};
  std::vector<double> sorted = db;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double p) { return sorted[static_cast<size_t>(p * static_cast<double>(frames - 1))]; };
  const double floor = pct(0.10), peak = pct(0.99);
  if (peak - floor < 10.0) return {{0, n}};
  const double threshold = floor + (peak - floor) / 3.0;
  // Runs of loud frames, joined across short pauses.
  const int64_t min_gap = static_cast<int64_t>(opt.min_silence_s * kRate), min_len = static_cast<int64_t>(opt.min_speech_s * kRate);
  std::vector<Span> runs;
  for (int64_t f = 0; f < frames; ++f) {
    if (db[static_cast<size_t>(f)] <= threshold) continue;
    const int64_t a = f * kFrame, b = std::min(n, a + kFrame);
    if (!runs.empty() && a - runs.back().end < min_gap)
      runs.back().end = b;
    else
      runs.push_back({a, b});
  }
  std::vector<Span> out;
  const int64_t pad = static_cast<int64_t>(opt.pad_s * kRate);
  for (const Span& r : runs) {
    if (r.end - r.start < min_len) continue;
    Span s{std::max<int64_t>(0, r.start - pad), std::min(n, r.end + pad)};
    if (!out.empty() && s.start <= out.back().end)
      out.back().end = s.end;
    else
      out.push_back(s);
  }
  return out;
}

std::vector<float> SpeechTimeline::gather(const std::vector<float>& pcm) const {
  std::vector<float> out;
  for (const Span& s : spans_) out.insert(out.end(), pcm.begin() + s.start, pcm.begin() + s.end);
  return out;
}

size_t GatheredSource::read(float* out, size_t n) {
  size_t done = 0;
  float skip[4096];
  while (done < n && span_ < spans_.size()) {
    const Span& s = spans_[span_];
    if (pos_ < s.start) {  // the silence before the span is read and dropped
      const size_t k = static_cast<size_t>(std::min<int64_t>(s.start - pos_, sizeof(skip) / sizeof(float)));
      const size_t got = src_.read(skip, k);
      pos_ += static_cast<int64_t>(got);
      if (got < k) break;
      continue;
    }
    if (pos_ >= s.end) {
      ++span_;
      continue;
    }
    const size_t k = static_cast<size_t>(std::min<int64_t>(s.end - pos_, static_cast<int64_t>(n - done)));
    const size_t got = src_.read(out + done, k);
    pos_ += static_cast<int64_t>(got);
    done += got;
    if (got < k) break;  // the audio ended early
  }
  return done;
}

void GatheredSource::rewind() {
  src_.rewind();
  span_ = 0;
  pos_ = 0;
}

double SpeechTimeline::original(double t, bool is_end) const {
  if (spans_.empty()) return t;
  // Whisper often closes a stretch's last segment past the seam, in the
  // silence padding the next span starts with (VadOptions::pad_s, 0.4 s) or
  // its first breath; mapped into the next span that end could lie minutes
  // later. An end less than this far past a seam stays in the earlier span.
  constexpr double kEndSlack = 1.0;  // seconds
  double at = 0;  // where the current span starts in the gathered audio, seconds
  for (size_t i = 0; i < spans_.size(); ++i) {
    const double len = static_cast<double>(spans_[i].end - spans_[i].start) / rate_;
    const bool last = i + 1 == spans_.size();
    if (t < at + len || (is_end && t <= at + len + kEndSlack) || last)
      return static_cast<double>(spans_[i].start) / rate_ + std::min(std::max(t - at, 0.0), len);
    at += len;
  }
  return t;
}

}  // namespace ingot::speech
