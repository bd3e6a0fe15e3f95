// The verb table and the model flags every model verb shares (the ingot CLI
// and the logits-only GPU binary both use them).
#include <map>

#include "cli/model_setup.h"
#include "cli/verbs.h"

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
  add_load_flags(sub, f);
}

void add_lora_flags(CLI::App* sub, LoraFlags& f) {
  sub->add_option("--lora", f.path, "LoRA adapter folder (PEFT or MLX-LM) applied over the model, unmerged");
  sub->add_option("--max-lora-rank", f.max_rank, "largest adapter rank accepted")->capture_default_str();
}

void add_load_flags(CLI::App* sub, ModelFlags& f) {
  sub->add_option("--device", f.device, "auto (CUDA when a usable GPU is there and the model fits), cpu or cuda")
      ->capture_default_str();
  sub->add_option("--dtype", f.dtype, "auto, float32 or bfloat16")->capture_default_str();
  sub->add_option("--kv", f.kv, "KV cache: contiguous, paged (the block pool read in place), paged-gather, kv8 or kv4")->capture_default_str();
  sub->add_option("--threads", f.threads, "CPU threads (0: all cores)");
  sub->add_option("--tensor-parallel,--tensor-parallel-size", f.tensor_parallel,
                  "split the model over N ranks (Megatron-style)")->capture_default_str();
  sub->add_flag("--enforce-eager", f.enforce_eager,
                "never replay captured decode steps (CUDA graphs): launch every kernel one by one");
}

int run_parsed_verb() {
  for (auto& [sub, fn] : verb_mains())
    if (sub->parsed()) return fn();
  return 2;
}

}  // namespace ingot::cli
