// `ingot logits`: the parity contract of PARITY.md. Prompt logits for every
// prompt position, then greedy decoding through the KV cache, recording the
// logits that chose each token after the first.
#include <cstring>

#include "cli/model_setup.h"
#include "cli/verbs.h"
#include "io/safetensors.h"
#include "models/lora.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::cli {

namespace {

struct LogitsFlags {
  ModelFlags model;
  LoraFlags lora;
  std::string prompt_ids;
  int steps = 0;
  std::string out;
};

int run_logits(const LogitsFlags& f) {
  std::vector<int32_t> prompt = parse_int_list(f.prompt_ids, "--prompt-ids");
  if (prompt.empty()) fail(ErrorKind::InvalidArgument, "--prompt-ids is empty");
  if (f.steps < 0) fail(ErrorKind::InvalidArgument, "--steps must be >= 0");
  auto model = load_model_from_flags(f.model);
  std::shared_ptr<const LoraAdapter> adapter;
  if (!f.lora.path.empty()) adapter = load_lora_adapter(*model, f.lora.path, {f.lora.max_rank});
  const int64_t V = model->vocab_size();
  check_token_ids(prompt, V);
  auto cache = new_cache(*model, cache_options(f.model));

  BatchInput in;
  in.add(cache.get(), prompt, true, adapter.get());
  Tensor prompt_logits = model->forward(in).to(Device::CPU);

  std::vector<int32_t> greedy;
  std::vector<float> steps;
  Tensor last = prompt_logits.slice(0, prompt_logits.dim(0) - 1, prompt_logits.dim(0));
  for (int i = 0; i < f.steps; ++i) {
    int32_t tok = ops::argmax(last).to_i32_vector()[0];
    greedy.push_back(tok);
    if (i == f.steps - 1) break;
    BatchInput step;
    step.add(cache.get(), std::span(&tok, 1), false, adapter.get());
    last = model->forward(step).to(Device::CPU);
    std::vector<float> row = last.to_f32_vector();
    steps.insert(steps.end(), row.begin(), row.end());
  }
  int64_t n_steps = f.steps > 0 ? f.steps - 1 : 0;
  std::vector<std::pair<std::string, Tensor>> out = {
      {"prompt_logits", prompt_logits.contiguous()},
      {"step_logits", Tensor::from_f32(steps, {n_steps, V})},
      {"greedy_ids", Tensor::from_i32(greedy, {static_cast<int64_t>(greedy.size())})},
  };
  write_safetensors(f.out, out);
  return 0;
}

}  // namespace

void register_logits(CLI::App& app) {
  auto f = std::make_shared<LogitsFlags>();
  CLI::App* sub = add_verb(app, "logits", "prompt and greedy-step logits to a safetensors file",
                           [f] { return run_logits(*f); });
  f->model.device = "cpu";  // the parity contract (PARITY.md): the CPU unless --device says otherwise
  add_model_flags(sub, f->model);
  add_lora_flags(sub, f->lora);
  sub->add_option("--prompt-ids", f->prompt_ids, "comma-separated token ids")->required();
  sub->add_option("--steps", f->steps, "greedy tokens to generate")->required();
  sub->add_option("--out", f->out, "output .safetensors path")->required();
}

}  // namespace ingot::cli
