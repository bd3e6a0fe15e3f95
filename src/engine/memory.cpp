#include "engine/memory.h"

#include <cstdio>

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "ingot/engine.h"
#include "io/safetensors.h"
#include "kv/kinds.h"
#include "models/model.h"
#include "util/error.h"

namespace ingot::engine {

std::vector<kv::LayerSpec> layout_from_config(const ModelConfig& cfg) {
  kv::LayerSpec s;
  s.kv_heads = cfg.num_key_value_heads;
  s.head_dim = cfg.head_dim;
  s.v_head_dim = cfg.head_dim;
  std::vector<kv::LayerSpec> out(static_cast<size_t>(cfg.num_hidden_layers), s);
  for (size_t i = 0; i < out.size(); ++i) {
    const bool sliding = i < cfg.layer_types.size() ? cfg.layer_types[i] == "sliding_attention"
                                                    : cfg.model_type == "mistral";
    if (sliding && cfg.sliding_window > 0) out[i].window = cfg.sliding_window;
  }
  return out;
}

int64_t activation_bytes(const ModelConfig& c, int64_t tokens, int64_t logit_rows, int64_t context) {
  const int64_t hid = c.hidden_size, inter = c.intermediate_size;
  const int64_t qkv = (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim;
  // The allocator keeps freed chunks of one pass for the next layer, so the
  // peak is close to the sum of every distinct intermediate of a layer:
  // residuals and norms (4 x hidden), gate/up/product (3 x intermediate),
  // q/k/v and the attention output, plus the float32 view of the keys and
  // values attention reads, and the logits.
  const int64_t per_row = 4 * hid + 3 * inter + qkv + c.num_attention_heads * c.head_dim;
  return 4 * (tokens * per_row + 2 * context * c.num_key_value_heads * c.head_dim + logit_rows * c.vocab_size);
}

MemoryPrediction predict_memory(const ModelConfig& cfg, DType kv_dtype, int64_t weight_bytes, const FitQuery& q) {
  if (q.ctx <= 0) fail(ErrorKind::InvalidArgument, "--ctx must be positive, got ", q.ctx);
  if (q.batch <= 0) fail(ErrorKind::InvalidArgument, "--batch must be positive, got ", q.batch);
  kv::StoreKind kind = kv::StoreKind::Contiguous;
  try {
    kind = kv::parse_store_kind(q.kv);
  } catch (const Error& e) {
    fail(ErrorKind::InvalidArgument, "--kv: ", e.what());
  }
  MemoryPrediction p;
  p.overhead_bytes = runtime_overhead_bytes();
  p.weight_bytes = weight_bytes;
  auto layers = layout_from_config(cfg);
  double per_tok = 0;
  for (const auto& s : layers) per_tok += kv::bytes_per_token_layer(s, kv_dtype, kind);
  p.kv_bytes_per_token = static_cast<int64_t>(std::ceil(per_tok));
  p.kv_bytes = q.batch * (kv::bytes_for_tokens(layers, kv_dtype, kind, q.ctx) + kv::sequence_fixed_bytes(layers, kind));
  // The largest step: a full token budget of prefill chunks.
  const int64_t rows = std::min(q.token_budget, q.batch * std::min(q.ctx, q.prefill_chunk));
  p.activation_bytes = activation_bytes(cfg, rows, std::min(rows, q.batch), q.ctx);
  return p;
}

MemoryPrediction predict_memory(const std::string& dir, const FitQuery& q) {
  ModelConfig cfg = load_model_config(dir);
  auto store = WeightStore::open_dir(dir);
  int64_t weights = static_cast<int64_t>(store->total_bytes());
  // Dense float checkpoints keep their K/V in float32 when stored as float32,
  // else bfloat16 (the decoder's rule).
  DType kv_dtype = DType::BF16;
  for (const auto& name : store->names()) {
    if (name.ends_with("embed_tokens.weight")) {
      if (store->get(name).dtype() == DType::F32) kv_dtype = DType::F32;
      break;
    }
  }
  return predict_memory(cfg, kv_dtype, weights, q);
}

int64_t process_baseline_bytes() {
  static const int64_t baseline = [] {
    long pages = 0, resident = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
      std::fclose(f);
    }
    return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
  }();
  return baseline;
}

int64_t runtime_overhead_bytes() { return kRuntimeOverheadBytes + process_baseline_bytes(); }

int64_t machine_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

int64_t kv_budget_bytes(const Model& model, const EngineOptions& opt) {
  const double gib = static_cast<double>(1ll << 30);
  // Weights, activations and KV live where the model runs; on a GPU the
  // process's host-side baseline is not part of that memory.
  const bool on_device = model.device() != Device::CPU;
  if (on_device && opt.memory_budget_gb <= 0 && opt.device_memory_bytes <= 0)
    fail(ErrorKind::InvalidArgument, "a model on ", device_name(model.device()),
         " needs the device's memory size or an explicit memory budget");
  const int64_t memory = on_device ? opt.device_memory_bytes : machine_memory_bytes();
  const int64_t total =
      opt.memory_budget_gb > 0 ? static_cast<int64_t>(opt.memory_budget_gb * gib) : memory * 9 / 10;
  const int64_t ctx = opt.context_length > 0 ? opt.context_length : model.config().max_position_embeddings;
  const int64_t rows = std::max<int64_t>(1, opt.token_budget);
  const int64_t fixed = static_cast<int64_t>(model.weight_bytes()) + (on_device ? 0 : runtime_overhead_bytes()) +
                        activation_bytes(model.config(), rows, std::min<int64_t>(rows, opt.max_concurrency), ctx);
  if (total - fixed <= 0)
    fail(ErrorKind::ResourceExhausted, "memory budget of ", total / gib, " GiB does not cover the weights, ",
         "runtime and one step's activations (", fixed / gib, " GiB)");
  return total - fixed;
}

}  // namespace ingot::engine
