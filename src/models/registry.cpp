#include <map>
#include <mutex>

#include "kv/kinds.h"
#include "models/families.h"
#include "models/gguf_source.h"
#include "models/model.h"
#include "util/error.h"

namespace ingot {

namespace {

std::map<std::string, ModelFactory>& families() {
  static std::map<std::string, ModelFactory> m;
  return m;
}

void ensure_builtin() {
  static std::once_flag once;
  std::call_once(once, [] { register_builtin_families(); });
}

}  // namespace

void register_family(const std::vector<std::string>& types, ModelFactory f) {
  for (const auto& t : types) families()[t] = f;
}

bool is_supported_model_type(const std::string& t) {
  ensure_builtin();
  return families().count(t) != 0;
}

std::vector<std::string> supported_model_types() {
  ensure_builtin();
  std::vector<std::string> out;
  for (const auto& [k, v] : families()) out.push_back(k);
  return out;
}

std::unique_ptr<kv::SequenceCache> new_cache(const Model& model, const CacheOptions& opt) {
  ensure_builtin();
  if (auto own = model.make_cache(opt)) return own;
  const DType dt = opt.dtype.value_or(model.kv_dtype());
  const kv::StoreKind kind = kv::parse_store_kind(opt.kind);
  auto layout = model.cache_layout();
  auto cache = kv::make_store(layout, dt, model.device(), kind);
  // Hybrid models need a linear-state store for their recurrent layers.
  for (size_t i = 0; i < layout.size(); ++i)
    if (layout[i].kind == kv::LayerKind::LinearState && !cache->layer(static_cast<int>(i)).linear_state())
      fail(ErrorKind::Unsupported, "KV cache kind '", opt.kind, "' has no store for linear-attention layers");
  return cache;
}

std::unique_ptr<Model> build_model(const ModelConfig& cfg, const WeightSource& src, const LoadOptions& opt) {
  ensure_builtin();
  auto it = families().find(cfg.model_type);
  if (it == families().end()) {
    std::string known;
    for (const auto& [k, v] : families()) known += (known.empty() ? "" : ", ") + k;
    fail(ErrorKind::Unsupported, "unknown model_type '", cfg.model_type, "' (supported: ", known, ")");
  }
  return it->second(cfg, src, opt);
}

std::unique_ptr<Model> load_model(const std::string& dir, const LoadOptions& opt) {
  if (is_gguf_path(dir)) return load_gguf_model(dir, opt);
  ModelConfig cfg = load_model_config(dir);
  if (!is_supported_model_type(cfg.model_type)) {
    std::string known;
    for (const auto& k : supported_model_types()) known += (known.empty() ? "" : ", ") + k;
    fail(ErrorKind::Unsupported, "unknown model_type '", cfg.model_type, "' (supported: ", known, ")");
  }
  auto src = open_safetensors_source(dir, cfg, opt);
  return build_model(cfg, *src, opt);
}

}  // namespace ingot
