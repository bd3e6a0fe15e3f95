// `ingot logits` alone, for the GPU machine: the same verb (src/cli/logits.cpp)
// without the audio, server and template libraries the full CLI links, so
// parity_check.py can run the goldens on CUDA where those are not installed.
#include <cstdio>
#include <map>

#include "cli/verbs.h"
#include "runtime/runtime.h"
#include "util/error.h"

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
  auto* m = sub->add_option("--model,-m", f.model, "model directory");
  if (required) m->required();
  sub->add_option("--device", f.device, "cpu or cuda");
  sub->add_option("--dtype", f.dtype, "auto, float32 or bfloat16");
  sub->add_option("--kv", f.kv, "KV cache kind");
  sub->add_option("--threads", f.threads, "CPU threads (0: all cores)");
}

}  // namespace ingot::cli

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
    for (auto& [sub, fn] : cli::verb_mains())
      if (sub->parsed()) return fn();
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_logits: error: %s\n", e.what());
    return 1;
  }
}
