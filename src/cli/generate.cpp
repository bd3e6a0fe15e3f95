// `ingot generate`: greedy generation through the serving engine, from token
// ids (printed as ids) or from a text prompt (tokenized with the model's
// tokenizer; the continuation is printed as text while it streams).
#include <chrono>
#include <cstdio>

#include "cli/model_setup.h"
#include "cli/text_model.h"
#include "cli/verbs.h"
#include "models/lora.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::cli {

namespace {

struct GenerateFlags {
  ModelFlags model;
  LoraFlags lora;
  std::string prompt_ids;
  std::string prompt;
  int max_tokens = 64;
  bool ignore_eos = false;
  bool chat = false;
  std::string system;
  SpeculationFlags speculation;
};

int run_generate(const GenerateFlags& f) {
  if (f.prompt.empty() == f.prompt_ids.empty()) fail(ErrorKind::InvalidArgument, "give one of --prompt or --prompt-ids");
  if (f.chat && f.prompt.empty()) fail(ErrorKind::InvalidArgument, "--chat needs --prompt TEXT");
  if (f.max_tokens < 0) fail(ErrorKind::InvalidArgument, "--max-tokens must be >= 0");
  std::vector<int32_t> ids;
  if (!f.prompt_ids.empty()) {
    ids = parse_int_list(f.prompt_ids, "--prompt-ids");
    if (ids.empty()) fail(ErrorKind::InvalidArgument, "the prompt has no tokens");
  }
  const bool text = !f.prompt.empty();
  TextModelOptions opt;
  opt.tokenizer_required = text;
  opt.engine.max_concurrency = 1;
  opt.engine.prefix_cache = false;  // one request: nothing to share
  opt.speculation = f.speculation;
  TextModel tm = load_text_model(f.model, opt);
  if (text) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!f.system.empty()) messages.push_back({{"role", "system"}, {"content", f.system}});
    messages.push_back({{"role", "user"}, {"content", f.prompt}});
    ids = f.chat ? tm.encode_chat(messages) : tm.tokenizer->encode(f.prompt, true);
    if (ids.empty()) fail(ErrorKind::InvalidArgument, "the prompt has no tokens");
  }
  check_token_ids(ids, tm.model->vocab_size());

  engine::Request req;
  req.prompt = std::move(ids);
  if (!f.lora.path.empty()) req.lora = load_lora_adapter(*tm.model, f.lora.path, {f.lora.max_rank});
  req.sampling.temperature = 0;  // greedy
  req.stop.max_tokens = f.max_tokens;
  req.stop.ignore_eos = f.ignore_eos;
  auto handle = tm.engine->submit(std::move(req));
  size_t printed = 0;
  for (engine::Chunk c;;) {
    if (!handle->next(&c, std::chrono::milliseconds(100))) continue;
    for (const auto& ev : c.tokens) {
      if (text) std::fputs(ev.text.c_str(), stdout);
      else std::printf("%s%d", printed ? "," : "", ev.token);
      ++printed;
    }
    std::fflush(stdout);
    check_chunk(c);
    if (c.finished) break;
  }
  std::printf("\n");
  tm.engine->shutdown();
  return 0;
}

}  // namespace

void register_generate(CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* sub = add_verb(app, "generate", "generate tokens greedily", [f] { return run_generate(*f); });
  add_model_flags(sub, f->model);
  add_lora_flags(sub, f->lora);
  sub->add_option("--prompt-ids", f->prompt_ids, "comma-separated token ids");
  sub->add_option("--prompt", f->prompt, "prompt text (uses the model's tokenizer)");
  sub->add_option("--max-tokens", f->max_tokens, "tokens to generate")->capture_default_str();
  sub->add_flag("--ignore-eos", f->ignore_eos, "keep going past end-of-sequence tokens");
  sub->add_flag("--chat", f->chat, "wrap --prompt in the model's chat template as a user turn");
  sub->add_option("--system", f->system, "system prompt for --chat");
  add_speculation_flags(sub, f->speculation);
}

}  // namespace ingot::cli
