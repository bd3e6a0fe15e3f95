// `ingot transcribe`: speech to text with a Whisper checkpoint.
#include <cstdio>

#include "audio/decode.h"
#include "cli/model_setup.h"
#include "cli/verbs.h"
#include "io/safetensors.h"
#include "speech/transcribe.h"
#include "util/error.h"

namespace ingot::cli {

namespace {

struct TranscribeFlags {
  ModelFlags model;
  std::string audio;
  std::string language;
  std::string task = "transcribe";
  bool timestamps = false;
  std::string format = "text";
  std::string dump;
  int64_t max_tokens = 0;
  float temperature = -1;
};

int run_transcribe(const TranscribeFlags& f) {
  if (f.format != "text" && f.format != "json" && f.format != "verbose_json" && f.format != "srt" && f.format != "vtt")
    fail(ErrorKind::InvalidArgument, "--format must be text, json, verbose_json, srt or vtt");
  if (f.max_tokens < 0) fail(ErrorKind::InvalidArgument, "--max-tokens must be >= 0");
  if (f.model.tensor_parallel != 1)
    fail(ErrorKind::Unsupported, "--tensor-parallel is not supported for Whisper models");
  auto model = WhisperModel::load(f.model.model, load_options(f.model));
  auto gen = speech::load_whisper_generation(f.model.model, model->model_config());
  std::vector<float> pcm = audio::decode_file(f.audio);
  speech::TranscribeOptions opt;
  opt.language = f.language;
  opt.task = f.task;
  opt.timestamps = f.timestamps || f.format == "srt" || f.format == "vtt" || f.format == "verbose_json";
  opt.max_new_tokens = f.max_tokens;
  if (f.temperature >= 0) opt.temperatures = {f.temperature};
  speech::TextFn text = text_decoder_for(f.model.model);
  speech::Dump dump;
  speech::Transcript t = speech::transcribe(*model, gen, pcm, opt, text, f.dump.empty() ? nullptr : &dump);
  if (!f.dump.empty()) {
    int64_t v = model->config().vocab_size;
    int64_t steps = static_cast<int64_t>(dump.step_logits.size()) / v;
    write_safetensors(f.dump, {{"mel", dump.mel},
                               {"encoder_out", dump.encoder_out},
                               {"step_logits", Tensor::from_f32(dump.step_logits, {steps, v})},
                               {"decoder_ids", Tensor::from_i32(dump.decoder_ids, {int64_t(dump.decoder_ids.size())})}});
  }
  std::string out = f.format == "srt"            ? speech::format_srt(t)
                    : f.format == "vtt"          ? speech::format_vtt(t)
                    : f.format == "json"         ? speech::format_json(t, false) + "\n"
                    : f.format == "verbose_json" ? speech::format_json(t, true) + "\n"
                                                 : t.text + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

void register_transcribe(CLI::App& app) {
  auto f = std::make_shared<TranscribeFlags>();
  CLI::App* sub = add_verb(app, "transcribe", "speech to text with a Whisper model",
                           [f] { return run_transcribe(*f); });
  add_model_flags(sub, f->model);
  sub->add_option("audio", f->audio, "audio file (wav, flac, mp3, ogg, webm, m4a, ...)")->required();
  sub->add_option("--language", f->language, "language code (e.g. en); default: detect");
  sub->add_option("--task", f->task, "transcribe or translate")->capture_default_str();
  sub->add_flag("--timestamps", f->timestamps, "decode with timestamps");
  sub->add_option("--format", f->format, "text, json, verbose_json, srt or vtt")->capture_default_str();
  sub->add_option("--dump", f->dump, "write mel, encoder_out, step_logits and decoder_ids (safetensors)");
  sub->add_option("--max-tokens", f->max_tokens, "tokens per 30 s window (0: the model's limit)");
  sub->add_option("--temperature", f->temperature, "one fixed temperature (disables fallback)");
}

}  // namespace ingot::cli
