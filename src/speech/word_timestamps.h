// Word-level timestamps: the decoder reads a window's text again while the
// cross-attention of the checkpoint's alignment heads is recorded; those
// weights (normalised per frame, median-filtered over time, averaged over
// heads) are aligned to the audio frames by dynamic time warping, and a
// word starts where the path first reaches its first token.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/whisper.h"
#include "speech/generation.h"
#include "speech/window_decoder.h"

namespace ingot::speech {

struct Word {
  double start = 0, end = 0;
  std::string word;  // with its leading space, as decoded
  double probability = 0;
  int64_t tokens = 0;  // text tokens it spans
};

// Consecutive text tokens grouped into words: a token whose text starts with
// a space starts a word, and punctuation is a word of its own (merged into
// its neighbour later). Tokens that end inside a UTF-8 character are joined
// with the next. Languages written without spaces (zh, ja, th, lo, my, yue)
// split at every character.
struct WordPieces {
  std::string text;
  std::vector<int32_t> tokens;
};
std::vector<WordPieces> split_words(const std::vector<int32_t>& tokens, const TextFn& text, const std::string& language);

// Minimum-cost monotonic path through cost [n, m] (row-major) from (0, 0) to
// (n - 1, m - 1), moving down, right or diagonally: the (row, column) pairs in order.
std::vector<std::pair<int64_t, int64_t>> dtw_path(const std::vector<float>& cost, int64_t n, int64_t m);

// Moves punctuation onto its neighbour: opening marks onto the next word,
// closing marks onto the previous one (their times and tokens go with them).
void merge_punctuation(std::vector<Word>& words);

struct AlignInput {
  std::shared_ptr<const WhisperModel::CrossKV> cross;  // the window's
  std::vector<int32_t> sot_sequence;                    // <|startoftranscript|> [language] [task]
  std::vector<int32_t> text_tokens;                     // the window's text, timestamps removed
  std::vector<float> token_logprobs;                    // of each text token when it was decoded
  int64_t audio_frames = 0;  // encoder frames (20 ms each) that hold audio in this window
  std::string language;
};

// Words of one window with times in seconds from the window's start. Empty
// when the checkpoint names no alignment heads or the text is empty.
std::vector<Word> align_words(const WhisperModel& model, const WhisperGeneration& gen, const AlignInput& in,
                              const TextFn& text);

}  // namespace ingot::speech
