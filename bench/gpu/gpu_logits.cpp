// `ingot logits` alone, for the GPU machine: the same verb (src/cli/logits.cpp)
// without the audio, server and template libraries the full CLI links, so
// parity_check.py can run the goldens on CUDA where those are not installed.
#include <cstdio>

#include "cli/verbs.h"
#include "runtime/runtime.h"
#include "util/error.h"

int main(int argc, char** argv) {
  using namespace ingot;
  try {
    runtime::init_backends();
    CLI::App app{"logits only", "gpu_logits"};
    app.require_subcommand(1);
    cli::register_logits(app);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      return app.exit(e);
    }
    return cli::run_parsed_verb();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_logits: error: %s\n", e.what());
    return 1;
  }
}
