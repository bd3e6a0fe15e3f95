#include "cli/text_model.h"

#include <algorithm>
#include <filesystem>
#include <future>

#include "cli/model_setup.h"
#include "engine/draft_model_drafter.h"
#include "cli/prompt_cache.h"
#include "io/gguf.h"
#include "io/gguf_tokenizer.h"
#include "models/gguf_source.h"
#include "runtime/runtime.h"
#include "tokenizer/text_decoder.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::cli {

namespace {

GgufTokenizerFiles gguf_tokenizer(const std::string& path) { return gguf_tokenizer_files(*GgufFile::open(path)); }

}  // namespace

bool has_tokenizer(const std::string& model_path) {
  return is_gguf_path(model_path) || file_exists((std::filesystem::path(model_path) / "tokenizer.json").string());
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_path) {
  if (!is_gguf_path(model_path)) return Tokenizer::from_dir(model_path);
  GgufTokenizerFiles files = gguf_tokenizer(model_path);
  return Tokenizer::from_json(files.tokenizer_json, files.tokenizer_config_json);
}

ChatTemplateFiles load_template_files(const std::string& model_path) {
  if (!is_gguf_path(model_path)) return load_chat_template_files(model_path);
  return chat_template_files_from_config(gguf_tokenizer(model_path).tokenizer_config_json, model_path);
}

std::string TextModel::render_chat(const nlohmann::ordered_json& messages) const {
  if (!chat_template) select_chat_template(templates, "", false, path);  // throws: says the model has none
  nlohmann::ordered_json req = nlohmann::ordered_json::object();
  req["messages"] = messages;
  req["add_generation_prompt"] = true;
  return chat_template->render(chat_template_context(templates, req));
}

std::vector<int32_t> TextModel::encode_chat(const nlohmann::ordered_json& messages) const {
  if (!tokenizer) fail(ErrorKind::NotFound, "model ", path, " has no tokenizer");
  return tokenizer->encode(render_chat(messages), false);
}

void add_speculation_flags(CLI::App* sub, SpeculationFlags& f) {
  sub->add_option("--speculative", f.mode,
                  "speculative decoding: ngram (draft from the prompt and output), draft (a --draft-model drafts), "
                  "off, or auto (draft with --draft-model, else ngram on the CPU, else off); output is unchanged")
      ->check(CLI::IsMember({"auto", "ngram", "draft", "off"}))
      ->capture_default_str();
  sub->add_option("--num-speculative-tokens", f.tokens, "draft tokens verified per step (0: adaptive)")
      ->check(CLI::Range(0, engine::kMaxSpeculativeTokens))
      ->capture_default_str();
  sub->add_option("--draft-model", f.draft_model,
                  "a cheaper model with the same tokenizer that drafts for --speculative draft (CPU only)");
}

namespace {

// The mode `flags` ask for on the loaded model. auto speculates only on the
// CPU, whose kernels give a verified row the bits of a decoded one (so
// greedy output is unchanged, tested), and only for models whose caches can
// drop rejected tokens.
std::string speculation_mode(const SpeculationFlags& flags, const Model& model) {
  if (!flags.draft_model.empty() && flags.mode != "auto" && flags.mode != "draft")
    fail(ErrorKind::InvalidArgument, "--draft-model drafts only with --speculative draft (or auto), not '", flags.mode,
         "'");
  if (flags.mode == "draft" && flags.draft_model.empty())
    fail(ErrorKind::InvalidArgument, "--speculative draft needs --draft-model PATH");
  if (flags.mode != "auto") return flags.mode;
  if (!flags.draft_model.empty()) return "draft";
  return model.device() == Device::CPU && engine::can_speculate(model) ? "ngram" : "off";
}

// Loads --draft-model on the CPU and checks that it shares the target's
// tokenizer: the same vocabulary size and, when it has a tokenizer, the same
// ids for a probe text.
std::unique_ptr<Model> load_draft_model(const ModelFlags& target_flags, const TextModel& tm, const std::string& path) {
  if (tm.model->device() != Device::CPU)
    fail(ErrorKind::Unsupported, "draft-model speculation runs on the CPU only; the model runs on ",
         device_name(tm.model->device()), " (--speculative ngram works there, or --device cpu)");
  ModelFlags f = target_flags;
  f.model = resolve_model_arg(path);
  f.requested = path;
  f.device = "cpu";
  f.dtype = "auto";
  f.tensor_parallel = 1;
  auto draft = load_model_from_flags(f);
  if (draft->vocab_size() != tm.model->vocab_size())
    fail(ErrorKind::InvalidArgument, "the draft model's vocabulary (", draft->vocab_size(), " tokens) differs from ",
         "the model's (", tm.model->vocab_size(), "): a draft model must share the tokenizer");
  if (tm.tokenizer && has_tokenizer(f.model)) {
    const std::string probe = "Draft 12 tokens: caf\xc3\xa9, x[i] += f(y) {}\n<|im_end|>";
    if (load_tokenizer(f.model)->encode(probe, false) != tm.tokenizer->encode(probe, false))
      fail(ErrorKind::InvalidArgument, "the draft model's tokenizer differs from the model's: a draft model must ",
           "share the tokenizer");
  }
  return draft;
}

}  // namespace

