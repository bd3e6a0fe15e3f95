// Decoding mechanics on the random-weight golden: batched steps, beam search
// bookkeeping, prompts, no-speech skipping, language detection, int8 weights.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "audio/decode.h"
#include "audio/mel.h"
#include "speech/transcribe.h"
#include "util/error.h"
#include "util/strings.h"

using namespace ingot;
using namespace ingot::speech;

namespace {

const std::string kGolden = std::string(INGOT_SHARED_DIR) + "/goldens/whisper-float32";

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    num += (a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / (den + 1e-30));
}

struct Golden {
  std::unique_ptr<WhisperModel> model = WhisperModel::load(kGolden);
  WhisperGeneration gen = load_whisper_generation(kGolden, model->model_config());
  std::vector<float> pcm = audio::decode_file(kGolden + "/audio.wav");
  std::shared_ptr<const WhisperModel::CrossKV> cross() const {
    return model->cross_kv(model->encode(audio::log_mel(pcm, {})));
  }
};

Golden& golden() {
  static Golden g;
  return g;
}

// Sum of log-probabilities the decoder gives `tokens` after `prompt` under the logit rules.
double teacher_forced_logprob(const Golden& g, const LogitRules& rules, const std::vector<int32_t>& prompt,
                              const std::vector<int32_t>& tokens, bool with_eos) {
  auto st = g.model->start(g.cross());
  std::vector<float> row = g.model->decode(st, prompt).to_f32_vector();
  std::vector<int32_t> seen;
  double sum = 0;
  std::vector<int32_t> all = tokens;
  if (with_eos) all.push_back(g.gen.eos());
  for (int32_t t : all) {
    rules.apply(row.data(), seen);
    std::vector<float> lp = row;
    log_softmax_inplace(lp.data(), static_cast<int64_t>(lp.size()));
    sum += lp[static_cast<size_t>(t)];
    seen.push_back(t);
    if (seen.size() < all.size()) row = g.model->decode(st, {t}).to_f32_vector();
  }
  return sum;
}

}  // namespace

TEST(WhisperDecoding, BatchedStepEqualsOneSequenceAtATime) {
  const Golden& g = golden();
  auto cross = g.cross();
  // Three sequences of different lengths, stepped together.
  std::vector<std::vector<int32_t>> prefixes = {{1}, {1, 40, 41}, {1, 7}};
  std::vector<int32_t> next = {300, 12, 99};
  std::vector<WhisperModel::DecoderState> together, alone;
  for (const auto& p : prefixes) {
    together.push_back(g.model->start(cross));
    g.model->decode(together.back(), p);
    alone.push_back(g.model->start(cross));
    g.model->decode(alone.back(), p);
  }
  std::vector<WhisperModel::DecoderState*> ptrs;
  for (auto& s : together) ptrs.push_back(&s);
  std::vector<float> batch = g.model->decode_step(ptrs, next).to_f32_vector();
  const size_t v = batch.size() / 3;
  for (size_t i = 0; i < 3; ++i) {
    std::vector<float> one = g.model->decode(alone[i], {next[i]}).to_f32_vector();
    std::vector<float> row(batch.begin() + static_cast<long>(i * v), batch.begin() + static_cast<long>((i + 1) * v));
    EXPECT_LE(rel(row, one), 1e-5) << i;
    EXPECT_EQ(together[i].length(), alone[i].length());
  }
  std::vector<WhisperModel::DecoderState*> mixed = {&together[0], &alone[1]};
  auto other = g.model->start(g.cross());  // another window's K/V
  std::vector<WhisperModel::DecoderState*> two_windows = {&together[0], &other};
  EXPECT_THROW(g.model->decode_step(two_windows, {1, 1}), Error);
  EXPECT_THROW(g.model->decode_step(mixed, {1}), Error);
}

