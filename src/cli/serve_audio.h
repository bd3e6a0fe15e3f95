// `ingot serve` with a Whisper model: alone (--model) or beside a chat model (--audio-model).
#pragma once
#include <memory>
#include <string>

#include "cli/verbs.h"
#include "ingot/engine.h"
#include "models/whisper.h"
#include "server/speech_worker.h"

namespace ingot {
class Tokenizer;
}

namespace ingot::cli {

// True when `dir` is a checkpoint folder whose config.json says model_type whisper.
bool is_whisper_dir(const std::string& dir);
// Loads the Whisper model in `dir` (device, dtype and threads from `flags`) behind a speech
// worker whose model id is `id` (default: `dir`).
std::unique_ptr<server::SpeechWorker> start_speech_worker(const std::string& dir, const ModelFlags& flags,
                                                          const std::string& id, size_t max_queue,
                                                          WhisperPrecision precision = WhisperPrecision::Float);
// For a speech-only server: an engine that refuses text requests, and a tokenizer.
std::unique_ptr<engine::Engine> no_text_engine();
std::unique_ptr<Tokenizer> tokenizer_for_speech_only(const std::string& dir);

}  // namespace ingot::cli
