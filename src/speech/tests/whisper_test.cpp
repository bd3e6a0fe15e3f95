// Whisper against the transformers golden: features, encoder, decoder steps.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "audio/decode.h"
#include "audio/mel.h"
#include "io/safetensors.h"
#include "speech/transcribe.h"
#include "util/error.h"
#include "util/strings.h"

using namespace ingot;

namespace {

const std::string kGolden = std::string(INGOT_SHARED_DIR) + "/goldens/whisper-float32";

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    num += (a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / (den + 1e-30));
}

}  // namespace

TEST(Whisper, MatchesTransformersGolden) {
  auto golden = nlohmann::json::parse(read_text_file(kGolden + "/golden.json"));
  std::vector<int32_t> ref_ids = golden["decoder_ids"].get<std::vector<int32_t>>();
  auto ref = SafetensorsFile::open(kGolden + "/logits.safetensors");
  auto model = WhisperModel::load(kGolden);
  auto gen = speech::load_whisper_generation(kGolden, model->model_config());
  speech::TranscribeOptions opt;
  opt.max_new_tokens = static_cast<int64_t>(ref_ids.size()) - 1;
  opt.fallback = false;
  speech::Dump dump;
  speech::transcribe(*model, gen, audio::decode_file(kGolden + "/audio.wav"), opt, nullptr, &dump);
  EXPECT_LE(rel(dump.mel.to_f32_vector(), ref->get("mel").to_f32_vector()), 1e-5);
  EXPECT_LE(rel(dump.encoder_out.to_f32_vector(), ref->get("encoder_out").to_f32_vector()), 1e-4);
  EXPECT_EQ(dump.decoder_ids, ref_ids);
  EXPECT_LE(rel(dump.step_logits, ref->get("step_logits").to_f32_vector()), 1e-5);
}

TEST(Whisper, IncrementalDecodeEqualsFullRecompute) {
  auto model = WhisperModel::load(kGolden);
  audio::MelConfig mc;
  Tensor enc = model->encode(audio::log_mel(audio::decode_file(kGolden + "/audio.wav"), mc));
  std::vector<int32_t> ids = {1, 445, 17, 300, 5};
  auto full = model->start(enc);
  std::vector<float> all = model->decode(full, ids, true).to_f32_vector();
  auto inc = model->start(enc);
  for (size_t i = 0; i < ids.size(); ++i) {
    std::vector<float> row = model->decode(inc, {ids[i]}).to_f32_vector();
    std::vector<float> want(all.begin() + static_cast<long>(i * row.size()), all.begin() + static_cast<long>((i + 1) * row.size()));
    EXPECT_LE(rel(row, want), 1e-5) << i;
  }
}

TEST(Whisper, BadInput) {
  EXPECT_THROW(WhisperModel::load(std::string(INGOT_SHARED_DIR) + "/goldens/llama-float32"), Error);
  auto model = WhisperModel::load(kGolden);
  auto gen = speech::load_whisper_generation(kGolden, model->model_config());
  speech::TranscribeOptions opt;
  EXPECT_THROW(speech::transcribe(*model, gen, {}, opt, nullptr), Error);
  opt.temperatures = {-1.0f};
  EXPECT_THROW(speech::transcribe(*model, gen, std::vector<float>(1600, 0.0f), opt, nullptr), Error);
  EXPECT_THROW(model->encode(Tensor::zeros({80, 10}, DType::F32)), Error);
  auto st = model->start(model->encode(audio::log_mel(std::vector<float>(1600, 0.1f), {})));
  EXPECT_THROW(model->decode(st, {100000}), Error);
}

TEST(Whisper, LongAudioIsWindowedAndFormatsRender) {
  auto model = WhisperModel::load(kGolden);
  auto gen = speech::load_whisper_generation(kGolden, model->model_config());
  speech::TranscribeOptions opt;
  opt.max_new_tokens = 3;
  opt.fallback = false;
  std::vector<float> pcm(16000 * 65, 0.0f);  // 65 s: three windows
  for (size_t i = 0; i < pcm.size(); ++i) pcm[i] = 0.1f * std::sin(0.01f * static_cast<float>(i));
  auto text = [](const std::vector<int32_t>& ids) { return " n" + std::to_string(ids.size()); };
  speech::Transcript t = speech::transcribe(*model, gen, pcm, opt, text);
  ASSERT_EQ(t.segments.size(), 3u);
  EXPECT_DOUBLE_EQ(t.segments[2].start, 60.0);
  EXPECT_DOUBLE_EQ(t.segments[2].end, 65.0);
  EXPECT_NE(speech::format_srt(t).find("00:01:00,000 --> 00:01:05,000"), std::string::npos);
  EXPECT_EQ(speech::format_vtt(t).rfind("WEBVTT", 0), 0u);
  auto j = nlohmann::json::parse(speech::format_json(t, true));
  EXPECT_EQ(j["segments"].size(), 3u);
}
