#include "template/loader.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace ingot {

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) fail(ErrorKind::Io, "cannot read ", p.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

nlohmann::ordered_json read_json(const fs::path& p) {
  std::string text = read_file(p);
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded()) fail(ErrorKind::BadFormat, p.string(), ": not valid JSON");
  return j;
}

// A special token is a string or an AddedToken object {"content": ...}.
bool token_string(const nlohmann::ordered_json& v, std::string& out) {
  if (v.is_string()) {
    out = v.get<std::string>();
    return true;
  }
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    out = v["content"].get<std::string>();
    return true;
  }
  return false;
}

void read_templates(const nlohmann::ordered_json& value, const std::string& file, ChatTemplateFiles& out) {
  if (value.is_string()) {
    out.default_template = value.get<std::string>();
  } else if (value.is_array()) {
    for (const auto& item : value) {
      if (!item.is_object() || !item.contains("name") || !item.contains("template") || !item["name"].is_string() ||
          !item["template"].is_string())
        fail(ErrorKind::BadFormat, file, ": chat_template list entries must be {\"name\", \"template\"} strings");
      std::string name = item["name"].get<std::string>();
      out.named_templates.emplace_back(name, item["template"].get<std::string>());
      if (name == "default") out.default_template = item["template"].get<std::string>();
    }
  } else if (!value.is_null()) {
    fail(ErrorKind::BadFormat, file, ": chat_template must be a string or a list of {name, template}");
  }
}

// tokenizer_config.json's templates and special tokens (`where` names it in errors).
void read_tokenizer_config(const nlohmann::ordered_json& j, const std::string& where, ChatTemplateFiles& out) {
  if (!j.is_object()) fail(ErrorKind::BadFormat, where, ": expected a JSON object");
  if (j.contains("chat_template")) read_templates(j["chat_template"], where, out);
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                          "mask_token"}) {
    std::string tok;
    if (j.contains(key) && token_string(j[key], tok)) out.special_tokens[key] = tok;
  }
  if (j.contains("additional_special_tokens") && j["additional_special_tokens"].is_array()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& v : j["additional_special_tokens"]) {
      std::string tok;
      if (token_string(v, tok)) list.push_back(tok);
    }
    out.special_tokens["additional_special_tokens"] = list;
  }
}

}  // namespace

ChatTemplateFiles chat_template_files_from_config(const std::string& tokenizer_config_json, const std::string& where) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(tokenizer_config_json, nullptr, false);
  if (j.is_discarded()) fail(ErrorKind::BadFormat, where, ": not valid JSON");
  ChatTemplateFiles out;
  read_tokenizer_config(j, where, out);
  return out;
}

ChatTemplateFiles load_chat_template_files(const std::string& dir) {
  if (!fs::is_directory(dir)) fail(ErrorKind::NotFound, "model directory not found: ", dir);
  ChatTemplateFiles out;
  fs::path config = fs::path(dir) / "tokenizer_config.json";
  if (fs::exists(config)) read_tokenizer_config(read_json(config), config.string(), out);
  fs::path jinja = fs::path(dir) / "chat_template.jinja";
  fs::path json = fs::path(dir) / "chat_template.json";
  if (fs::exists(jinja)) {
    out.default_template = read_file(jinja);
  } else if (out.default_template.empty() && out.named_templates.empty() && fs::exists(json)) {
    nlohmann::ordered_json j = read_json(json);
    if (j.is_object() && j.contains("chat_template")) read_templates(j["chat_template"], json.string(), out);
  }
  return out;
}

std::string select_chat_template(const ChatTemplateFiles& files, const std::string& name, bool has_tools,
                                 const std::string& dir) {
  if (!name.empty()) {
    for (const auto& [n, src] : files.named_templates)
      if (n == name) return src;
    if (name == "default" && !files.default_template.empty()) return files.default_template;
    fail(ErrorKind::NotFound, "model ", dir, " has no chat template named '", name, "'");
  }
  if (has_tools)
    for (const auto& [n, src] : files.named_templates)
      if (n == "tool_use") return src;
  if (!files.default_template.empty()) return files.default_template;
  if (!files.named_templates.empty())
    fail(ErrorKind::NotFound, "model ", dir, " has several chat templates and none named 'default'");
  fail(ErrorKind::NotFound, "model ", dir, " has no chat template (no chat_template in tokenizer_config.json, "
       "no chat_template.jinja)");
}

nlohmann::ordered_json chat_template_context(const ChatTemplateFiles& files, const nlohmann::ordered_json& request) {
  if (!request.is_object()) fail(ErrorKind::InvalidArgument, "chat-template input must be a JSON object");
  if (!request.contains("messages") || !request["messages"].is_array())
    fail(ErrorKind::InvalidArgument, "chat-template input needs a \"messages\" array");
  nlohmann::ordered_json ctx = files.special_tokens;
  ctx["messages"] = nullptr;
  ctx["tools"] = nullptr;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = false;
  for (auto it = request.begin(); it != request.end(); ++it) ctx[it.key()] = it.value();
  return ctx;
}

}  // namespace ingot
