// `ingot serve`: the OpenAI- and Anthropic-compatible HTTP server. Accepts
// mlx_lm.server's flags with the same meaning, so it drops in where that runs.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/model_setup.h"
#include "cli/prompt_cache.h"
#include "cli/serve_audio.h"
#include "cli/text_model.h"
#include "cli/verbs.h"
#include "ingot/engine.h"
#include "models/gguf_source.h"
#include "models/lora.h"
#include "registry/cache_layout.h"
#include "runtime/runtime.h"
#include "server/embeddings.h"
#include "server/http_app.h"
#include "server/lora_registry.h"
#include "server/service.h"
#include "util/error.h"
#include "util/log.h"
#include "util/strings.h"

namespace ingot::cli {

namespace {

struct ServeFlags {
  ModelFlags model;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  int max_concurrency = 0;
  int decode_concurrency = 0;
  int64_t max_queue = 256;
  double memory_budget_gb = 0;
  int64_t ctx = 0;
  std::string cors;
  double max_body_mb = 16;
  std::string served_model_name;
  bool strict_model_name = false;
  std::string tool_parser = "auto";
  int http_threads = 128;
  int64_t max_connections = 4096, max_connections_per_client = 1024;
  int header_timeout = 10, keep_alive_timeout = 10, io_timeout = 30;
  // mlx_lm.server flags.
  double temp = 0.0, top_p = 1.0, min_p = 0.0;
  int top_k = 0;
  int64_t max_tokens = 512;
  std::string adapter_path, chat_template, chat_template_args;
  int64_t prompt_cache_size = -1;
  std::string cache_dir;
  bool no_disk_cache = false;
  double cache_disk_gb = 10;
  std::string log_level = "info";
  bool trust_remote_code = false, use_default_chat_template = false;
  std::string audio_model;
  int64_t audio_queue = 4;
  std::string audio_weights = "float32";
  double audio_max_seconds = server::ServeOptions{}.audio_max_seconds;
  // LoRA adapters.
  std::vector<std::string> loras;  // NAME=PATH
  int max_loras = 8, max_lora_rank = 64;
  bool allow_runtime_lora = false;
  SpeculationFlags speculation;
};

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

// Other names a request may use for the model under --strict-model-name: the
// path as given and as resolved, its file or folder name, and its stem.
std::vector<std::string> served_model_aliases(const ModelFlags& m) {
  std::filesystem::path mp(m.model);
  std::string base = mp.filename().empty() ? mp.parent_path().filename().string() : mp.filename().string();
  std::vector<std::string> names = {m.model, base, mp.stem().string(), registry::model_name_for_path(mp)};
  if (!m.requested.empty()) names.push_back(m.requested);
  return names;
}

// The adapter registry of a text model that takes adapters (null otherwise),
// holding --lora NAME=PATH and --adapter-path (the default for every request).
std::unique_ptr<server::LoraRegistry> start_loras(const ServeFlags& f, const Model* model) {
  const bool asked = !f.loras.empty() || !f.adapter_path.empty();
  if (f.max_loras < 1) fail(ErrorKind::InvalidArgument, "--max-loras must be >= 1");
  if (f.max_lora_rank < 1) fail(ErrorKind::InvalidArgument, "--max-lora-rank must be >= 1");
  LoraTargets targets;
  if (!model || !model->lora_targets(targets)) {
    if (asked) fail(ErrorKind::Unsupported, "--lora / --adapter-path: this model takes no LoRA adapters");
    return nullptr;
  }
  const LoraLimits limits{f.max_lora_rank};
  auto reg = std::make_unique<server::LoraRegistry>(
      [model, limits](const std::string& path) { return load_lora_adapter(*model, path, limits); },
      static_cast<size_t>(f.max_loras));
  for (const std::string& spec : f.loras) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      fail(ErrorKind::InvalidArgument, "--lora expects NAME=PATH, got '", spec, "'");
    reg->add(spec.substr(0, eq), spec.substr(eq + 1));
  }
  if (!f.adapter_path.empty()) {
    std::filesystem::path p(f.adapter_path);
    std::string name = (p.filename().empty() ? p.parent_path() : p).filename().string();
    if (name.empty() || reg->has(name)) name = "adapter";
    reg->add(name, f.adapter_path);
    reg->set_default(name);
  }
  return reg;
}

server::ToolFormat parse_tool_parser(const std::string& name, const std::string& tmpl) {
  if (name == "auto") return server::detect_tool_format(tmpl);
  for (auto f : {server::ToolFormat::None, server::ToolFormat::Hermes, server::ToolFormat::Llama3Json,
                 server::ToolFormat::Mistral, server::ToolFormat::Gemma})
    if (name == server::tool_format_name(f)) return f;
  fail(ErrorKind::InvalidArgument, "--tool-parser must be auto, none, hermes, llama3_json, mistral or gemma, got '",
       name, "'");
}

int run_serve(const ServeFlags& f) {
  log::set_level(log::parse_level(f.log_level));
  if (f.port < 0 || f.port > 65535) fail(ErrorKind::InvalidArgument, "--port must be in [0, 65535]");
  if (f.max_body_mb <= 0) fail(ErrorKind::InvalidArgument, "--max-body-mb must be > 0");
  if (f.http_threads < 1) fail(ErrorKind::InvalidArgument, "--http-threads must be >= 1");
  if (f.max_connections < 1 || f.max_connections_per_client < 1)
    fail(ErrorKind::InvalidArgument, "--max-connections and --max-connections-per-client must be >= 1");
  if (f.header_timeout < 1 || f.keep_alive_timeout < 1 || f.io_timeout < 1)
    fail(ErrorKind::InvalidArgument, "--header-timeout, --keep-alive-timeout and --io-timeout must be >= 1 second");
  if (f.temp < 0 || f.top_p <= 0 || f.top_p > 1 || f.min_p < 0 || f.min_p > 1 || f.top_k < 0 || f.max_tokens < 1)
    fail(ErrorKind::InvalidArgument, "sampling defaults out of range (--temp >= 0, 0 < --top-p <= 1, 0 <= --min-p <= 1, "
                                     "--top-k >= 0, --max-tokens >= 1)");
  nlohmann::json template_args = nlohmann::json::object();
  if (!f.chat_template_args.empty()) {
    template_args = nlohmann::json::parse(f.chat_template_args, nullptr, false);
    if (!template_args.is_object()) fail(ErrorKind::InvalidArgument, "--chat-template-args must be a JSON object");
  }
  // A Whisper checkpoint as --model serves speech only.
  const bool speech_only = !is_gguf_path(f.model.model) && is_whisper_dir(f.model.model);
  if (speech_only && !f.audio_model.empty())
    fail(ErrorKind::InvalidArgument, "--audio-model: --model is already a Whisper model");
  if (f.audio_queue < 1) fail(ErrorKind::InvalidArgument, "--audio-queue must be >= 1");
  if (!(f.audio_max_seconds > 0)) fail(ErrorKind::InvalidArgument, "--audio-max-seconds must be > 0");
  TextModel text;
  std::unique_ptr<Tokenizer> speech_tok;
  if (speech_only) {
    speech_tok = tokenizer_for_speech_only(f.model.model);
  } else {
    TextModelOptions to;
    to.chat_template = f.chat_template;
    to.speculation = f.speculation;
    engine::EngineOptions& eo = to.engine;
    int conc = f.max_concurrency > 0 ? f.max_concurrency : f.decode_concurrency;
    if (conc > 0) eo.max_concurrency = conc;
    if (f.max_queue < 0) fail(ErrorKind::InvalidArgument, "--max-queue must be >= 0");
    eo.max_queue = f.max_queue;
    eo.context_length = f.ctx;
    eo.memory_budget_gb = f.memory_budget_gb;
    if (f.prompt_cache_size == 0) eo.prefix_cache = false;
    if (f.prompt_cache_size > 0) eo.prefix_cache_entries = f.prompt_cache_size;
    if (f.cache_disk_gb <= 0) fail(ErrorKind::InvalidArgument, "--cache-disk-gb must be > 0");
    if (!f.no_disk_cache && eo.prefix_cache) {
      eo.disk_cache_dir = f.cache_dir.empty() ? default_prompt_cache_dir() : f.cache_dir;
      eo.disk_cache_gb = f.cache_disk_gb;
    }
    text = load_text_model(f.model, to);
  }
  const Tokenizer& tok = speech_only ? *speech_tok : *text.tokenizer;
  const std::string& tmpl_src = text.template_source;
  std::unique_ptr<engine::Engine> speech_engine = speech_only ? no_text_engine() : nullptr;
  engine::Engine& eng = speech_only ? *speech_engine : *text.engine;
  const int64_t model_ctx = speech_only ? 0 : text.model->config().max_position_embeddings;

  server::ServeOptions so;
  so.model_id = !f.served_model_name.empty() ? f.served_model_name : registry::model_name_for_path(f.model.model);
  so.model_aliases = served_model_aliases(f.model);
  so.strict_model_name = f.strict_model_name;
  so.host = f.host;
  so.port = f.port;
  so.api_key = f.api_key;
  so.cors_origin = f.cors;
  so.max_body_bytes = static_cast<size_t>(f.max_body_mb * 1024 * 1024);
  so.audio_max_seconds = f.audio_max_seconds;
  so.context_length = f.ctx > 0 ? f.ctx : model_ctx;
  if (so.context_length <= 0) so.context_length = 4096;
  so.http_threads = f.http_threads;
  so.max_connections = static_cast<size_t>(f.max_connections);
  so.max_connections_per_client = static_cast<size_t>(f.max_connections_per_client);
  so.header_timeout_s = f.header_timeout;
  so.keep_alive_timeout_s = f.keep_alive_timeout;
  so.io_timeout_s = f.io_timeout;
  so.temperature = static_cast<float>(f.temp);
  so.top_p = static_cast<float>(f.top_p);
  so.min_p = static_cast<float>(f.min_p);
  so.top_k = f.top_k;
  so.max_tokens = f.max_tokens;
  so.chat_template_args = template_args;
  so.tool_format = parse_tool_parser(f.tool_parser, tmpl_src);
  so.embedding_pooling = server::detect_pooling(f.model.model);
  so.template_thinks = tmpl_src.find("<think>") != std::string::npos;

  so.text_model = !speech_only;
  so.allow_runtime_lora = f.allow_runtime_lora;
  std::unique_ptr<server::LoraRegistry> loras = start_loras(f, speech_only ? nullptr : text.model.get());
  if (loras)
    for (const auto& a : loras->list())
      if (a.name == so.model_id) fail(ErrorKind::InvalidArgument, "--lora: '", a.name, "' is the base model's name");

  std::unique_ptr<server::SpeechWorker> speech;
  const WhisperPrecision audio_precision = parse_whisper_precision(f.audio_weights);
  if (speech_only)
    speech = start_speech_worker(f.model.model, f.model, so.model_id, static_cast<size_t>(f.audio_queue), audio_precision);
  else if (!f.audio_model.empty())
    speech = start_speech_worker(f.audio_model, f.model, registry::model_name_for_path(f.audio_model),
                                 static_cast<size_t>(f.audio_queue), audio_precision);
  server::Service svc(eng, tok, text.chat_template, so);
  svc.set_speech(speech.get());
  svc.set_loras(loras.get());
  server::Router router(svc);
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  // A handler that does not watch for its client going away (a long
  // transcription) could delay the stop; it ends within a bounded time regardless.
  std::thread([] {
    while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::seconds(3));
    std::fflush(stdout);
    std::_Exit(0);
  }).detach();
  const DeviceChoice dev = resolve_device(f.model);
  const std::string on = std::string(" on ") + device_name(dev.device) + " (" + dev.why + ")";
  bool bound = server::serve_http(router, svc, [&](int port) {
    if (speech_only)
      std::printf("ingot: serving %s at http://%s:%d (OpenAI /v1/audio/transcriptions)%s\n", so.model_id.c_str(),
                  f.host.c_str(), port, on.c_str());
    else
      std::printf("ingot: serving %s at http://%s:%d (OpenAI /v1/chat/completions, Anthropic /v1/messages)%s%s\n",
                  so.model_id.c_str(), f.host.c_str(), port, speech ? " and /v1/audio/transcriptions" : "", on.c_str());
    std::fflush(stdout);
  }, g_stop);
  eng.shutdown();
  if (!bound) fail(ErrorKind::Io, "cannot listen on ", f.host, ":", f.port, " (address in use or not permitted)");
  return 0;
}

}  // namespace

