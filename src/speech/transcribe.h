// Speech to text with Whisper: 30 s windows, task / language / timestamp
// prompt tokens, generation_config's suppression rules, timestamp rules,
// seeking on timestamps, and temperature fallback on compression ratio and
// average log-probability.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "models/whisper.h"

namespace ingot::speech {

// Whisper's generation_config.json fields that drive decoding.
struct WhisperGeneration {
  int32_t decoder_start_token_id = 0;
  std::vector<int32_t> eos_token_ids;
  std::vector<int32_t> suppress_tokens, begin_suppress_tokens;
  std::vector<std::pair<std::string, int32_t>> lang_to_id;  // "<|en|>" -> id
  int32_t transcribe_id = -1, translate_id = -1;
  int32_t no_timestamps_id = -1;  // timestamps start right after it
  int32_t prev_sot_id = -1;       // <|startofprev|>: a text prompt follows it
  int32_t max_initial_timestamp_index = 50;
  bool is_multilingual = false;
};
WhisperGeneration load_whisper_generation(const std::string& model_dir, const ModelConfig& cfg);

struct TranscribeOptions {
  std::string language;  // "en" or "<|en|>"; empty: detect (multilingual models)
  std::string task = "transcribe";
  bool timestamps = false;
  std::vector<int32_t> prompt_ids;  // previous-text prompt (after <|startofprev|>), already tokenized
  int64_t max_new_tokens = 0;  // per window; 0: the model's limit
  std::vector<float> temperatures = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
  double compression_ratio_threshold = 2.4;
  double logprob_threshold = -1.0;
  uint64_t seed = 0;
  bool fallback = true;
};

struct Segment {
  double start = 0, end = 0;
  std::string text;
  std::vector<int32_t> tokens;
  double avg_logprob = 0, compression_ratio = 0, temperature = 0;
};

struct Transcript {
  std::string task = "transcribe";
  std::string text;
  std::string language;  // e.g. "en" when known
  double duration = 0;
  std::vector<Segment> segments;
};

// The first window's greedy pass, as PARITY.md's --dump contract records it.
struct Dump {
  Tensor mel, encoder_out;
  std::vector<float> step_logits;  // [steps, vocab] row-major
  std::vector<int32_t> decoder_ids;  // prompt first
};

using TextFn = std::function<std::string(const std::vector<int32_t>&)>;

Transcript transcribe(const WhisperModel& model, const WhisperGeneration& gen, const std::vector<float>& pcm,
                      const TranscribeOptions& opt, const TextFn& text, Dump* dump = nullptr);

// Output formats of `ingot transcribe` and /v1/audio/transcriptions.
std::string format_srt(const Transcript& t);
std::string format_vtt(const Transcript& t);
std::string format_json(const Transcript& t, bool verbose);

}  // namespace ingot::speech