// Beam search keeps each beam's cache with its tokens: the log-probability it
// reports is what the decoder gives that sequence read from scratch.
TEST(WhisperDecoding, BeamSearchScoresItsOwnSequence) {
  const Golden& g = golden();
  const LogitRules rules(g.gen, g.model->config().vocab_size, false);
  WindowDecoder dec(*g.model, g.gen, rules, nullptr);
  const std::vector<int32_t> prompt = window_prompt(g.gen, {}, {g.gen.decoder_start_token_id}, false, 0).tokens;
  std::mt19937_64 rng(0);
  DecodeOptions greedy;
  greedy.max_new_tokens = 12;
  DecodeOptions beam = greedy;
  beam.beam_size = 4;
  WindowResult gr = dec.run(g.cross(), prompt, 0, greedy, rng, nullptr);
  WindowResult br = dec.run(g.cross(), prompt, 0, beam, rng, nullptr);
  ASSERT_FALSE(br.tokens.empty());
  ASSERT_EQ(br.token_logprobs.size(), br.tokens.size());
  const bool br_eos = static_cast<int64_t>(br.tokens.size()) < beam.max_new_tokens;
  EXPECT_NEAR(teacher_forced_logprob(g, rules, prompt, br.tokens, br_eos), br.sum_logprob, 1e-3);
  const bool gr_eos = static_cast<int64_t>(gr.tokens.size()) < greedy.max_new_tokens;
  EXPECT_NEAR(teacher_forced_logprob(g, rules, prompt, gr.tokens, gr_eos), gr.sum_logprob, 1e-3);
  double per_token = 0;
  for (float lp : br.token_logprobs) per_token += lp;
  EXPECT_LE(per_token, 0.0);
  // Sampling several candidates at once: each is a valid sequence under the rules too.
  DecodeOptions sample = greedy;
  sample.temperature = 0.7f;
  sample.best_of = 3;
  WindowResult sr = dec.run(g.cross(), prompt, 0, sample, rng, nullptr);
  const bool sr_eos = static_cast<int64_t>(sr.tokens.size()) < sample.max_new_tokens;
  EXPECT_NEAR(teacher_forced_logprob(g, rules, prompt, sr.tokens, sr_eos), sr.sum_logprob, 1e-3);
}

