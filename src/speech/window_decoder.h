// One 30 s window's text: greedy decoding, best-of-N sampling at a
// temperature, or beam search with patience and a length penalty, the
// sequences of a window decoded together against one cross-attention K/V.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "models/whisper.h"
#include "speech/logit_rules.h"

namespace ingot::speech {

using TextFn = std::function<std::string(const std::vector<int32_t>&)>;

struct DecodeOptions {
  float temperature = 0;  // 0: greedy or beam search; > 0: sampling
  int beam_size = 1;      // > 1 with temperature 0: beam search
  int best_of = 1;        // samples drawn at temperature > 0; the best is kept
  // Beam search ends once round(beam_size * patience) sequences finished.
  double patience = 1.0;
  // Ranking of finished sequences: sum log-prob / length when unset, else
  // sum log-prob / ((5 + length) / 6) ^ length_penalty.
  std::optional<double> length_penalty;
  int64_t max_new_tokens = 0;  // 0: as many as the decoder's positions allow
};

struct WindowResult {
  std::vector<int32_t> tokens;  // generated, EOS excluded
  std::vector<float> token_logprobs;  // of each of them, as chosen
  double sum_logprob = 0, avg_logprob = 0, compression = 0;
  double no_speech_prob = 0;  // probability of <|nospeech|> right after <|startoftranscript|>
  float temperature = 0;
  std::string text;  // text tokens only
};

// The first window's greedy pass, as PARITY.md's --dump contract records it.
struct Dump {
  Tensor mel, encoder_out;
  std::vector<float> step_logits;    // [steps, vocab] row-major, before the rules
  std::vector<int32_t> decoder_ids;  // prompt first
};

class WindowDecoder {
 public:
  WindowDecoder(const WhisperModel& model, const WhisperGeneration& gen, const LogitRules& rules, const TextFn& text)
      : model_(model), gen_(gen), rules_(rules), text_(text) {}

  // `prompt` is the whole decoder prompt (previous text, <|startoftranscript|>,
  // language, task, ...), `sot_index` the position of <|startoftranscript|> in it.
  WindowResult run(const std::shared_ptr<const WhisperModel::CrossKV>& cross, const std::vector<int32_t>& prompt,
                   size_t sot_index, const DecodeOptions& opt, std::mt19937_64& rng, Dump* dump) const;

 private:
  struct Hypothesis {
    std::vector<int32_t> tokens;  // EOS excluded
    std::vector<float> logprobs;  // of each token
    double sum_logprob = 0;
  };
  std::vector<Hypothesis> sample(WhisperModel::DecoderState first, std::vector<float> logits, int64_t limit,
                                 int n, float temperature, std::mt19937_64& rng, Dump* dump) const;
  std::vector<Hypothesis> beam_search(WhisperModel::DecoderState first, std::vector<float> logits, int64_t limit,
                                      const DecodeOptions& opt) const;
  double score(const Hypothesis& h, const DecodeOptions& opt) const;

  const WhisperModel& model_;
  const WhisperGeneration& gen_;
  const LogitRules& rules_;
  TextFn text_;
};

// zlib's compression ratio of the text: repetitive (looping) output compresses well.
double compression_ratio(const std::string& s);

}  // namespace ingot::speech