void register_serve(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  f->model.kv = "paged";
  CLI::App* sub = add_verb(app, "serve", "OpenAI- and Anthropic-compatible HTTP server", [f] { return run_serve(*f); });
  add_model_flags(sub, f->model);
  sub->add_option("--host", f->host, "address to bind (loopback by default)")->capture_default_str();
  sub->add_option("--port", f->port, "port (0: any free port)")->capture_default_str();
  sub->add_option("--api-key", f->api_key, "require this key (Authorization: Bearer or x-api-key) on every route but /health");
  sub->add_option("--max-concurrency", f->max_concurrency, "sequences decoding at once");
  sub->add_option("--decode-concurrency", f->decode_concurrency, "mlx_lm.server name for --max-concurrency");
  sub->add_option("--max-queue", f->max_queue, "waiting requests beyond which new ones get 429")->capture_default_str();
  sub->add_option("--memory-budget", f->memory_budget_gb, "GB for weights + KV cache (0: machine memory)");
  sub->add_option("--ctx", f->ctx, "context length (0: the model's)");
  sub->add_option("--cors", f->cors, "allow browser requests from ORIGIN ('*' for any; comma-separated list; default off)")
      ->type_name("ORIGIN");
  sub->add_option("--max-body-mb", f->max_body_mb, "largest request body in MiB")->capture_default_str();
  sub->add_option("--served-model-name", f->served_model_name,
                  "model id reported (default: the repo id, or the file or folder name without .gguf)");
  sub->add_flag("--strict-model-name", f->strict_model_name,
                "answer 404 to requests naming another model (default: any name means the served model)");
  sub->add_option("--tool-parser", f->tool_parser, "auto, none, hermes, llama3_json, mistral or gemma")->capture_default_str();
  sub->add_option("--http-threads", f->http_threads, "threads running request handlers (idle connections use none)")
      ->capture_default_str();
  sub->add_option("--max-connections", f->max_connections, "open connections in total; past it new ones get 503")
      ->capture_default_str();
  sub->add_option("--max-connections-per-client", f->max_connections_per_client,
                  "open connections from one client address; past it new ones get 503")->capture_default_str();
  sub->add_option("--header-timeout", f->header_timeout, "seconds a request's head may take to arrive (then 408, closed)")
      ->capture_default_str();
  sub->add_option("--keep-alive-timeout", f->keep_alive_timeout, "seconds an idle connection is kept open")
      ->capture_default_str();
  sub->add_option("--io-timeout", f->io_timeout,
                  "seconds an upload or response may make no progress (a stalled stream's generation is cancelled)")
      ->capture_default_str();
  sub->add_option("--temp", f->temp, "default sampling temperature")->capture_default_str();
  sub->add_option("--top-p", f->top_p, "default nucleus sampling top-p")->capture_default_str();
  sub->add_option("--top-k", f->top_k, "default top-k (0: off)")->capture_default_str();
  sub->add_option("--min-p", f->min_p, "default min-p")->capture_default_str();
  sub->add_option("--max-tokens", f->max_tokens, "default max tokens to generate")->capture_default_str();
  sub->add_option("--adapter-path", f->adapter_path, "LoRA adapter folder applied to every request that names no other adapter");
  sub->add_option("--lora", f->loras, "NAME=PATH: a LoRA adapter requests select with \"model\": \"NAME\" (repeatable)")
      ->type_name("NAME=PATH");
  sub->add_option("--max-loras", f->max_loras, "LoRA adapters held in memory at once (least recently used dropped, "
                  "reloaded on use)")->capture_default_str();
  sub->add_option("--max-lora-rank", f->max_lora_rank, "largest LoRA rank accepted")->capture_default_str();
  sub->add_flag("--allow-runtime-lora", f->allow_runtime_lora,
                "allow /v1/load_lora_adapter and /v1/unload_lora_adapter without --api-key");
  add_speculation_flags(sub, f->speculation);
  sub->add_option("--chat-template", f->chat_template, "chat template: a file or the template text");
  sub->add_option("--chat-template-args", f->chat_template_args, "JSON object of extra template variables");
  sub->add_option("--prompt-cache-size", f->prompt_cache_size, "cached prompts kept (LRU, default 64); 0 turns the prefix cache off");
  sub->add_option("--cache-dir", f->cache_dir,
                  "folder of the prompt cache's disk tier (default: $XDG_CACHE_HOME/ingot/prompt-cache)");
  sub->add_flag("--no-disk-cache", f->no_disk_cache, "keep cached prompts in RAM only (lost at exit)");
  sub->add_option("--cache-disk-gb", f->cache_disk_gb, "GB of prompt-cache files kept per model (LRU by last use)")
      ->capture_default_str();
  sub->add_option("--audio-model", f->audio_model, "Whisper checkpoint served at /v1/audio/* beside the chat model");
  sub->add_option("--audio-queue", f->audio_queue, "transcriptions waiting beyond which new ones get 429")
      ->capture_default_str();
  sub->add_option("--audio-max-seconds", f->audio_max_seconds, "/v1/audio/*: refuse audio longer than this")
      ->capture_default_str();
  sub->add_option("--audio-weights", f->audio_weights, "the Whisper model's weights: float32, or int8 for its decoder")
      ->capture_default_str();
  sub->add_option("--log-level", f->log_level, "debug, info, warning or error")->capture_default_str();
  sub->add_flag("--trust-remote-code", f->trust_remote_code, "accepted for mlx_lm.server compatibility (no effect)");
  sub->add_flag("--use-default-chat-template", f->use_default_chat_template,
                "accepted for mlx_lm.server compatibility (the tokenizer's template is the default)");
}

}  // namespace ingot::cli
