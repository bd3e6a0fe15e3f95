// `ingot generate`: greedy generation from token ids (printed as ids) or from
// a text prompt (tokenized with the model directory's tokenizer; the
// continuation is printed as text while it streams).
#include <cstdio>

#include "cli/model_setup.h"
#include "cli/verbs.h"
#include "io/config.h"
#include "ops/ops.h"
#include "template/chat_template.h"
#include "template/loader.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::cli {

namespace {

struct GenerateFlags {
  ModelFlags model;
  std::string prompt_ids;
  std::string prompt;
  int max_tokens = 64;
  bool ignore_eos = false;
  bool chat = false;
  std::string system;
};

// The prompt as the model's chat template renders one user turn (plus an
// optional system turn), ready for the assistant's reply.
std::string chat_prompt(const std::string& dir, const std::string& user, const std::string& system) {
  ChatTemplateFiles files = load_chat_template_files(dir);
  auto tmpl = ChatTemplate::compile(select_chat_template(files, "", false, dir));
  nlohmann::ordered_json req = nlohmann::ordered_json::object();
  req["messages"] = nlohmann::ordered_json::array();
  if (!system.empty()) req["messages"].push_back({{"role", "system"}, {"content", system}});
  req["messages"].push_back({{"role", "user"}, {"content", user}});
  req["add_generation_prompt"] = true;
  return tmpl->render(chat_template_context(files, req));
}

int run_generate(const GenerateFlags& f) {
  if (f.prompt.empty() == f.prompt_ids.empty()) fail(ErrorKind::InvalidArgument, "give one of --prompt or --prompt-ids");
  if (f.chat && f.prompt.empty()) fail(ErrorKind::InvalidArgument, "--chat needs --prompt TEXT");
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Tokenizer::Stream> text_out;
  std::vector<int32_t> prompt;
  if (!f.prompt.empty()) {
    tokenizer = Tokenizer::from_dir(f.model.model);
    // A rendered chat template already holds its special tokens.
    prompt = f.chat ? tokenizer->encode(chat_prompt(f.model.model, f.prompt, f.system), false)
                    : tokenizer->encode(f.prompt, true);
    text_out = tokenizer->stream(true);
  } else {
    prompt = parse_int_list(f.prompt_ids, "--prompt-ids");
  }
  if (prompt.empty()) fail(ErrorKind::InvalidArgument, "the prompt has no tokens");
  if (f.max_tokens < 0) fail(ErrorKind::InvalidArgument, "--max-tokens must be >= 0");
  auto model = load_model_from_flags(f.model);
  check_token_ids(prompt, model->vocab_size());
  GenerationConfig gen = load_generation_config(f.model.model, model->config());
  auto cache = new_cache(*model, cache_options(f.model));
  BatchInput in;
  in.tokens = prompt;
  in.seqs.push_back({cache.get(), static_cast<int64_t>(prompt.size()), false});
  std::vector<int32_t> out;
  for (int i = 0; i < f.max_tokens; ++i) {
    Tensor logits = model->forward(in);
    int32_t tok = ops::argmax(logits).to_i32_vector()[0];
    out.push_back(tok);
    if (text_out) std::fputs(text_out->push(tok).c_str(), stdout);
    else std::printf("%s%d", i ? "," : "", tok);
    std::fflush(stdout);
    bool eos = false;
    for (int32_t e : gen.eos_token_ids) eos |= e == tok;
    if (eos && !f.ignore_eos) break;
    in.tokens = {tok};
    in.seqs[0].n_tokens = 1;
  }
  if (text_out) std::fputs(text_out->flush().c_str(), stdout);
  std::printf("\n");
  return 0;
}

}  // namespace

void register_generate(CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* sub = add_verb(app, "generate", "generate tokens greedily", [f] { return run_generate(*f); });
  add_model_flags(sub, f->model);
  sub->add_option("--prompt-ids", f->prompt_ids, "comma-separated token ids");
  sub->add_option("--prompt", f->prompt, "prompt text (uses the model directory's tokenizer)");
  sub->add_option("--max-tokens", f->max_tokens, "tokens to generate")->capture_default_str();
  sub->add_flag("--ignore-eos", f->ignore_eos, "keep going past end-of-sequence tokens");
  sub->add_flag("--chat", f->chat, "wrap --prompt in the model's chat template as a user turn");
  sub->add_option("--system", f->system, "system prompt for --chat");
}

}  // namespace ingot::cli
