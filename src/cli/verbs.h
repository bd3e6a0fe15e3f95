// Each `ingot <verb>` lives in its own file and registers a CLI11
// subcommand here; main.cpp runs whichever one was chosen.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace ingot::cli {

// A verb's work, run after parsing; returns the process exit code.
using VerbMain = std::function<int()>;

// Adds a subcommand; `run` is called if the user chose it.
CLI::App* add_verb(CLI::App& app, const std::string& name, const std::string& help, VerbMain run);
// Runs the verb the parsed command line chose (2 when none was).
int run_parsed_verb();

void register_logits(CLI::App& app);
void register_generate(CLI::App& app);
void register_transcribe(CLI::App& app);
void register_fit(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_chat_template(CLI::App& app);
void register_serve(CLI::App& app);
void register_run(CLI::App& app);
void register_quantize(CLI::App& app);
void register_gguf_export(CLI::App& app);
void register_get(CLI::App& app);
void register_ls(CLI::App& app);
void register_rm(CLI::App& app);
void register_gc(CLI::App& app);
void register_cache(CLI::App& app);
void register_bench(CLI::App& app);

// Shared flag helpers.
struct ModelFlags {
  std::string model;      // a path once parsed (repo ids and name parts are resolved)
  std::string requested;  // --model as typed
  std::string device = "auto";
  std::string dtype = "auto";
  std::string kv = "contiguous";
  int threads = 0;
  int tensor_parallel = 1;
  bool enforce_eager = false;  // no replayed decode steps: every kernel launched one by one
};
void add_model_flags(CLI::App* sub, ModelFlags& f, bool model_required = true);
// --lora PATH and --max-lora-rank for the verbs that run one adapter (logits, generate).
struct LoraFlags {
  std::string path;  // "": the base model
  int max_rank = 64;
};
void add_lora_flags(CLI::App* sub, LoraFlags& f);
// The flags of add_model_flags but --model: device, dtype, kv, threads, tensor parallelism.
void add_load_flags(CLI::App* sub, ModelFlags& f);

}  // namespace ingot::cli
