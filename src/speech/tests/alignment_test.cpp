// Word timestamps' parts (DTW, word splitting, punctuation) and voice-activity detection.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "speech/vad.h"
#include "speech/word_timestamps.h"

using namespace ingot::speech;

TEST(WordTimestamps, DtwFollowsTheCheapCells) {
  // 3 rows x 6 columns: zero cost along row 0 for columns 0-1, row 1 for 2-3, row 2 for 4-5.
  const int64_t n = 3, m = 6;
  std::vector<float> cost(n * m, 1.0f);
  for (int64_t j = 0; j < m; ++j) cost[static_cast<size_t>((j / 2) * m + j)] = 0.0f;
  auto path = dtw_path(cost, n, m);
  ASSERT_EQ(path.front(), std::make_pair(int64_t{0}, int64_t{0}));
  ASSERT_EQ(path.back(), std::make_pair(n - 1, m - 1));
  std::map<int64_t, int64_t> first_col;
  for (auto [r, c] : path) first_col.emplace(r, c);
  EXPECT_EQ(first_col[0], 0);
  EXPECT_EQ(first_col[1], 2);
  EXPECT_EQ(first_col[2], 4);
  for (size_t k = 1; k < path.size(); ++k) {  // monotonic, one step at a time
    EXPECT_GE(path[k].first, path[k - 1].first);
    EXPECT_GE(path[k].second, path[k - 1].second);
    EXPECT_LE(path[k].first - path[k - 1].first + path[k].second - path[k - 1].second, 2);
  }
  EXPECT_EQ(dtw_path({0.5f}, 1, 1).size(), 1u);
}

TEST(WordTimestamps, TokensGroupIntoWords) {
  // Token -> text; 20 and 21 are the two halves of "é" (0xC3 0xA9).
  std::map<int32_t, std::string> pieces = {{1, " Hel"}, {2, "lo"}, {3, ","}, {4, " caf"}, {20, "\xC3"}, {21, "\xA9"},
                                           {5, " ("}, {6, "yes"}, {7, ")"}, {8, "."}};
  TextFn text = [&](const std::vector<int32_t>& ids) {
    std::string bytes;
    for (int32_t id : ids) bytes += pieces.at(id);
    // A byte-level decoder shows an incomplete character as U+FFFD.
    bool whole = true;
    for (size_t i = 0; i < bytes.size(); ++i) {
      auto c = static_cast<unsigned char>(bytes[i]);
      if (c >= 0xC0) whole = i + 1 < bytes.size();
      if (c >= 0x80 && c < 0xC0 && i == 0) whole = false;
    }
    return whole ? bytes : bytes + "\xEF\xBF\xBD";
  };
  auto words = split_words({1, 2, 3, 4, 20, 21, 5, 6, 7, 8}, text, "en");
  std::vector<std::string> got;
  for (const auto& w : words) got.push_back(w.text);
  // Text that follows a mark without a space belongs to it (" (yes"); punctuation alone is a word.
  EXPECT_EQ(got, (std::vector<std::string>{" Hello", ",", " caf\xC3\xA9", " (yes", ")", "."}));
  EXPECT_EQ(words[2].tokens, (std::vector<int32_t>{4, 20, 21}));
  // Languages without spaces: every whole character is a word.
  auto zh = split_words({20, 21, 2}, text, "zh");
  EXPECT_EQ(zh.size(), 2u);

  std::vector<Word> w;
  for (const auto& p : words) w.push_back({0, 0, p.text, 1.0, static_cast<int64_t>(p.tokens.size())});
  for (size_t i = 0; i < w.size(); ++i) w[i].start = static_cast<double>(i), w[i].end = i + 1.0;
  merge_punctuation(w);
  got.clear();
  for (const auto& x : w) got.push_back(x.word);
  EXPECT_EQ(got, (std::vector<std::string>{" Hello,", " caf\xC3\xA9", " (yes).", }));
  EXPECT_EQ(w[0].tokens, 3);
  EXPECT_EQ(w[2].tokens, 4);
  EXPECT_DOUBLE_EQ(w[2].start, 3.0);  // " (yes" keeps its own times
  EXPECT_DOUBLE_EQ(w[2].end, 4.0);
  // An opening mark alone goes onto the next word.
  std::vector<Word> open = {{0, 1, " \"", 1, 1}, {1, 2, " Hi", 1, 1}};
  merge_punctuation(open);
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].word, " \" Hi");
  EXPECT_DOUBLE_EQ(open[0].start, 1.0);
}

