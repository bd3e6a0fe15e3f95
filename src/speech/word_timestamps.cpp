#include "speech/word_timestamps.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"
#include "util/strings.h"

namespace ingot::speech {

namespace {

constexpr double kFramesPerSecond = 50.0;  // encoder frames: 2 mel hops of 10 ms
constexpr int kMedianWidth = 7;            // frames in the median filter over time
const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD: a token that ends inside a character
// Opening marks join the next word, closing marks the previous one.
constexpr std::string_view kPrepend = "\"'\u201c\u00bf([{-";
constexpr std::string_view kAppend = "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001";
constexpr std::string_view kSentenceEnd = ".\u3002!\uff01?\uff1f";
constexpr std::string_view kAsciiPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

// Whether s is non-empty and every character of it appears in `set` (UTF-8 aware).
bool only_chars_of(std::string_view s, std::string_view set) {
  if (s.empty()) return false;
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (set.find(s.substr(i, len)) == std::string_view::npos) return false;
    i += len;
  }
  return true;
}

bool spaceless(const std::string& language) {
  for (const char* l : {"zh", "ja", "th", "lo", "my", "yue"})
    if (language == l) return true;
  return false;
}

// Tokens joined until their text is whole UTF-8 characters.
std::vector<WordPieces> split_unicode(const std::vector<int32_t>& tokens, const TextFn& text) {
  std::vector<WordPieces> out;
  WordPieces cur;
  for (int32_t t : tokens) {
    cur.tokens.push_back(t);
    cur.text = text(cur.tokens);
    if (cur.text.find(kReplacement) == std::string::npos) out.push_back(std::move(cur)), cur = {};
  }
  if (!cur.tokens.empty()) out.push_back(std::move(cur));
  return out;
}

// Median of each row's values over a window of kMedianWidth columns (reflected at the edges).
void median_filter_rows(std::vector<float>& x, int64_t rows, int64_t cols) {
  const int64_t half = kMedianWidth / 2;
  if (cols <= half) return;  // too short to reflect
  std::vector<float> row(static_cast<size_t>(cols)), win(kMedianWidth);
  for (int64_t r = 0; r < rows; ++r) {
    float* p = x.data() + r * cols;
    std::copy(p, p + cols, row.begin());
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t k = -half; k <= half; ++k) {
        int64_t j = c + k;
        if (j < 0) j = -j;
        if (j >= cols) j = 2 * (cols - 1) - j;
        win[static_cast<size_t>(k + half)] = row[static_cast<size_t>(j)];
      }
      std::nth_element(win.begin(), win.begin() + half, win.end());
      p[c] = win[static_cast<size_t>(half)];
    }
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::vector<WordPieces> split_words(const std::vector<int32_t>& tokens, const TextFn& text, const std::string& language) {
  std::vector<WordPieces> pieces = split_unicode(tokens, text);
  if (spaceless(language)) return pieces;
  std::vector<WordPieces> words;
  for (WordPieces& p : pieces) {
    const bool starts_word = words.empty() || starts_with(p.text, " ") || only_chars_of(trim(p.text), kAsciiPunctuation);
    if (starts_word) {
      words.push_back(std::move(p));
    } else {
      words.back().text += p.text;
      words.back().tokens.insert(words.back().tokens.end(), p.tokens.begin(), p.tokens.end());
    }
  }
  return words;
}

std::vector<std::pair<int64_t, int64_t>> dtw_path(const std::vector<float>& x, int64_t n, int64_t m) {
  INGOT_CHECK(n > 0 && m > 0 && static_cast<int64_t>(x.size()) == n * m);
  const double inf = std::numeric_limits<double>::infinity();
  // cost[i][j]: the cheapest path to cell (i - 1, j - 1); row and column 0 are the start.
  std::vector<double> cost(static_cast<size_t>((n + 1) * (m + 1)), inf);
  std::vector<int8_t> from(static_cast<size_t>((n + 1) * (m + 1)), -1);  // 0 diagonal, 1 up, 2 left
  auto at = [&](int64_t i, int64_t j) { return static_cast<size_t>(i * (m + 1) + j); };
  cost[0] = 0;
  for (int64_t j = 1; j <= m; ++j)
    for (int64_t i = 1; i <= n; ++i) {
      const double diag = cost[at(i - 1, j - 1)], up = cost[at(i - 1, j)], left = cost[at(i, j - 1)];
      int8_t step = 2;
      double best = left;
      if (diag < up && diag < left) {
        step = 0;
        best = diag;
      } else if (up < diag && up < left) {
        step = 1;
        best = up;
      }
      cost[at(i, j)] = x[static_cast<size_t>((i - 1) * m + (j - 1))] + best;
      from[at(i, j)] = step;
    }
  std::vector<std::pair<int64_t, int64_t>> path;
  int64_t i = n, j = m;
  while (i > 0 || j > 0) {
    path.emplace_back(i - 1, j - 1);
    const int8_t step = i == 0 ? 2 : j == 0 ? 1 : from[at(i, j)];
    if (step == 0) --i, --j;
    else if (step == 1) --i;
    else --j;
  }
  std::reverse(path.begin(), path.end());
  // The walk back steps from (0, j) or (i, 0) onto the start; those cells are not in the matrix.
  path.erase(std::remove_if(path.begin(), path.end(), [](const auto& p) { return p.first < 0 || p.second < 0; }),
             path.end());
  return path;
}

void merge_punctuation(std::vector<Word>& w) {
  if (w.size() < 2) return;
  auto join = [](Word& into, Word& from, bool before) {
    into.word = before ? from.word + into.word : into.word + from.word;
    into.tokens += from.tokens;
    into.probability = std::min(into.probability, from.probability);
    from.word.clear();
    from.tokens = 0;
  };
  // Opening marks, right to left, onto the next word that is kept.
  for (int64_t i = static_cast<int64_t>(w.size()) - 2, j = i + 1; i >= 0; --i) {
    Word& prev = w[static_cast<size_t>(i)];
    if (starts_with(prev.word, " ") && only_chars_of(trim(prev.word), kPrepend))
      join(w[static_cast<size_t>(j)], prev, true);
    else
      j = i;
  }
  // Closing marks, left to right, onto the previous word that is kept.
  for (size_t i = 0, j = 1; j < w.size(); ++j) {
    Word& prev = w[i];
    if (!prev.word.empty() && !prev.word.ends_with(" ") && only_chars_of(w[j].word, kAppend))
      join(prev, w[j], false);
    else if (!w[j].word.empty())
      i = j;
  }
  w.erase(std::remove_if(w.begin(), w.end(), [](const Word& x) { return x.word.empty(); }), w.end());
}

std::vector<Word> align_words(const WhisperModel& model, const WhisperGeneration& gen, const AlignInput& in,
                              const TextFn& text) {
  if (gen.alignment_heads.empty() || in.text_tokens.empty() || gen.eos() < 0 || gen.no_timestamps_id < 0) return {};
  const int64_t frames = std::clamp<int64_t>(in.audio_frames, 1, in.cross->k[0].dim(0));
  // The decoder reads the window's text without timestamps; row r of the
  // weights below is the query that predicts text token r (the last row predicts EOS).
  std::vector<int32_t> seq = in.sot_sequence;
  seq.push_back(gen.no_timestamps_id);
  const int64_t first = static_cast<int64_t>(seq.size()) - 1;
  seq.insert(seq.end(), in.text_tokens.begin(), in.text_tokens.end());
  seq.push_back(gen.eos());
  if (static_cast<int64_t>(seq.size()) > model.config().max_target_positions) return {};
  const int64_t n = static_cast<int64_t>(in.text_tokens.size()) + 1;
  std::vector<Tensor> scores = model.cross_attention_weights(in.cross, seq, gen.alignment_heads);
  std::vector<float> matrix(static_cast<size_t>(n * frames), 0.0f);
  std::vector<float> w(static_cast<size_t>(n * frames));
  for (const Tensor& s : scores) {
    const float* p = s.data<float>();
    const int64_t src = s.dim(1);
    // Softmax over the frames that hold audio.
    for (int64_t r = 0; r < n; ++r) {
      const float* row = p + (first + r) * src;
      float* o = w.data() + r * frames;
      const float mx = *std::max_element(row, row + frames);
      double sum = 0;
      for (int64_t c = 0; c < frames; ++c) sum += (o[c] = std::exp(row[c] - mx));
      for (int64_t c = 0; c < frames; ++c) o[c] = static_cast<float>(o[c] / sum);
    }
    // Each frame normalised over the tokens (population mean and deviation).
    for (int64_t c = 0; c < frames; ++c) {
      double mean = 0, var = 0;
      for (int64_t r = 0; r < n; ++r) mean += w[static_cast<size_t>(r * frames + c)];
      mean /= static_cast<double>(n);
      for (int64_t r = 0; r < n; ++r) var += std::pow(w[static_cast<size_t>(r * frames + c)] - mean, 2);
      const double sd = std::sqrt(var / static_cast<double>(n));
      for (int64_t r = 0; r < n; ++r) {
        float& v = w[static_cast<size_t>(r * frames + c)];
        v = static_cast<float>((v - mean) / (sd > 0 ? sd : 1.0));
      }
    }
    median_filter_rows(w, n, frames);
    for (size_t i = 0; i < matrix.size(); ++i) matrix[i] += w[i] / static_cast<float>(scores.size());
  }
  for (float& v : matrix) v = -v;  // the path follows high attention
  std::vector<std::pair<int64_t, int64_t>> path = dtw_path(matrix, n, frames);
  // The time at which the path first reaches each row.
  std::vector<double> reach(static_cast<size_t>(n), 0.0);
  for (size_t k = 0; k < path.size(); ++k)
    if (k == 0 || path[k].first != path[k - 1].first)
      reach[static_cast<size_t>(path[k].first)] = static_cast<double>(path[k].second) / kFramesPerSecond;
  std::vector<WordPieces> pieces = split_words(in.text_tokens, text, in.language);
  std::vector<Word> words;
  size_t tok = 0;
  for (const WordPieces& p : pieces) {
    Word wd;
    wd.word = p.text;
    wd.tokens = static_cast<int64_t>(p.tokens.size());
    wd.start = reach[tok];
    double lp = 0;
    for (size_t k = 0; k < p.tokens.size(); ++k)
      lp += tok + k < in.token_logprobs.size() ? std::exp(in.token_logprobs[tok + k]) : 0.0;
    wd.probability = p.tokens.empty() ? 0.0 : lp / static_cast<double>(p.tokens.size());
    tok += p.tokens.size();
    wd.end = reach[std::min(tok, reach.size() - 1)];
    words.push_back(std::move(wd));
  }
  // Words held far longer than is usual for this speaker run into a pause: the
  // first word of a window that ends well into it (the path starts at the
  // window's first frame, so that word absorbs the silence before the speech)
  // and words at a sentence end are cut to twice the median duration.
  std::vector<double> durations;
  for (const Word& x : words)
    if (x.end > x.start) durations.push_back(x.end - x.start);
  const double med = std::min(0.7, median(durations)), longest = 2 * med;
  if (!durations.empty() && !words.empty() && words[0].end > 4 * med && words[0].end - words[0].start > longest)
    words[0].start = std::max(0.0, words[0].end - longest);
  if (!durations.empty())
    for (size_t i = 1; i < words.size(); ++i) {
      Word& x = words[i];
      if (x.end - x.start <= longest) continue;
      if (only_chars_of(trim(x.word), kSentenceEnd))
        x.end = x.start + longest;
      else if (only_chars_of(trim(words[i - 1].word), kSentenceEnd))
        x.start = x.end - longest;
    }
  merge_punctuation(words);
  return words;
}

}  // namespace ingot::speech
