// ingot: the command-line entry point. One line on stderr and a non-zero
// exit for every error a user can cause.
#include <cstdio>

#include "cli/model_setup.h"
#include "cli/verbs.h"
#include "engine/memory.h"
#include "runtime/runtime.h"
#include "util/error.h"

#ifndef INGOT_VERSION
#define INGOT_VERSION "0.0.0"
#endif

namespace ingot::cli {

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
  register_run(app);
  register_quantize(app);
  register_gguf_export(app);
  register_get(app);
  register_ls(app);
  register_rm(app);
  register_gc(app);
  register_cache(app);
  register_bench(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return run_parsed_verb();
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
