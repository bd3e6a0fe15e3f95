// `ingot chat-template`: renders a model's chat template for the JSON request
// on stdin ({"messages", "tools"?, "add_generation_prompt", extra variables})
// and writes the prompt to stdout byte-exact, as PARITY.md specifies.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/verbs.h"
#include "template/chat_template.h"
#include "template/loader.h"
#include "util/error.h"

namespace ingot::cli {

namespace {

struct ChatTemplateFlags {
  std::string model;
  std::string name;
};

int run_chat_template(const ChatTemplateFlags& f) {
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  nlohmann::ordered_json request = nlohmann::ordered_json::parse(input, nullptr, false);
  if (request.is_discarded()) fail(ErrorKind::InvalidArgument, "chat-template: stdin is not valid JSON");
  ChatTemplateFiles files = load_chat_template_files(f.model);
  bool has_tools = request.is_object() && request.contains("tools") && !request["tools"].is_null();
  std::string source = select_chat_template(files, f.name, has_tools, f.model);
  nlohmann::ordered_json context = chat_template_context(files, request);
  std::string prompt = ChatTemplate::compile(source)->render(context);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

void register_chat_template(CLI::App& app) {
  auto f = std::make_shared<ChatTemplateFlags>();
  CLI::App* sub = add_verb(app, "chat-template", "render a model's chat template for a JSON request on stdin",
                           [f] { return run_chat_template(*f); });
  sub->add_option("--model,-m", f->model, "model or tokenizer directory")->required();
  sub->add_option("--template", f->name, "a named template (e.g. tool_use) instead of the default");
}

}  // namespace ingot::cli
