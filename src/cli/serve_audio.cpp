// The speech side of `ingot serve`: a Whisper checkpoint behind the speech
// worker, and the stand-ins used when a Whisper model is the only model.
#include "cli/serve_audio.h"

#include <filesystem>

#include "backend/cpu/thread_pool.h"
#include "cli/model_setup.h"
#include "io/config.h"
#include "models/whisper.h"
#include "speech/transcribe.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::cli {

namespace {

// The engine a speech-only server holds: every text request is refused.
class NoTextEngine : public engine::Engine {
 public:
  std::shared_ptr<engine::RequestHandle> submit(engine::Request) override {
    fail(ErrorKind::Unsupported, "this server has no text model");
  }
  engine::Stats stats() const override { return {}; }
  const Model& model() const override { fail(ErrorKind::Unsupported, "this server has no text model"); }
  void shutdown() override {}
};

}  // namespace

bool is_whisper_dir(const std::string& dir) {
  if (!is_directory(dir) || !file_exists((std::filesystem::path(dir) / "config.json").string())) return false;
  return load_model_config(dir).model_type == "whisper";
}

std::unique_ptr<server::SpeechWorker> start_speech_worker(const std::string& dir, const ModelFlags& flags,
                                                          const std::string& id, size_t max_queue,
                                                          WhisperPrecision precision) {
  if (!is_whisper_dir(dir)) fail(ErrorKind::InvalidArgument, dir, ": not a Whisper checkpoint (config.json model_type)");
  if (flags.threads > 0) cpu::set_num_threads(flags.threads);
  std::shared_ptr<const WhisperModel> model = WhisperModel::load(dir, load_options(flags), precision);
  auto gen = std::make_shared<const speech::WhisperGeneration>(speech::load_whisper_generation(dir, model->model_config()));
  std::shared_ptr<const Tokenizer> tok;
  if (file_exists((std::filesystem::path(dir) / "tokenizer.json").string())) tok = Tokenizer::from_dir(dir);
  speech::TextFn text = tok ? speech::TextFn([tok](const std::vector<int32_t>& ids) { return tok->decode(ids, true); })
                            : text_decoder_for(dir);
  auto run = [model, gen, text](const server::SpeechJob& job) {
    return speech::transcribe(*model, *gen, *job.audio, job.options, text);
  };
  // Runs on the HTTP thread before the job queues, so a request that cannot be followed gets its 400 at once.
  auto prepare = [model, gen, tok](server::SpeechJob& job) {
    if (!trim(job.prompt).empty()) {
      if (!tok) throw speech::OptionError("prompt", "this model has no tokenizer, so it takes no text prompt");
      // The reference tokenizes the prompt with a leading space, as text that followed earlier speech.
      job.options.prompt_ids = tok->encode(" " + std::string(trim(job.prompt)), false);
    }
    speech::check_options(job.options, *model, *gen);
  };
  std::filesystem::path p(dir);
  std::string base = p.filename().empty() ? p.parent_path().filename().string() : p.filename().string();
  return std::make_unique<server::SpeechWorker>(run, prepare, id.empty() ? dir : id,
                                                std::vector<std::string>{dir, base}, max_queue);
}

std::unique_ptr<engine::Engine> no_text_engine() { return std::make_unique<NoTextEngine>(); }

std::unique_ptr<Tokenizer> tokenizer_for_speech_only(const std::string& dir) {
  if (file_exists((std::filesystem::path(dir) / "tokenizer.json").string())) return Tokenizer::from_dir(dir);
  // No text route runs on a speech-only server; the service still holds a tokenizer.
  return Tokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {}, "merges": []}})", "{}");
}

}  // namespace ingot::cli
