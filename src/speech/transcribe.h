// Speech to text with Whisper: 30 s windows, task / language / timestamp
// prompt tokens, the previous windows' text as prompt, seeking on
// timestamps, temperature fallback on compression ratio and average
// log-probability, no-speech skipping, optional voice-activity detection and
// word timestamps.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "audio/pcm_source.h"
#include "models/whisper.h"
#include "speech/generation.h"
#include "speech/vad.h"
#include "speech/window_decoder.h"
#include "speech/word_timestamps.h"
#include "util/error.h"

namespace ingot::speech {

struct Segment {
  double start = 0, end = 0;
  std::string text;
  std::vector<int32_t> tokens;
  double avg_logprob = 0, compression_ratio = 0, temperature = 0, no_speech_prob = 0;
  std::vector<Word> words;  // with word_timestamps
};

struct TranscribeOptions {
  std::string language;  // "en" or "<|en|>"; empty: detect (multilingual models)
  std::string task = "transcribe";
  bool timestamps = false;       // segment timestamps (decoded as tokens)
  bool word_timestamps = false;  // words aligned by cross-attention (turns timestamps on)
  std::vector<int32_t> prompt_ids;  // initial prompt (after <|startofprev|>), already tokenized
  // Each window sees the text of the windows before it as its prompt, until
  // a window needed a temperature above prompt_reset_on_temperature.
  bool condition_on_previous_text = true;
  float prompt_reset_on_temperature = 0.5f;
  int64_t max_new_tokens = 0;  // per window; 0: the model's limit
  std::vector<float> temperatures = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
  double compression_ratio_threshold = 2.4;
  double logprob_threshold = -1.0;
  // A window whose <|nospeech|> probability is above this (and whose text is
  // not confident, avg log-prob below logprob_threshold) is skipped as silence.
  std::optional<double> no_speech_threshold = 0.6;
  int beam_size = 1;  // > 1: beam search at temperature 0
  int best_of = 5;    // samples per fallback temperature above 0
  double patience = 1.0;
  std::optional<double> length_penalty;
  uint64_t seed = 0;
  bool fallback = true;
  bool vad = false;  // transcribe only what detect_speech finds
  VadOptions vad_options;
  // Called with each segment as soon as its window is decoded (times in the
  // recording's timeline): streamed responses.
  std::function<void(const Segment&)> on_segment;
  // Checked before each window: once it returns true, transcription stops and
  // returns what it has (a streaming client that hung up).
  std::function<bool()> cancelled;
};


struct Transcript {
  std::string task = "transcribe";
  std::string text;
  std::string language;  // e.g. "en" when known
  double duration = 0;
  std::vector<Segment> segments;
  std::vector<Span> speech;  // with vad: the stretches that were transcribed (samples)
};

// An option no decoding could follow; field() names it as the API's form does.
class OptionError : public Error {
 public:
  OptionError(std::string field, const std::string& message)
      : Error(ErrorKind::InvalidArgument, message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// Throws OptionError for options no decoding could follow.
void check_options(const TranscribeOptions& opt, const WhisperModel& model, const WhisperGeneration& gen);

// A window's decoder prompt: <|startofprev|> and the last max_previous
// tokens of the text before it (when there is any), then the start sequence
// (<|startoftranscript|> [language] [task]), then <|notimestamps|> unless
// timestamps are decoded.
struct WindowPrompt {
  std::vector<int32_t> tokens;
  size_t sot_index = 0;  // where <|startoftranscript|> sits
};
WindowPrompt window_prompt(const WhisperGeneration& gen, const std::vector<int32_t>& previous,
                          const std::vector<int32_t>& sot_sequence, bool timestamps, size_t max_previous);

// A window's tokens cut into segments between timestamps (times from t0, in
// seconds), how far the next window starts (samples; the window is `len`
// samples of at most `window`), and the tokens later windows see as previous
// text. When speech runs on past the last closed segment of a full window,
// the next window starts at that segment's end and decodes the rest again:
// what followed is dropped here.
struct WindowCut {
  std::vector<Segment> segments;
  int64_t advance = 0;
  std::vector<int32_t> consumed;
};
WindowCut cut_window(const std::vector<int32_t>& tokens, const LogitRules& rules, double t0, int64_t len,
                     int64_t window);

// Reads `src` from where it stands, one 30 s window at a time: memory holds
// the current window, not the recording. With VAD the source is read twice
// (the energy of every frame, then the speech again: rewind()). `duration`
// counts what was read, so a cancelled transcription gives the part it read.
Transcript transcribe(const WhisperModel& model, const WhisperGeneration& gen, audio::PcmSource& src,
                      const TranscribeOptions& opt, const TextFn& text, Dump* dump = nullptr);
// The same over samples in memory.
Transcript transcribe(const WhisperModel& model, const WhisperGeneration& gen, const std::vector<float>& pcm,
                      const TranscribeOptions& opt, const TextFn& text, Dump* dump = nullptr);

// Output formats of `ingot transcribe` and /v1/audio/transcriptions.
std::string format_srt(const Transcript& t);
std::string format_vtt(const Transcript& t);
// verbose: task, language, duration, and segments / words as asked.
std::string format_json(const Transcript& t, bool verbose, bool segments = true, bool words = false);

}  // namespace ingot::speech
