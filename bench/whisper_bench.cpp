// Real-time factor of Whisper speech-to-text: random float32 weights in the
// real tiny and base shapes (written to a temporary checkpoint and loaded
// through the normal path), 60 s of synthetic audio, greedy decoding of a
// fixed number of tokens per 30 s window (EOS suppressed) so runs compare.
//
//   whisper_bench [--shapes tiny,base] [--seconds 60] [--tokens 100] [--threads N] [--device cpu|cuda]
//                 [--dtype float32|bfloat16|float16] [--weights float32|int8]
//
// With --model, a real checkpoint transcribes real files instead (loaded once,
// one untimed warm-up pass over the first file), as a server would:
//
//   whisper_bench --model DIR --audio a.wav,b.wav [--language en] [--beam-size N] [--threads N]
//                 [--weights float32|int8]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "audio/decode.h"
#include "audio/mel.h"
#include "backend/cpu/thread_pool.h"
#include "io/safetensors.h"
#include "models/whisper.h"
#include "runtime/runtime.h"
#include "speech/transcribe.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/strings.h"

using namespace ingot;
using Clock = std::chrono::steady_clock;

namespace {

struct ModelShape {
  std::string name;
  int64_t d, layers, heads, ffn;
};
const ModelShape kShapes[] = {{"tiny", 384, 4, 6, 1536}, {"base", 512, 6, 8, 2048}};
constexpr int64_t kVocab = 51865, kMels = 80, kSource = 1500, kTarget = 448;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// CPU time of the whole process (every thread): less sensitive than wall time to other programs' load.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

Tensor random_tensor(std::mt19937& rng, const Shape& shape, float scale) {
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  std::uniform_real_distribution<float> u(-scale, scale);
  for (float& x : v) x = u(rng);
  return Tensor::from_f32(v, shape);
}

Tensor filled(int64_t n, float value) { return Tensor::from_f32(std::vector<float>(static_cast<size_t>(n), value), {n}); }

// A multilingual-layout checkpoint (special tokens at 50257.., timestamps from 50364).
std::string write_checkpoint(const ModelShape& s) {
  std::string dir = (std::filesystem::temp_directory_path() / ("ingot-whisper-bench-" + s.name)).string();
  std::filesystem::create_directories(dir);
  std::mt19937 rng(1234);
  const int64_t d = s.d;
  const float w = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<std::pair<std::string, Tensor>> t;
  auto lin = [&](const std::string& p, int64_t out, int64_t in, bool bias = true) {
    t.push_back({p + ".weight", random_tensor(rng, {out, in}, w)});
    if (bias) t.push_back({p + ".bias", filled(out, 0.0f)});
  };
  auto norm = [&](const std::string& p) {
    t.push_back({p + ".weight", filled(d, 1.0f)});
    t.push_back({p + ".bias", filled(d, 0.0f)});
  };
  auto attn = [&](const std::string& p) {
    lin(p + ".q_proj", d, d);
    lin(p + ".k_proj", d, d, false);
    lin(p + ".v_proj", d, d);
    lin(p + ".out_proj", d, d);
  };
  t.push_back({"model.encoder.conv1.weight", random_tensor(rng, {d, kMels, 3}, 0.1f)});
  t.push_back({"model.encoder.conv1.bias", filled(d, 0.0f)});
  t.push_back({"model.encoder.conv2.weight", random_tensor(rng, {d, d, 3}, w)});
  t.push_back({"model.encoder.conv2.bias", filled(d, 0.0f)});
  t.push_back({"model.encoder.embed_positions.weight", random_tensor(rng, {kSource, d}, 0.1f)});
  norm("model.encoder.layer_norm");
  for (int64_t i = 0; i < s.layers; ++i) {
    std::string p = "model.encoder.layers." + std::to_string(i);
    norm(p + ".self_attn_layer_norm");
    attn(p + ".self_attn");
    norm(p + ".final_layer_norm");
    lin(p + ".fc1", s.ffn, d);
    lin(p + ".fc2", d, s.ffn);
  }
  t.push_back({"model.decoder.embed_tokens.weight", random_tensor(rng, {kVocab, d}, 0.1f)});
  t.push_back({"model.decoder.embed_positions.weight", random_tensor(rng, {kTarget, d}, 0.1f)});
  norm("model.decoder.layer_norm");
  for (int64_t i = 0; i < s.layers; ++i) {
    std::string p = "model.decoder.layers." + std::to_string(i);
    norm(p + ".self_attn_layer_norm");
    attn(p + ".self_attn");
    norm(p + ".encoder_attn_layer_norm");
    attn(p + ".encoder_attn");
    norm(p + ".final_layer_norm");
    lin(p + ".fc1", s.ffn, d);
    lin(p + ".fc2", d, s.ffn);
  }
  write_safetensors(dir + "/model.safetensors", t);
  auto write = [&](const std::string& name, const std::string& text) {
    FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
    if (!f) fail(ErrorKind::Io, "cannot write ", dir, "/", name);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  };
  write("config.json", str_cat(R"({"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper",)",
                               R"( "vocab_size": )", kVocab, R"(, "d_model": )", d, R"(, "encoder_layers": )", s.layers,
                               R"(, "decoder_layers": )", s.layers, R"(, "encoder_attention_heads": )", s.heads,
                               R"(, "decoder_attention_heads": )", s.heads, R"(, "encoder_ffn_dim": )", s.ffn,
                               R"(, "decoder_ffn_dim": )", s.ffn, R"(, "num_mel_bins": 80, "max_source_positions": 1500,)",
                               R"( "max_target_positions": 448, "activation_function": "gelu",)",
                               R"( "tie_word_embeddings": true, "decoder_start_token_id": 50258,)",
                               R"( "eos_token_id": 50257, "torch_dtype": "float32"})"));
  // EOS is suppressed so every window decodes exactly --tokens tokens.
  write("generation_config.json",
        R"({"decoder_start_token_id": 50258, "eos_token_id": 50257, "suppress_tokens": [50257],)"
        R"( "begin_suppress_tokens": [220], "lang_to_id": {"<|en|>": 50259}, "is_multilingual": true,)"
        R"( "task_to_id": {"transcribe": 50360, "translate": 50359}, "no_timestamps_token_id": 50364})");
  return dir;
}

std::vector<float> synthetic_audio(double seconds) {
  const int64_t n = static_cast<int64_t>(seconds * 16000);
  std::vector<float> pcm(static_cast<size_t>(n));
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (int64_t i = 0; i < n; ++i)
    pcm[static_cast<size_t>(i)] = 0.3f * std::sin(2.0f * 3.14159265f * 220.0f * static_cast<float>(i) / 16000.0f) +
                                  noise(rng);
  return pcm;
}

const char* arg(int argc, char** argv, const char* name, const char* def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return def;
}

// Wall time of transcribing every file once with a loaded model; prints one line per file and the total.
int real_files(int argc, char** argv, const LoadOptions& lo) {
  const std::string dir = arg(argc, argv, "--model", "");
  std::vector<std::string> files = split(arg(argc, argv, "--audio", ""), ',');
  if (files.empty() || files[0].empty()) fail(ErrorKind::InvalidArgument, "--audio FILE[,FILE...] is required with --model");
  auto model = WhisperModel::load(dir, lo, parse_whisper_precision(arg(argc, argv, "--weights", "float32")));
  auto gen = speech::load_whisper_generation(dir, model->model_config());
  std::shared_ptr<Tokenizer> tok = Tokenizer::from_dir(dir);
  speech::TextFn text = [tok](const std::vector<int32_t>& ids) { return tok->decode(ids, true); };
  speech::TranscribeOptions opt;
  opt.language = arg(argc, argv, "--language", "en");
  opt.beam_size = std::atoi(arg(argc, argv, "--beam-size", "1"));
  std::vector<std::vector<float>> pcm;
  double audio_s = 0;
  for (const std::string& f : files) {
    pcm.push_back(audio::decode_file(f));
    audio_s += static_cast<double>(pcm.back().size()) / 16000.0;
  }
  speech::transcribe(*model, gen, pcm[0], opt, text);  // warm-up
  double total = 0;
  const double cpu0 = cpu_seconds();
  for (size_t i = 0; i < files.size(); ++i) {
    auto t0 = Clock::now();
    speech::Transcript t = speech::transcribe(*model, gen, pcm[i], opt, text);
    double s = since(t0);
    total += s;
    std::printf("%8.3f s  %s:%s\n", s, std::filesystem::path(files[i]).filename().string().c_str(), t.text.c_str());
  }
  std::printf("total %.3f s (cpu %.3f s) for %.1f s of audio, RTF %.4f, %d threads\n", total, cpu_seconds() - cpu0,
              audio_s, total / audio_s, cpu::num_threads());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    runtime::init_backends();
    std::vector<std::string> shapes = split(arg(argc, argv, "--shapes", "tiny,base"), ',');
    double seconds = std::atof(arg(argc, argv, "--seconds", "60"));
    int64_t tokens = std::atoll(arg(argc, argv, "--tokens", "100"));
    int threads = std::atoi(arg(argc, argv, "--threads", "0"));
    std::string dtype = arg(argc, argv, "--dtype", "float32");
    if (threads > 0) cpu::set_num_threads(threads);
    LoadOptions lo;
    lo.device = parse_device(arg(argc, argv, "--device", "cpu"));
    lo.dtype = parse_dtype(dtype);
    if (std::strlen(arg(argc, argv, "--model", "")) > 0) return real_files(argc, argv, lo);
    if (seconds <= 0 || tokens < 1) fail(ErrorKind::InvalidArgument, "--seconds must be > 0 and --tokens >= 1");
    std::vector<float> pcm = synthetic_audio(seconds);
    std::printf("audio %.0f s, %lld tokens per 30 s window, device %s, dtype %s, %d threads\n", seconds,
                static_cast<long long>(tokens), arg(argc, argv, "--device", "cpu"), dtype.c_str(),
                cpu::num_threads());
    std::printf("%-5s %8s %10s %12s %12s %8s\n", "shape", "windows", "total_s", "encode_s/win", "ms/token", "RTF");
    for (const std::string& name : shapes) {
      const ModelShape* s = nullptr;
      for (const ModelShape& k : kShapes)
        if (k.name == name) s = &k;
      if (!s) fail(ErrorKind::InvalidArgument, "--shapes: unknown shape '", name, "' (tiny or base)");
      std::string dir = write_checkpoint(*s);
      auto model = WhisperModel::load(dir, lo, parse_whisper_precision(arg(argc, argv, "--weights", "float32")));
      auto gen = speech::load_whisper_generation(dir, model->model_config());
      speech::TranscribeOptions opt;
      opt.language = "en";
      opt.max_new_tokens = tokens;
      opt.temperatures = {0.0f};
      opt.fallback = false;
      // Warm-up: one window (first-touch of weights, kernel setup).
      std::vector<float> warm(pcm.begin(), pcm.begin() + std::min<size_t>(pcm.size(), 16000));
      speech::transcribe(*model, gen, warm, opt, nullptr);
      // Mel + encoder alone, one window.
      audio::MelConfig mc;
      auto t0 = Clock::now();
      Tensor enc = model->encode(audio::log_mel(warm, mc));
      enc.to(Device::CPU);
      double encode_s = since(t0);
      t0 = Clock::now();
      speech::Transcript tr = speech::transcribe(*model, gen, pcm, opt, nullptr);
      double total = since(t0);
      int64_t windows = static_cast<int64_t>(tr.segments.size());
      int64_t generated = 0;
      for (const auto& seg : tr.segments) generated += static_cast<int64_t>(seg.tokens.size());
      double per_token_ms = generated > 0 ? (total - windows * encode_s) / static_cast<double>(generated) * 1e3 : 0;
      std::printf("%-5s %8lld %10.2f %12.3f %12.2f %8.3f\n", name.c_str(), static_cast<long long>(windows), total,
                  encode_s, per_token_ms, total / seconds);
      std::fflush(stdout);
      std::filesystem::remove_all(dir);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "whisper_bench: %s\n", e.what());
    return 1;
  }
}
