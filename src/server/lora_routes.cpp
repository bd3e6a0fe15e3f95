// vLLM's run-time adapter endpoints: POST /v1/load_lora_adapter and
// /v1/unload_lora_adapter with {"lora_name", "lora_path"}. Loading reads any
// folder the server can see, so it is refused unless the server asks for a
// key (--api-key) or the operator allows it openly (--allow-runtime-lora).
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/lora_registry.h"
#include "server/routes.h"
#include "server/service.h"

namespace ingot::server {

namespace {

LoraRegistry& runtime_registry(Service& svc) {
  if (svc.options().api_key.empty() && !svc.options().allow_runtime_lora)
    throw ApiError(403, "loading LoRA adapters at run time needs --api-key (or --allow-runtime-lora)", "",
                   "runtime_lora_disabled");
  if (!svc.loras()) throw ApiError(400, "this model takes no LoRA adapters", "", "model_not_supported");
  return *svc.loras();
}

HttpResponse text_response(const std::string& text) {
  HttpResponse r;
  r.content_type = "text/plain; charset=utf-8";
  r.body = text;
  return r;
}

}  // namespace

HttpResponse load_lora_adapter(Service& svc, const HttpRequest& req) {
  LoraRegistry& reg = runtime_registry(svc);
  json body = parse_json_body(req.body);
  const std::string name = req_string(body, "lora_name");
  const std::string path = req_string(body, "lora_path");
  if (name == svc.options().model_id || name == "default")
    bad_request("'lora_name' must differ from the base model's name", "lora_name");
  reg.add(name, path);
  return text_response("Success: LoRA adapter '" + name + "' added successfully.");
}

HttpResponse unload_lora_adapter(Service& svc, const HttpRequest& req) {
  LoraRegistry& reg = runtime_registry(svc);
  json body = parse_json_body(req.body);
  const std::string name = req_string(body, "lora_name");
  if (!reg.remove(name)) throw ApiError(404, "no LoRA adapter named '" + name + "' is loaded", "lora_name", "not_found");
  return text_response("Success: LoRA adapter '" + name + "' removed successfully.");
}

}  // namespace ingot::server