namespace {
std::vector<float> noise(double seconds, float amp, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, amp);
  std::vector<float> v(static_cast<size_t>(seconds * 16000));
  for (float& x : v) x = g(rng);
  return v;
}
std::vector<float> tone(double seconds, float amp) {
  std::vector<float> v(static_cast<size_t>(seconds * 16000));
  for (size_t i = 0; i < v.size(); ++i) v[i] = amp * std::sin(0.2f * static_cast<float>(i));
  return v;
}
std::vector<float> join(std::initializer_list<std::vector<float>> parts) {
  std::vector<float> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
double sec(int64_t samples) { return static_cast<double>(samples) / 16000.0; }
}  // namespace

TEST(Vad, FindsSoundBetweenSilences) {
  auto pcm = join({noise(3, 1e-3f, 1), tone(1, 0.3f), noise(4, 1e-3f, 2), tone(1.5, 0.3f), noise(2, 1e-3f, 3)});
  auto spans = detect_speech(pcm);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_NEAR(sec(spans[0].start), 3.0 - 0.4, 0.03);
  EXPECT_NEAR(sec(spans[0].end), 4.0 + 0.4, 0.03);
  EXPECT_NEAR(sec(spans[1].start), 8.0 - 0.4, 0.03);
  EXPECT_NEAR(sec(spans[1].end), 9.5 + 0.4, 0.03);
  // A pause shorter than min_silence stays inside; a click is not speech.
  auto joined = detect_speech(join({noise(2, 1e-3f, 4), tone(1, 0.3f), noise(1, 1e-3f, 5), tone(1, 0.3f),
                                    noise(3, 1e-3f, 6), tone(0.05, 0.5f), noise(3, 1e-3f, 7)}));
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_NEAR(sec(joined[0].end), 5.4, 0.03);
  // No contrast to find (a steady tone, pure silence): all of it is kept.
  auto steady = tone(3, 0.3f);
  ASSERT_EQ(detect_speech(steady).size(), 1u);
  EXPECT_EQ(detect_speech(steady)[0].end, static_cast<int64_t>(steady.size()));
  EXPECT_EQ(detect_speech(std::vector<float>(16000, 0.0f)).size(), 1u);
  EXPECT_TRUE(detect_speech({}).empty());
}

TEST(Vad, TimelineMapsBackToTheOriginal) {
  SpeechTimeline tl({{16000, 32000}, {80000, 128000}}, 16000);  // [1, 2) s and [5, 8) s
  std::vector<float> pcm(130000);
  for (size_t i = 0; i < pcm.size(); ++i) pcm[i] = static_cast<float>(i);
  auto g = tl.gather(pcm);
  ASSERT_EQ(g.size(), 64000u);
  EXPECT_EQ(g[0], 16000.0f);
  EXPECT_EQ(g[16000], 80000.0f);
  EXPECT_DOUBLE_EQ(tl.original(0.5, false), 1.5);
  EXPECT_DOUBLE_EQ(tl.original(1.0, false), 5.0);  // a start on the seam: the later span
  EXPECT_DOUBLE_EQ(tl.original(1.0, true), 2.0);   // an end on the seam: the earlier one
  EXPECT_DOUBLE_EQ(tl.original(1.5, true), 2.0);   // ... and less than 1 s past it (the next span's padding)
  EXPECT_DOUBLE_EQ(tl.original(1.5, false), 5.5);  // a start there is in the later span
  EXPECT_DOUBLE_EQ(tl.original(2.5, true), 6.5);   // an end well inside the later span stays there
  EXPECT_DOUBLE_EQ(tl.original(9.0, true), 8.0);   // past the end: clamped to the last span
}
