// ingot/model.h over the loader the CLI's text verbs use (cli/text_model.h),
// so an embedding program gets exactly what `ingot serve` runs.
#include "ingot/model.h"

#include <nlohmann/json.hpp>

#include "cli/model_setup.h"
#include "cli/text_model.h"
#include "runtime/runtime.h"
#include "util/error.h"

namespace ingot {

namespace {

class Loaded final : public LoadedModel {
 public:
  explicit Loaded(cli::TextModel tm) : tm_(std::move(tm)) {}

  engine::Engine& engine() override { return *tm_.engine; }
  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const override {
    return tokenizer().encode(text, add_special_tokens);
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override {
    return tokenizer().decode(ids, skip_special_tokens);
  }
  std::vector<int32_t> chat_prompt(const std::vector<ChatMessage>& messages) const override {
    nlohmann::ordered_json m = nlohmann::ordered_json::array();
    for (const auto& msg : messages) {
      if (msg.role.empty()) fail(ErrorKind::InvalidArgument, "a chat message needs a role");
      m.push_back({{"role", msg.role}, {"content", msg.content}});
    }
    return tm_.encode_chat(m);
  }
  const std::vector<int32_t>& eos_token_ids() const override { return tm_.eos; }
  int64_t context_length() const override { return tm_.context_length; }
  const std::string& path() const override { return tm_.path; }

 private:
  const Tokenizer& tokenizer() const {
    if (!tm_.tokenizer) fail(ErrorKind::NotFound, "model ", tm_.path, " has no tokenizer");
    return *tm_.tokenizer;
  }
  cli::TextModel tm_;
};

void check_choice(const std::string& field, const std::string& value, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (value == a) return;
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  fail(ErrorKind::InvalidArgument, "ModelOptions::", field, " '", value, "' is not one of ", list);
}

}  // namespace

std::unique_ptr<LoadedModel> load_model(const std::string& model, const ModelOptions& options) {
  if (model.empty()) fail(ErrorKind::InvalidArgument, "load_model: no model given");
  check_choice("device", options.device, {"auto", "cpu", "cuda"});
  check_choice("kv", options.kv, {"paged", "kv8", "kv4", "contiguous"});
  check_choice("speculative", options.speculative, {"auto", "ngram", "off"});
  if (options.threads < 0) fail(ErrorKind::InvalidArgument, "ModelOptions::threads must be >= 0");
  runtime::init_backends();  // idempotent: what the CLI does at start-up
  cli::ModelFlags flags;
  flags.requested = model;
  flags.model = cli::resolve_model_arg(model);
  flags.device = options.device;
  flags.dtype = options.dtype;
  flags.kv = options.kv;
  flags.threads = options.threads;
  cli::TextModelOptions to;
  to.chat_template = options.chat_template;
  to.engine = options.engine;
  to.speculation.mode = options.speculative;
  return std::make_unique<Loaded>(cli::load_text_model(flags, to));
}

}  // namespace ingot
