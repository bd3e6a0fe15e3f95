// Whisper's generation_config.json: the special tokens and rules that drive
// decoding (prompt layout, suppression, timestamps, languages, alignment heads).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "io/config.h"

namespace ingot::speech {

struct WhisperGeneration {
  int32_t decoder_start_token_id = 0;
  std::vector<int32_t> eos_token_ids;
  std::vector<int32_t> suppress_tokens, begin_suppress_tokens;
  std::vector<std::pair<std::string, int32_t>> lang_to_id;  // "<|en|>" -> id
  int32_t transcribe_id = -1, translate_id = -1;
  int32_t no_timestamps_id = -1;  // timestamps start right after it
  // <|nospeech|> (<|nocaptions|> in older vocabularies) sits right before
  // <|notimestamps|> in every Whisper vocabulary, as transformers also assumes.
  int32_t no_speech_id = -1;
  int32_t prev_sot_id = -1;  // <|startofprev|>: a text prompt follows it
  int32_t max_initial_timestamp_index = 50;
  bool is_multilingual = false;
  // (decoder layer, head) pairs whose cross-attention follows the audio in time (word timestamps).
  std::vector<std::pair<int, int>> alignment_heads;

  int32_t eos() const { return eos_token_ids.empty() ? -1 : eos_token_ids[0]; }
  bool is_eos(int32_t t) const;
  // The language code of a language token ("en" for <|en|>), empty if it is none.
  std::string language_of(int32_t id) const;
  // The token of a language given as "en" or "<|en|>"; throws InvalidArgument for an unknown one.
  int32_t language_token(const std::string& lang) const;
};

WhisperGeneration load_whisper_generation(const std::string& model_dir, const ModelConfig& cfg);

}  // namespace ingot::speech
