#include "template/chat_template.h"

#include <nlohmann/json.hpp>

#include "template/ast.h"
#include "template/interpreter.h"

namespace ingot {

namespace {

class JinjaChatTemplate : public ChatTemplate {
 public:
  explicit JinjaChatTemplate(std::unique_ptr<tmpl::Template> tpl) : tpl_(std::move(tpl)) {}

  std::string render(const nlohmann::json& context) const override { return run(tmpl::from_json(context)); }
  std::string render(const nlohmann::ordered_json& context) const override {
    return run(tmpl::from_json(context));
  }

 private:
  std::string run(const tmpl::Value& context) const {
    if (!context.is_mapping()) fail(ErrorKind::InvalidArgument, "chat template context must be a JSON object");
    tmpl::Interpreter interp(*tpl_);
    return interp.render(context);
  }
  std::unique_ptr<tmpl::Template> tpl_;
};

}  // namespace

std::unique_ptr<ChatTemplate> ChatTemplate::compile(const std::string& source) {
  return std::make_unique<JinjaChatTemplate>(tmpl::parse_template(source));
}

}  // namespace ingot
