// `ingot transcribe`: speech to text with a Whisper checkpoint.
#include <cstdio>

#include "audio/decode.h"
#include "backend/cpu/thread_pool.h"
#include "cli/model_setup.h"
#include "cli/verbs.h"
#include "io/safetensors.h"
#include "speech/transcribe.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::cli {

namespace {

struct TranscribeFlags {
  ModelFlags model;
  std::string audio;
  std::string language;
  std::string task = "transcribe";
  bool timestamps = false, word_timestamps = false, vad = false, no_condition = false;
  std::string format = "text";
  std::string dump;
  std::string prompt;
  std::string weights = "float32";
  int64_t max_tokens = 0;
  float temperature = -1;
  int beam_size = 1, best_of = 5;
  double patience = 1.0, length_penalty = -1, no_speech_threshold = 0.6;
  double max_audio_seconds = audio::DecodeLimits{}.max_seconds;
};

int run_transcribe(const TranscribeFlags& f) {
  if (f.format != "text" && f.format != "json" && f.format != "verbose_json" && f.format != "srt" && f.format != "vtt")
    fail(ErrorKind::InvalidArgument, "--format must be text, json, verbose_json, srt or vtt");
  if (f.max_tokens < 0) fail(ErrorKind::InvalidArgument, "--max-tokens must be >= 0");
  if (f.model.tensor_parallel != 1)
    fail(ErrorKind::Unsupported, "--tensor-parallel is not supported for Whisper models");
  if (f.model.threads < 0) fail(ErrorKind::InvalidArgument, "--threads must be >= 0");
  if (!(f.max_audio_seconds > 0)) fail(ErrorKind::InvalidArgument, "--max-audio-seconds must be > 0");
  if (!f.dump.empty() && f.beam_size > 1) fail(ErrorKind::InvalidArgument, "--dump records the greedy pass: leave --beam-size at 1");
  if (f.model.threads > 0) cpu::set_num_threads(f.model.threads);
  const WhisperPrecision precision = parse_whisper_precision(f.weights);
  speech::TranscribeOptions opt;
  opt.language = f.language;
  opt.task = f.task;
  opt.word_timestamps = f.word_timestamps;
  opt.timestamps = f.timestamps || f.word_timestamps || f.format == "srt" || f.format == "vtt" || f.format == "verbose_json";
  opt.max_new_tokens = f.max_tokens;
  if (f.temperature >= 0) opt.temperatures = {f.temperature};
  opt.beam_size = f.beam_size;
  opt.best_of = f.best_of;
  opt.patience = f.patience;
  if (f.length_penalty >= 0) opt.length_penalty = f.length_penalty;
  opt.no_speech_threshold = f.no_speech_threshold;
  opt.condition_on_previous_text = !f.no_condition;
  opt.vad = f.vad;
  auto model = WhisperModel::load(f.model.model, load_options(f.model), precision);
  auto gen = speech::load_whisper_generation(f.model.model, model->model_config());
  if (!trim(f.prompt).empty()) {
    if (!file_exists(f.model.model + "/tokenizer.json"))
      fail(ErrorKind::InvalidArgument, "--prompt needs the model's tokenizer.json");
    // The reference tokenizes the prompt with a leading space, as text that followed earlier speech.
    opt.prompt_ids = Tokenizer::from_dir(f.model.model)->encode(" " + std::string(trim(f.prompt)), false);
  }
  speech::check_options(opt, *model, gen);
  // Read from the file a window at a time: an hour of audio never sits in memory.
  audio::DecodeLimits lim;
  lim.max_seconds = f.max_audio_seconds;
  std::unique_ptr<audio::PcmReader> reader = audio::PcmReader::open_file(f.audio, 16000, lim);
  speech::TextFn text = text_decoder_for(f.model.model);
  speech::Dump dump;
  speech::Transcript t = speech::transcribe(*model, gen, *reader, opt, text, f.dump.empty() ? nullptr : &dump);
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
                    : f.format == "verbose_json" ? speech::format_json(t, true, true, f.word_timestamps) + "\n"
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
  sub->add_flag("--word-timestamps", f->word_timestamps, "word-level timestamps (verbose_json lists the words)");
  sub->add_option("--format", f->format, "text, json, verbose_json, srt or vtt")->capture_default_str();
  sub->add_option("--prompt", f->prompt, "text that the speech follows (names, spelling, style)");
  sub->add_option("--beam-size", f->beam_size, "beams at temperature 0 (1: greedy)")->capture_default_str();
  sub->add_option("--best-of", f->best_of, "samples per fallback temperature above 0")->capture_default_str();
  sub->add_option("--patience", f->patience, "beam search stops after beam-size x patience finished sequences")
      ->capture_default_str();
  sub->add_option("--length-penalty", f->length_penalty,
                  "rank sequences by log-prob / ((5 + length) / 6) ^ this (default: log-prob / length)");
  sub->add_option("--no-speech-threshold", f->no_speech_threshold,
                  "skip windows whose no-speech probability is above this (and whose text is unsure)")
      ->capture_default_str();
  sub->add_flag("--no-condition-on-previous-text", f->no_condition, "windows do not see the text before them");
  sub->add_flag("--vad", f->vad, "transcribe only the stretches with sound (energy voice-activity detection)");
  sub->add_option("--weights", f->weights, "float32, or int8 for the decoder's matrices")->capture_default_str();
  sub->add_option("--dump", f->dump, "write mel, encoder_out, step_logits and decoder_ids (safetensors)");
  sub->add_option("--max-tokens", f->max_tokens, "tokens per 30 s window (0: the model's limit)");
  sub->add_option("--temperature", f->temperature, "one fixed temperature (disables fallback)");
  sub->add_option("--max-audio-seconds", f->max_audio_seconds, "refuse audio longer than this")->capture_default_str();
}

}  // namespace ingot::cli
