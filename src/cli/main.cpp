// ingot: the command-line entry point. One line on stderr and a non-zero
// exit for every error a user can cause.
#include <cstdio>
#include <map>

#include "cli/model_setup.h"
#include "cli/verbs.h"
#include "engine/memory.h"
#include "runtime/runtime.h"
#include "util/error.h"

#ifndef INGOT_VERSION
#define INGOT_VERSION "0.0.0"
#endif

namespace ingot::cli {

namespace {
std::map<CLI::App*, VerbMain>& verb_mains() {
  static std::map<CLI::App*, VerbMain> m;
  return m;
}
}  // namespace

CLI::App* add_verb(CLI::App& app, const std::string& name, const std::string& help, VerbMain run) {
  CLI::App* sub = app.add_subcommand(name, help);
  verb_mains()[sub] = std::move(run);
  return sub;
}

void add_model_flags(CLI::App* sub, ModelFlags& f, bool required) {
  auto* m = sub->add_option("--model,-m", f.model,
                            "model directory or GGUF file, a cached repo id, or part of a local model's name");
  m->transform([&f](std::string s) {
    f.requested = s;
    return resolve_model_arg(s);
  });
  if (required) m->required();
  sub->add_option("--device", f.device, "cpu or cuda")->capture_default_str();
  sub->add_option("--dtype", f.dtype, "auto, float32 or bfloat16")->capture_default_str();
  sub->add_option("--kv", f.kv, "KV cache: contiguous, paged, paged-direct, kv8 or kv4")->capture_default_str();
  sub->add_option("--threads", f.threads, "CPU threads (0: all cores)");
  sub->add_option("--tensor-parallel,--tensor-parallel-size", f.tensor_parallel,
                  "split the model over N ranks (Megatron-style)")->capture_default_str();
}

int run(int argc, char** argv) {
  CLI::App app{"ingot: LLM inference engine and server", "ingot"};
  app.set_version_flag("--version,-V", std::string("ingot ") + INGOT_VERSION);
  app.require_subcommand(1);
  register_logits(app);
  register_generate(app);
  register_transcribe(app);
  register_fit(app);
  register_tokenize(app);
  register_chat_template(app);
  register_serve(app);
  register_quantize(app);
  register_gguf_export(app);
  register_get(app);
  register_ls(app);
  register_rm(app);
  register_gc(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, fn] : verb_mains())
    if (sub->parsed()) return fn();
  return 2;
}

}  // namespace ingot::cli

int main(int argc, char** argv) {
  try {
    ingot::runtime::init_backends();
    ingot::engine::process_baseline_bytes();  // the runtime's own footprint, before any model loads
    return ingot::cli::run(argc, argv);
  } catch (const ingot::Error& e) {
    std::fprintf(stderr, "ingot: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ingot: error: %s\n", e.what());
    return 1;
  }
}
