// Audio decoding and Whisper features against the golden and real clips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "audio/decode.h"
#include "audio/mel.h"
#include "io/safetensors.h"
#include "util/error.h"

using namespace ingot;
namespace fs = std::filesystem;

namespace {

const std::string kShared = INGOT_SHARED_DIR;
const std::string kGolden = kShared + "/goldens/whisper-float32";

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    num += (a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / (den + 1e-30));
}

// Raw s16 samples of a canonical 16 kHz mono wav (44-byte header).
std::vector<float> read_wav_s16(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  size_t pos = bytes.find("data");
  EXPECT_NE(pos, std::string::npos);
  std::vector<float> out;
  for (size_t i = pos + 8; i + 1 < bytes.size(); i += 2) {
    int16_t s;
    std::memcpy(&s, bytes.data() + i, 2);
    out.push_back(s / 32768.0f);
  }
  return out;
}

fs::path tmpdir() {
  fs::path d = fs::temp_directory_path() / ("ingot_audio_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

// Best normalised cross-correlation within +-max_lag samples.
double best_correlation(const std::vector<float>& a, const std::vector<float>& b, int max_lag) {
  double best = -1;
  size_t n = std::min(a.size(), b.size());
  for (int lag = -max_lag; lag <= max_lag; lag += 1) {
    double sab = 0, saa = 0, sbb = 0;
    for (size_t i = static_cast<size_t>(std::max(0, lag)); i < n && i - lag < n; i += 4) {
      double x = a[i], y = b[i - lag];
      sab += x * y;
      saa += x * x;
      sbb += y * y;
    }
    best = std::max(best, sab / std::sqrt(saa * sbb + 1e-30));
  }
  return best;
}

}  // namespace

TEST(AudioDecode, WavMatchesRawSamples) {
  ASSERT_TRUE(fs::exists(kGolden + "/audio.wav"));
  std::vector<float> pcm = audio::decode_file(kGolden + "/audio.wav");
  std::vector<float> raw = read_wav_s16(kGolden + "/audio.wav");
  ASSERT_EQ(pcm.size(), raw.size());
  EXPECT_EQ(rel(pcm, raw), 0.0);
}

TEST(AudioMel, MatchesWhisperFeatureExtractorGolden) {
  auto ref = SafetensorsFile::open(kGolden + "/logits.safetensors");
  Tensor mel_ref = ref->get("mel");
  std::vector<float> pcm = audio::decode_file(kGolden + "/audio.wav");
  audio::MelConfig cfg;
  Tensor mel = audio::log_mel(pcm, cfg);
  ASSERT_EQ(mel.shape(), mel_ref.shape());
  EXPECT_LE(rel(mel.to_f32_vector(), mel_ref.to_f32_vector()), 1e-5);
}

TEST(AudioMel, FilterBankRowsSumLikeSlaney) {
  audio::MelConfig c;
  std::vector<double> f = audio::mel_filter_bank(c);
  ASSERT_EQ(f.size(), 201u * 80u);
  for (int m = 0; m < 80; ++m) {
    double s = 0;
    for (int b = 0; b < 201; ++b) s += f[static_cast<size_t>(b * 80 + m)];
    EXPECT_GT(s, 0.0) << "filter " << m << " is empty";
  }
}

TEST(AudioDecode, EveryContainerDecodesToTheSamePcm) {
  const std::string clip = kShared + "/assets/audio/sense_and_sensibility_01_austen_64kb-0870.wav";
  ASSERT_TRUE(fs::exists(clip));
  std::vector<float> ref = audio::decode_file(clip);
  fs::path dir = tmpdir();
  struct Fmt {
    const char* ext;
    const char* args;
    double min_corr;
  };
  const Fmt fmts[] = {{"flac", "-c:a flac", 0.9999}, {"mp3", "-c:a libmp3lame -b:a 128k", 0.98},
                      {"ogg", "-c:a libopus -b:a 64k", 0.95},  {"webm", "-c:a libopus -b:a 64k", 0.95},
                      {"m4a", "-c:a aac -b:a 128k", 0.98},     {"wav", "-ar 44100 -ac 2", 0.999}};
  for (const Fmt& f : fmts) {
    fs::path out = dir / (std::string("clip.") + f.ext);
    std::string cmd = "ffmpeg -loglevel error -y -i '" + clip + "' " + f.args + " '" + out.string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::vector<float> pcm = audio::decode_file(out.string());
    EXPECT_NEAR(static_cast<double>(pcm.size()), static_cast<double>(ref.size()), 0.05 * ref.size()) << f.ext;
    EXPECT_GE(best_correlation(pcm, ref, 1200), f.min_corr) << f.ext;
    // The same bytes through the in-memory reader.
    std::ifstream in(out, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(audio::decode_memory(bytes).size(), pcm.size()) << f.ext;
  }
  fs::remove_all(dir);
}

TEST(AudioDecode, BadInputIsAClearError) {
  fs::path dir = tmpdir();
  auto expect_error = [](auto fn, ErrorKind kind) {
    try {
      fn();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
    }
  };
  std::ofstream(dir / "text.wav") << "this is not audio at all, just some text that pretends";
  expect_error([&] { audio::decode_file((dir / "text.wav").string()); }, ErrorKind::BadFormat);
  std::ofstream(dir / "empty.mp3");
  expect_error([&] { audio::decode_file((dir / "empty.mp3").string()); }, ErrorKind::BadFormat);
  expect_error([&] { audio::decode_memory(""); }, ErrorKind::InvalidArgument);
  expect_error([&] { audio::decode_file((dir / "missing.wav").string()); }, ErrorKind::NotFound);
  // A valid wav with no samples.
  ASSERT_EQ(std::system(("sox -n -r 16000 -c 1 -b 16 '" + (dir / "zero.wav").string() + "' trim 0 0").c_str()), 0);
  expect_error([&] { audio::decode_file((dir / "zero.wav").string()); }, ErrorKind::InvalidArgument);
  // 0.1 s decodes; features are padded to the 30 s window.
  ASSERT_EQ(std::system(("sox -n -r 8000 -c 1 -b 8 '" + (dir / "short.wav").string() + "' synth 0.1 sine 440").c_str()), 0);
  std::vector<float> s = audio::decode_file((dir / "short.wav").string());
  EXPECT_NEAR(static_cast<double>(s.size()), 1600.0, 20.0);
  EXPECT_EQ(audio::log_mel(s, {}).dim(1), 3000);
  // Too long for the limit (a small limit stands in for the hour).
  ASSERT_EQ(std::system(("sox -n -r 16000 -c 1 -b 16 '" + (dir / "long.wav").string() + "' synth 6 sine 300").c_str()), 0);
  audio::DecodeLimits lim;
  lim.max_seconds = 5;
  expect_error([&] { audio::decode_file((dir / "long.wav").string(), 16000, lim); }, ErrorKind::InvalidArgument);
  // Odd sample formats: 24-bit, float, 8-bit unsigned, stereo 48 kHz.
  for (const char* spec : {"-b 24 -r 22050", "-e floating-point -b 32 -r 16000", "-b 8 -e unsigned -r 11025",
                           "-b 16 -r 48000 -c 2"}) {
    fs::path p = dir / "odd.wav";
    ASSERT_EQ(std::system(("sox -n " + std::string(spec) + " '" + p.string() + "' synth 1 sine 300").c_str()), 0);
    EXPECT_NEAR(static_cast<double>(audio::decode_file(p.string()).size()), 16000.0, 50.0) << spec;
  }
  fs::remove_all(dir);
}

// MP3 frames may switch between mono and stereo (and rate) mid-stream: the
// resampler is rebuilt for each new layout instead of reading a channel plane
// that is not there (a fuzzed MP3 crashed in swresample before).
TEST(AudioDecode, StreamThatSwitchesChannelsMidwayDecodes) {
  fs::path dir = tmpdir();
  const std::string mono = (dir / "mono.mp3").string(), stereo = (dir / "stereo.mp3").string();
  const std::string both = (dir / "both.mp3").string();
  ASSERT_EQ(std::system(("ffmpeg -loglevel error -y -f lavfi -i sine=frequency=300:duration=1:sample_rate=22050 -ac 1 "
                         "-c:a libmp3lame -b:a 64k '" + mono + "'").c_str()), 0);
  ASSERT_EQ(std::system(("ffmpeg -loglevel error -y -f lavfi -i sine=frequency=500:duration=1:sample_rate=44100 -ac 2 "
                         "-c:a libmp3lame -b:a 128k '" + stereo + "'").c_str()), 0);
  ASSERT_EQ(std::system(("cat '" + mono + "' '" + stereo + "' > '" + both + "'").c_str()), 0);
  std::vector<float> pcm = audio::decode_file(both);
  // Both halves come out (about 2 s at 16 kHz; MP3 padding adds a little per file).
  EXPECT_GT(pcm.size(), 30000u);
  EXPECT_LT(pcm.size(), 36000u);
  fs::remove_all(dir);
}

namespace {

std::vector<float> read_in_chunks(audio::PcmSource& r, size_t chunk) {
  std::vector<float> out, buf(chunk);
  while (true) {
    const size_t got = r.read(buf.data(), chunk);
    out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(got));
    if (got < chunk) return out;  // fewer than asked only at the end
  }
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace

// The reader behind decode_file: however the samples are asked for, from a
// file or from memory, first pass or after rewind, they are decode_file's.
TEST(PcmReader, ChunkedReadsEqualDecodeFile) {
  const std::string clip = kShared + "/assets/audio/sense_and_sensibility_01_austen_64kb-0880.wav";
  fs::path dir = tmpdir();
  struct Fmt {
    const char* ext;
    const char* args;
  };
  const Fmt fmts[] = {{"wav", ""},          {"wav", "-ar 44100 -ac 2"},          {"flac", "-ar 22050 -c:a flac"},
                      {"mp3", "-c:a libmp3lame -b:a 64k"}, {"ogg", "-c:a libopus -b:a 32k"}, {"m4a", "-ar 48000 -c:a aac"}};
  int n = 0;
  for (const Fmt& f : fmts) {
    fs::path out = dir / ("clip" + std::to_string(n++) + "." + f.ext);
    std::string cmd = "ffmpeg -loglevel error -y -i '" + clip + "' " + f.args + " '" + out.string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const std::vector<float> want = audio::decode_file(out.string());
    ASSERT_GT(want.size(), 40000u) << out;
    auto bytes = std::make_shared<const std::string>(file_bytes(out));
    for (size_t chunk : {size_t{1}, size_t{7}, size_t{1000}, size_t{4096}, size_t{480000}}) {
      auto r = audio::PcmReader::open_file(out.string());
      // A hint: MP3 durations are estimated from the bit rate.
      EXPECT_NEAR(r->duration_hint(), static_cast<double>(want.size()) / 16000, 0.25) << out;
      EXPECT_EQ(read_in_chunks(*r, chunk), want) << out << " chunk " << chunk;
      EXPECT_EQ(r->read(nullptr, 0), 0u);
      r->rewind();
      EXPECT_EQ(read_in_chunks(*r, chunk + 1), want) << out << " after rewind, chunk " << chunk + 1;
      auto m = audio::PcmReader::open_memory(bytes);
      EXPECT_EQ(read_in_chunks(*m, chunk), want) << out << " from memory, chunk " << chunk;
    }
  }
  fs::remove_all(dir);
}

// Opening a reader throws what decode_file throws, word for word.
TEST(PcmReader, BadFilesGiveDecodeFilesErrors) {
  fs::path dir = tmpdir();
  std::ofstream(dir / "text.wav") << "this is not audio at all, just some text that pretends";
  std::ofstream(dir / "empty.mp3");
  ASSERT_EQ(std::system(("sox -n -r 16000 -c 1 -b 16 '" + (dir / "zero.wav").string() + "' trim 0 0").c_str()), 0);
  ASSERT_EQ(std::system(("sox -n -r 16000 -c 1 -b 16 '" + (dir / "long.wav").string() + "' synth 6 sine 300").c_str()), 0);
  audio::DecodeLimits lim;
  lim.max_seconds = 5;
  auto error_of = [](auto fn) -> std::pair<ErrorKind, std::string> {
    try {
      fn();
    } catch (const Error& e) {
      return {e.kind(), e.what()};
    }
    return {ErrorKind::Internal, "no error"};
  };
  for (const char* name : {"text.wav", "empty.mp3", "zero.wav", "missing.wav", "long.wav"}) {
    const std::string p = (dir / name).string();
    auto want = error_of([&] { audio::decode_file(p, 16000, lim); });
    ASSERT_NE(want.second, "no error") << name;
    auto got = error_of([&] { audio::PcmReader::open_file(p, 16000, lim); });
    EXPECT_EQ(got.first, want.first) << name;
    EXPECT_EQ(got.second, want.second) << name;
    if (std::string(name) == "missing.wav") continue;
    auto bytes = std::make_shared<const std::string>(file_bytes(dir / name));
    want = error_of([&] { audio::decode_memory(*bytes, 16000, lim); });
    got = error_of([&] { audio::PcmReader::open_memory(bytes, 16000, lim); });
    EXPECT_EQ(got.first, want.first) << name;
    EXPECT_EQ(got.second, want.second) << name;
  }
  EXPECT_EQ(error_of([] { audio::PcmReader::open_memory(nullptr); }).first, ErrorKind::InvalidArgument);
  fs::remove_all(dir);
}
