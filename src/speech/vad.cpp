#include "speech/vad.h"

#include <algorithm>
#include <cmath>

namespace ingot::speech {

namespace {
constexpr int kRate = 16000;
constexpr int64_t kFrame = kRate / 50;  // 20 ms
}  // namespace

std::vector<Span> detect_speech(const std::vector<float>& pcm, const VadOptions& opt) {
  const int64_t n = static_cast<int64_t>(pcm.size());
  const int64_t frames = (n + kFrame - 1) / kFrame;
  if (frames == 0) return {};
  std::vector<double> db(static_cast<size_t>(frames));
  for (int64_t f = 0; f < frames; ++f) {
    const int64_t a = f * kFrame, b = std::min(n, a + kFrame);
    double e = 0;
    for (int64_t i = a; i < b; ++i) e += static_cast<double>(pcm[static_cast<size_t>(i)]) * pcm[static_cast<size_t>(i)];
    db[static_cast<size_t>(f)] = 10.0 * std::log10(e / static_cast<double>(b - a) + 1e-10);
  }
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

double SpeechTimeline::original(double t, bool is_end) const {
  if (spans_.empty()) return t;
  double at = 0;  // where the current span starts in the gathered audio, seconds
  for (size_t i = 0; i < spans_.size(); ++i) {
    const double len = static_cast<double>(spans_[i].end - spans_[i].start) / rate_;
    const bool last = i + 1 == spans_.size();
    if (t < at + len || (is_end && t <= at + len) || last)
      return static_cast<double>(spans_[i].start) / rate_ + std::min(std::max(t - at, 0.0), len);
    at += len;
  }
  return t;
}

}  // namespace ingot::speech