TextModel load_text_model(const ModelFlags& flags, const TextModelOptions& options) {
  TextModel tm;
  tm.path = flags.model;
  // The tokenizer and chat template load on another thread while the weights
  // are mapped: for a small model they are most of the start-up time.
  struct TokenizerSide {
    std::shared_ptr<const Tokenizer> tokenizer;
    ChatTemplateFiles templates;
  };
  auto side = std::async(std::launch::async, [&] {
    TokenizerSide t;
    if (!options.tokenizer_required && !has_tokenizer(tm.path)) return t;
    t.tokenizer = load_tokenizer(tm.path);
    t.templates = load_template_files(tm.path);
    return t;
  });
  try {
    tm.model = load_model_from_flags(flags);
  } catch (...) {
    side.wait();
    throw;
  }
  TokenizerSide t = side.get();
  tm.tokenizer = std::move(t.tokenizer);
  tm.templates = std::move(t.templates);
  tm.template_source = tm.templates.default_template;
  if (!options.chat_template.empty())
    tm.template_source = file_exists(options.chat_template) ? read_text_file(options.chat_template)
                                                            : options.chat_template;
  if (!tm.template_source.empty()) tm.chat_template = ChatTemplate::compile(tm.template_source);

  tm.generation = load_generation_config(tm.path, tm.model->config());
  tm.eos = tm.generation.eos_token_ids;
  if (tm.tokenizer && !tm.tokenizer->config().eos_token.empty())
    if (auto id = tm.tokenizer->token_to_id(tm.tokenizer->config().eos_token))
      if (std::find(tm.eos.begin(), tm.eos.end(), *id) == tm.eos.end()) tm.eos.push_back(*id);

  engine::EngineOptions eo = options.engine;
  eo.kv = flags.kv;
  if (flags.enforce_eager) eo.step_graphs = "off";
  eo.speculative = speculation_mode(options.speculation, *tm.model);
  eo.num_speculative_tokens = options.speculation.tokens;
  if (eo.speculative == "draft") {
    tm.draft_model = load_draft_model(flags, tm, options.speculation.draft_model);
    eo.drafter = std::make_shared<engine::DraftModelDrafter>(*tm.draft_model, eo.kv, eo.prefill_chunk);
  }
  const int64_t model_ctx = tm.model->config().max_position_embeddings;
  if (eo.context_length <= 0 && options.context_cap > 0)
    eo.context_length = model_ctx > 0 ? std::min(model_ctx, options.context_cap) : options.context_cap;
  tm.context_length = eo.context_length > 0 ? eo.context_length : model_ctx;
  if (tm.model->device() != Device::CPU) eo.device_memory_bytes = runtime::device_memory_bytes(tm.model->device());
  if (!eo.disk_cache_dir.empty()) {  // what a prompt-cache snapshot must match
    eo.disk_cache_model = weights_fingerprint(tm.path);
    eo.disk_cache_tokenizer = tokenizer_fingerprint(tm.path, tm.template_source);
    eo.disk_cache_label = tm.path;
  }
  std::shared_ptr<const engine::TextDecoder> decoder;
  if (tm.tokenizer) decoder = std::make_shared<TokenizerTextDecoder>(tm.tokenizer);
  tm.engine = engine::start_engine(*tm.model, eo, decoder, tm.eos);
  return tm;
}

void check_chunk(const engine::Chunk& chunk) {
  if (chunk.finished && chunk.reason == engine::FinishReason::Error)
    fail(ErrorKind::Internal, "generation failed: ", chunk.error);
}

}  // namespace ingot::cli