TEST(WhisperDecoding, WindowPromptCarriesPreviousText) {
  WhisperGeneration gen;
  gen.prev_sot_id = 9;
  gen.no_timestamps_id = 8;
  std::vector<int32_t> prev = {100, 101, 102, 103, 104};
  WindowPrompt p = window_prompt(gen, prev, {1, 2}, false, 3);
  EXPECT_EQ(p.tokens, (std::vector<int32_t>{9, 102, 103, 104, 1, 2, 8}));
  EXPECT_EQ(p.sot_index, 4u);
  p = window_prompt(gen, {}, {1, 2}, true, 3);
  EXPECT_EQ(p.tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(p.sot_index, 0u);
  gen.prev_sot_id = -1;  // no <|startofprev|>: no previous text
  EXPECT_EQ(window_prompt(gen, prev, {1}, true, 3).tokens, (std::vector<int32_t>{1}));
}

TEST(WhisperDecoding, NoSpeechWindowsAreSkipped) {
  const Golden& g = golden();
  WhisperGeneration gen = g.gen;  // the golden names no <|notimestamps|>; give it one (and so a <|nospeech|>)
  gen.no_timestamps_id = 450;
  gen.no_speech_id = 449;
  TranscribeOptions opt;
  opt.max_new_tokens = 3;
  opt.fallback = false;
  opt.no_speech_threshold.reset();
  std::vector<float> pcm(16000 * 35, 0.0f);  // two windows
  auto text = [](const std::vector<int32_t>& ids) { return " n" + std::to_string(ids.size()); };
  EXPECT_EQ(transcribe(*g.model, gen, pcm, opt, text).segments.size(), 2u);
  // Every window's no-speech probability is above 0, and no text is confident (log-prob above 0).
  opt.no_speech_threshold = 0.0;
  opt.logprob_threshold = 0.0;
  Transcript t = transcribe(*g.model, gen, pcm, opt, text);
  EXPECT_TRUE(t.segments.empty());
  EXPECT_EQ(t.text, "");
  EXPECT_DOUBLE_EQ(t.duration, 35.0);
}

// A multilingual stand-in: the golden's weights with two of its tokens named
// as languages. With no language given, the first window picks the language
// token the decoder likes best right after <|startoftranscript|>.
TEST(WhisperDecoding, LanguageIsDetectedWhenNotGiven) {
  const Golden& g = golden();
  WhisperGeneration ml = g.gen;
  ml.is_multilingual = true;
  ml.lang_to_id = {{"<|en|>", 5}, {"<|fr|>", 6}, {"<|de|>", 7}};
  ml.transcribe_id = 8;
  ml.translate_id = 9;
  auto st = g.model->start(g.cross());
  std::vector<float> row = g.model->decode(st, {g.gen.decoder_start_token_id}).to_f32_vector();
  std::string want = row[5] >= row[6] && row[5] >= row[7] ? "en" : row[6] >= row[7] ? "fr" : "de";
  TranscribeOptions opt;
  opt.max_new_tokens = 2;
  opt.fallback = false;
  Dump dump;
  Transcript t = transcribe(*g.model, ml, g.pcm, opt, nullptr, &dump);
  EXPECT_EQ(t.language, want);
  ASSERT_GE(dump.decoder_ids.size(), 3u);
  EXPECT_EQ(dump.decoder_ids[1], ml.language_token(want));  // <|sot|> <|lang|> <|transcribe|> ...
  EXPECT_EQ(dump.decoder_ids[2], 8);
  // A language given is used as is; an unknown one is refused.
  opt.language = "de";
  EXPECT_EQ(transcribe(*g.model, ml, g.pcm, opt, nullptr).language, "de");
  opt.language = "xx";
  EXPECT_THROW(transcribe(*g.model, ml, g.pcm, opt, nullptr), OptionError);
  opt.language.clear();
  opt.task = "translate";
  EXPECT_EQ(transcribe(*g.model, ml, g.pcm, opt, nullptr).task, "translate");
}

TEST(WhisperDecoding, Int8DecoderStaysCloseToFloat) {
  const Golden& g = golden();
  auto q = WhisperModel::load(kGolden, {}, WhisperPrecision::Int8);
  Tensor mel = audio::log_mel(g.pcm, {});
  Tensor enc = g.model->encode(mel);
  EXPECT_EQ(rel(q->encode(mel).to_f32_vector(), enc.to_f32_vector()), 0.0);  // the encoder stays float
  auto a = g.model->start(enc);
  auto b = q->start(enc);
  std::vector<int32_t> ids = {1, 45, 17, 300};
  double r = rel(q->decode(b, ids, true).to_f32_vector(), g.model->decode(a, ids, true).to_f32_vector());
  EXPECT_GT(r, 0.0);
  EXPECT_LT(r, 2e-2);
  EXPECT_THROW(parse_whisper_precision("int4"), Error);
}

TEST(WhisperDecoding, BadOptionsNameTheirField) {
  const Golden& g = golden();
  std::vector<float> pcm(1600, 0.0f);
  auto field_of = [&](TranscribeOptions o) -> std::string {
    try {
      transcribe(*g.model, g.gen, pcm, o, nullptr);
    } catch (const OptionError& e) {
      return e.field();
    }
    return "";
  };
  TranscribeOptions o;
  o.beam_size = 0;
  EXPECT_EQ(field_of(o), "beam_size");
  o = {};
  o.best_of = 100;
  EXPECT_EQ(field_of(o), "best_of");
  o = {};
  o.patience = 0;
  EXPECT_EQ(field_of(o), "patience");
  o = {};
  o.length_penalty = -1;
  EXPECT_EQ(field_of(o), "length_penalty");
  o = {};
  o.no_speech_threshold = 1.5;
  EXPECT_EQ(field_of(o), "no_speech_threshold");
  o = {};
  o.word_timestamps = true;  // the golden names no alignment heads
  EXPECT_EQ(field_of(o), "timestamp_granularities");
  o = {};
  o.language = "fr";  // English-only
  EXPECT_EQ(field_of(o), "language");
}

TEST(WhisperDecoding, WindowsCutAtTimestampPairs) {
  WhisperGeneration gen;
  gen.no_timestamps_id = 99;  // timestamps from 100: <|t|> = 100 + t / 0.02 s
  gen.eos_token_ids = {2};
  const LogitRules rules(gen, 2000, true);
  auto ts = [](double s) { return static_cast<int32_t>(100 + std::lround(s / 0.02)); };
  const int64_t window = 30 * 16000;
  // Two closed segments and speech running on: the next window starts at 5 s and decodes "c" again.
  std::vector<int32_t> runs_on = {ts(0), 10, ts(2), ts(2), 11, ts(5), ts(5), 12};
  WindowCut c = cut_window(runs_on, rules, 60.0, window, window);
  ASSERT_EQ(c.segments.size(), 2u);
  EXPECT_DOUBLE_EQ(c.segments[0].start, 60.0);
  EXPECT_DOUBLE_EQ(c.segments[1].start, 62.0);
  EXPECT_DOUBLE_EQ(c.segments[1].end, 65.0);
  EXPECT_EQ(c.segments[1].tokens, (std::vector<int32_t>{11}));
  EXPECT_EQ(c.advance, 5 * 16000);
  EXPECT_EQ(c.consumed, (std::vector<int32_t>{ts(0), 10, ts(2), ts(2), 11, ts(5)}));
  // A single timestamp at the end: nothing after it, the whole window is done.
  c = cut_window({ts(0), 10, ts(2)}, rules, 0.0, window, window);
  EXPECT_EQ(c.segments.size(), 1u);
  EXPECT_EQ(c.advance, window);
  // The last (short) window keeps an unterminated segment: no window comes after it.
  c = cut_window({ts(0), 10, ts(2), ts(2), 11}, rules, 0.0, 8 * 16000, window);
  ASSERT_EQ(c.segments.size(), 2u);
  EXPECT_DOUBLE_EQ(c.segments[1].end, 8.0);
  EXPECT_EQ(c.advance, 8 * 16000);
  // A window always moves on by at least a second.
  EXPECT_EQ(cut_window({ts(0), 10, ts(0), ts(0), 11}, rules, 0.0, window, window).advance, 16000);
  // Without timestamps: one segment over the window.
  const LogitRules plain(gen, 2000, false);
  c = cut_window({10, 11}, plain, 30.0, window, window);
  ASSERT_EQ(c.segments.size(), 1u);
  EXPECT_DOUBLE_EQ(c.segments[0].end, 60.0);
}

TEST(WhisperDecoding, SegmentsStreamAsWindowsFinishAndCancellingStops) {
  const Golden& g = golden();
  TranscribeOptions opt;
  opt.max_new_tokens = 2;
  opt.fallback = false;
  std::vector<float> pcm(16000 * 65, 0.0f);  // three windows
  for (size_t i = 0; i < pcm.size(); ++i) pcm[i] = 0.1f * std::sin(0.01f * static_cast<float>(i));
  std::vector<std::string> streamed;
  opt.on_segment = [&](const Segment& s) { streamed.push_back(s.text); };
  auto text = [](const std::vector<int32_t>& ids) { return " n" + std::to_string(ids.size()); };
  Transcript t = transcribe(*g.model, g.gen, pcm, opt, text);
  ASSERT_EQ(streamed.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(streamed[i], t.segments[i].text);
  streamed.clear();
  opt.cancelled = [&] { return !streamed.empty(); };  // stop once the first window is out
  t = transcribe(*g.model, g.gen, pcm, opt, text);
  EXPECT_EQ(streamed.size(), 1u);
  EXPECT_EQ(t.segments.size(), 1u);
}

TEST(WhisperDecoding, VadWithNothingToTranscribeGivesAnEmptyTranscript) {
  const Golden& g = golden();
  std::vector<float> pcm(16000 * 5, 0.0f);
  for (size_t i = 0; i < pcm.size(); ++i) pcm[i] = 1e-4f * static_cast<float>((i * 7919) % 13) - 6e-4f;  // faint hiss
  for (size_t i = 32000; i < 32000 + 1600; ++i) pcm[i] = 0.5f;  // one 0.1 s click
  ASSERT_TRUE(detect_speech(pcm).empty());
  TranscribeOptions opt;
  opt.vad = true;
  Transcript t = transcribe(*g.model, g.gen, pcm, opt, nullptr);
  EXPECT_TRUE(t.segments.empty());
  EXPECT_TRUE(t.speech.empty());
  EXPECT_DOUBLE_EQ(t.duration, 5.0);
}
