// Voice-activity detection by frame energy: finds the stretches of a
// recording that hold sound well above its own noise floor, so long silences
// are not transcribed (Whisper tends to invent text in them) and cost no
// encoder passes.
//
// Energy, not a learned model: Debian packages neither WebRTC's VAD (libfvad)
// nor ONNX Runtime for Silero, and what this has to find - seconds-long
// pauses and silent stretches - is what frame energy tells apart reliably.
// It does not tell speech from loud non-speech; Whisper's own no-speech
// probability still skips windows without speech.
#pragma once
#include <cstdint>
#include <vector>

#include "audio/pcm_source.h"

namespace ingot::speech {

struct VadOptions {
  double min_speech_s = 0.25;  // shorter bursts (clicks) are dropped
  double min_silence_s = 2.0;  // shorter pauses stay inside the speech around them
  double pad_s = 0.4;          // kept on each side of speech, so word edges are not cut
};

// A stretch of audio [start, end) in samples.
struct Span {
  int64_t start = 0, end = 0;
};

// Sounding stretches of 16 kHz mono audio, in order, not overlapping. The
// threshold sits a third of the way from the quietest tenth of 20 ms frames
// to the loudest hundredth (in dB); with less than 10 dB between them the
// recording has no silence to find and all of it is returned.
std::vector<Span> detect_speech(const std::vector<float>& pcm, const VadOptions& opt = {});

// detect_speech over audio fed a piece at a time: keeps one energy per 20 ms
// frame (an hour is 1.4 MB), not the samples.
class EnergyMeter {
 public:
  void add(const float* x, size_t n);
  std::vector<Span> speech(const VadOptions& opt = {}) const;
  int64_t samples() const { return samples_; }

 private:
  std::vector<double> db_;  // closed frames
  double energy_ = 0;       // of the open frame
  int64_t in_frame_ = 0, samples_ = 0;
};

// The audio of `spans` end to end, and the way back from its timeline to the original one.
class SpeechTimeline {
 public:
  SpeechTimeline(std::vector<Span> spans, int rate) : spans_(std::move(spans)), rate_(rate) {}
  std::vector<float> gather(const std::vector<float>& pcm) const;
  // Seconds in the gathered audio -> seconds in the original. An end time on
  // a seam between two spans, or up to 1 s past it, belongs to the earlier
  // one; a start on the seam to the later.
  double original(double t, bool is_end) const;
  const std::vector<Span>& spans() const { return spans_; }

 private:
  std::vector<Span> spans_;
  int rate_;
};

// The samples of `spans` end to end, read from `src` as they are asked for
// (what SpeechTimeline::gather returns, without holding it).
class GatheredSource : public audio::PcmSource {
 public:
  GatheredSource(audio::PcmSource& src, std::vector<Span> spans) : src_(src), spans_(std::move(spans)) {}
  size_t read(float* out, size_t n) override;
  void rewind() override;

 private:
  audio::PcmSource& src_;
  std::vector<Span> spans_;
  size_t span_ = 0;  // the span being read
  int64_t pos_ = 0;  // samples read from src_
};

}  // namespace ingot::speech
