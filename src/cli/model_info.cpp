#include "cli/model_info.h"

#include <map>
#include <nlohmann/json.hpp>

#include "io/config.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "models/gguf_source.h"
#include "util/strings.h"

namespace ingot::cli {

namespace {

std::string top_by_bytes(const std::map<std::string, int64_t>& bytes) {
  std::string best;
  int64_t most = -1;
  for (const auto& [name, b] : bytes)
    if (b > most) most = b, best = name;
  return best;
}

}  // namespace

ModelSummary summarize_model(const std::string& path) {
  ModelSummary s;
  std::map<std::string, int64_t> bytes_by_type;
  if (is_gguf_path(path)) {
    auto g = GgufFile::open(path);
    ModelConfig cfg = gguf_model_config(*g);
    s.architecture = g->get_string("general.architecture").value_or(cfg.model_type);
    s.context_length = cfg.max_position_embeddings;
    for (const auto& t : g->tensors()) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      s.parameters += n;
      bytes_by_type[ggml_type_name(t.ggml_type)] += static_cast<int64_t>(t.bytes);
    }
    s.quantization = top_by_bytes(bytes_by_type);
    return s;
  }
  ModelConfig cfg = load_model_config(path);
  s.architecture = cfg.architectures.empty() ? cfg.model_type : cfg.architectures[0];
  s.context_length = cfg.max_position_embeddings;
  // MLX affine checkpoints pack `bits`-wide values into uint32 words beside scales and biases.
  int bits = 0;
  if (cfg.has("quantization")) {
    const auto& q = (*cfg.raw)["quantization"];
    if (q.is_object() && q.contains("bits") && q["bits"].is_number_integer()) bits = q["bits"].get<int>();
  }
  auto store = WeightStore::open_dir(path);
  for (const auto& name : store->names()) {
    Tensor t = store->get(name);
    bytes_by_type[dtype_name(t.dtype())] += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
    if (bits > 0 && (name.ends_with(".scales") || name.ends_with(".biases"))) continue;
    s.parameters += bits > 0 && t.dtype() == DType::U32 ? t.numel() * (32 / bits) : t.numel();
  }
  s.quantization = bits > 0 ? "affine " + std::to_string(bits) + "-bit" : top_by_bytes(bytes_by_type);
  return s;
}

engine::MemoryPrediction predict_model_memory(const std::string& path, const engine::FitQuery& q) {
  if (!is_gguf_path(path)) return engine::predict_memory(path, q);
  auto g = GgufFile::open(path);
  return engine::predict_memory(gguf_model_config(*g), DType::BF16, static_cast<int64_t>(g->total_bytes()), q);
}

}  // namespace ingot::cli
