// Transcribing from a reader that pulls windows off the file gives exactly
// what transcribing the whole decoded PCM gives: segments, tokens, times,
// scores, VAD spans.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "audio/decode.h"
#include "speech/transcribe.h"

using namespace ingot;
using namespace ingot::speech;
namespace fs = std::filesystem;

namespace {

const std::string kShared = INGOT_SHARED_DIR;
const std::string kGolden = kShared + "/goldens/whisper-float32";

// 16-bit mono 16 kHz WAV.
void write_wav(const fs::path& p, const std::vector<float>& pcm) {
  std::ofstream f(p, std::ios::binary);
  auto u32 = [&](uint32_t v) { f.write(reinterpret_cast<const char*>(&v), 4); };
  auto u16 = [&](uint16_t v) { f.write(reinterpret_cast<const char*>(&v), 2); };
  const uint32_t data = static_cast<uint32_t>(pcm.size() * 2);
  f.write("RIFF", 4);
  u32(36 + data);
  f.write("WAVEfmt ", 8);
  u32(16);
  u16(1);
  u16(1);
  u32(16000);
  u32(32000);
  u16(2);
  u16(16);
  f.write("data", 4);
  u32(data);
  for (float x : pcm) u16(static_cast<uint16_t>(static_cast<int16_t>(std::clamp(x * 32768.0f, -32768.0f, 32767.0f))));
}

// The LibriVox clips end to end with `gap_s` of silence after each, twice over (about 90 s).
fs::path librivox_concat(double gap_s) {
  std::vector<float> all;
  for (int round = 0; round < 2; ++round)
    for (const char* id : {"0870", "0880", "0890", "0920", "0930"}) {
      std::vector<float> c =
          audio::decode_file(kShared + "/assets/audio/sense_and_sensibility_01_austen_64kb-" + id + ".wav");
      all.insert(all.end(), c.begin(), c.end());
      all.insert(all.end(), static_cast<size_t>(gap_s * 16000), 0.0f);
    }
  fs::path p = fs::temp_directory_path() / ("ingot_stream_" + std::to_string(getpid()) + ".wav");
  write_wav(p, all);
  return p;
}

void expect_same(const Transcript& a, const Transcript& b, const std::string& what) {
  EXPECT_EQ(a.text, b.text) << what;
  EXPECT_EQ(a.language, b.language) << what;
  EXPECT_EQ(a.duration, b.duration) << what;
  ASSERT_EQ(a.segments.size(), b.segments.size()) << what;
  for (size_t i = 0; i < a.segments.size(); ++i) {
    const Segment &x = a.segments[i], &y = b.segments[i];
    EXPECT_EQ(x.start, y.start) << what << " segment " << i;
    EXPECT_EQ(x.end, y.end) << what << " segment " << i;
    EXPECT_EQ(x.tokens, y.tokens) << what << " segment " << i;
    EXPECT_EQ(x.avg_logprob, y.avg_logprob) << what << " segment " << i;
    EXPECT_EQ(x.no_speech_prob, y.no_speech_prob) << what << " segment " << i;
    EXPECT_EQ(x.temperature, y.temperature) << what << " segment " << i;
  }
  ASSERT_EQ(a.speech.size(), b.speech.size()) << what;
  for (size_t i = 0; i < a.speech.size(); ++i) {
    EXPECT_EQ(a.speech[i].start, b.speech[i].start) << what;
    EXPECT_EQ(a.speech[i].end, b.speech[i].end) << what;
  }
}

}  // namespace

TEST(StreamingTranscription, EqualsWholePcm) {
  auto model = WhisperModel::load(kGolden);
  WhisperGeneration gen = load_whisper_generation(kGolden, model->model_config());
  // The golden names no timestamp tokens: give it some, so windows seek on timestamps too.
  WhisperGeneration ts = gen;
  ts.no_timestamps_id = 450;
  ts.no_speech_id = 449;
  const fs::path concat = librivox_concat(2.5);
  auto text = [](const std::vector<int32_t>& ids) { return " n" + std::to_string(ids.size()); };
  bool seeked_inside_a_window = false;
  for (const std::string& file : {kGolden + "/audio.wav", concat.string()}) {
    const std::vector<float> pcm = audio::decode_file(file);
    for (int variant = 0; variant < 4; ++variant) {
      const bool timestamps = variant & 1, vad = variant & 2;
      TranscribeOptions opt;
      opt.max_new_tokens = 6;
      opt.timestamps = timestamps;
      opt.vad = vad;
      const WhisperGeneration& g = timestamps ? ts : gen;
      const Transcript whole = transcribe(*model, g, pcm, opt, text);
      auto reader = audio::PcmReader::open_file(file);
      const Transcript streamed = transcribe(*model, g, *reader, opt, text);
      const std::string what = file + (timestamps ? " timestamps" : "") + (vad ? " vad" : "");
      ASSERT_FALSE(whole.segments.empty()) << what;
      expect_same(streamed, whole, what);
      if (vad && file == concat.string()) {
        EXPECT_GE(whole.speech.size(), 2u) << "the gaps are found";
      }
      for (const Segment& s : whole.segments)
        seeked_inside_a_window |= timestamps && !vad && std::fmod(s.start, 30.0) > 0.01;
    }
  }
  EXPECT_TRUE(seeked_inside_a_window) << "no window started at a timestamp: the seek path went untested";
  fs::remove(concat);
}

// A source that ends or fails part way: the error comes out of transcribe.
TEST(StreamingTranscription, ReadErrorsReachTheCaller) {
  auto model = WhisperModel::load(kGolden);
  WhisperGeneration gen = load_whisper_generation(kGolden, model->model_config());
  struct Failing : audio::PcmSource {
    size_t given = 0;
    size_t read(float* out, size_t n) override {
      if (given >= 16000 * 40) fail(ErrorKind::BadFormat, "corrupt audio data");
      std::fill(out, out + n, 0.01f);
      given += n;
      return n;
    }
    void rewind() override { given = 0; }
  } failing;
  TranscribeOptions opt;
  opt.max_new_tokens = 2;
  EXPECT_THROW(transcribe(*model, gen, failing, opt, nullptr), Error);
  struct Empty : audio::PcmSource {
    size_t read(float*, size_t) override { return 0; }
    void rewind() override {}
  } empty;
  for (bool vad : {false, true}) {
    opt.vad = vad;
    try {
      transcribe(*model, gen, empty, opt, nullptr);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
    }
  }
}
