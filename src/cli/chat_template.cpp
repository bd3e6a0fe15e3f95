// `ingot chat-template`: renders a model's chat template for the JSON request
// on stdin ({"messages", "tools"?, "add_generation_prompt", extra variables})
// and writes the prompt to stdout byte-exact, as PARITY.md specifies. The
// template comes from a model or tokenizer folder, or a GGUF file's metadata.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/model_setup.h"
#include "cli/text_model.h"
#include "cli/verbs.h"
#include "template/chat_template.h"
#include "template/loader.h"
#include "util/error.h"

namespace ingot::cli {

namespace {

struct ChatTemplateFlags {
  std::string model;
  std::string name;
  bool batch = false;
};

std::string render_request(const ChatTemplateFiles& files, const ChatTemplateFlags& f,
                           const nlohmann::ordered_json& request) {
  bool has_tools = request.is_object() && request.contains("tools") && !request["tools"].is_null();
  std::string source = select_chat_template(files, f.name, has_tools, f.model);
  nlohmann::ordered_json context = chat_template_context(files, request);
  return ChatTemplate::compile(source)->render(context);
}

int run_chat_template(const ChatTemplateFlags& f) {
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  nlohmann::ordered_json request = nlohmann::ordered_json::parse(input, nullptr, false);
  if (request.is_discarded()) fail(ErrorKind::InvalidArgument, "chat-template: stdin is not valid JSON");
  ChatTemplateFiles files = load_template_files(f.model);
  if (!f.batch) {
    std::string prompt = render_request(files, f, request);
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
    return 0;
  }
  // --batch: many requests in one process; each result is {"prompt"} or {"error"}.
  if (!request.is_array()) fail(ErrorKind::InvalidArgument, "chat-template --batch: stdin must be a JSON array");
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const auto& one : request) {
    try {
      results.push_back({{"prompt", render_request(files, f, one)}});
    } catch (const Error& e) {
      results.push_back({{"error", e.what()}});
    }
  }
  std::string out = results.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

void register_chat_template(CLI::App& app) {
  auto f = std::make_shared<ChatTemplateFlags>();
  CLI::App* sub = add_verb(app, "chat-template", "render a model's chat template for a JSON request on stdin",
                           [f] { return run_chat_template(*f); });
  sub->add_option("--model,-m", f->model,
                  "model or tokenizer directory, a GGUF file, a cached repo id, or part of a local model's name")
      ->required()
      ->transform([](std::string s) { return resolve_model_arg(s); });
  sub->add_option("--template", f->name, "a named template (e.g. tool_use) instead of the default");
  sub->add_flag("--batch", f->batch, "stdin: a JSON array of requests; stdout: a JSON array of {prompt} or {error}");
}

}  // namespace ingot::cli
