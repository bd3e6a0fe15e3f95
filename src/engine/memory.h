// The memory model behind `ingot fit` and the scheduler's admission control:
// a deterministic prediction of weights + KV + activation transient + runtime
// overhead, from file headers and config.json alone.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/config.h"
#include "kv/cache.h"

namespace ingot {
class Model;
}

namespace ingot::engine {

struct EngineOptions;

// Process cost beyond the libraries' resident pages (allocator arenas,
// thread pool), measured with `ingot fit --measure` on the smallest goldens.
constexpr int64_t kRuntimeOverheadBytes = 5ll << 20;

// The resident size of this process the first time it is asked, which the
// CLI does before any model is loaded: code and libraries (a build with the
// CUDA runtime and cuBLAS linked keeps ~180 MB resident even without a GPU).
int64_t process_baseline_bytes();
// kRuntimeOverheadBytes + process_baseline_bytes().
int64_t runtime_overhead_bytes();

// The layer shapes a config implies (what the model will report), so that
// fit can predict without loading weights.
std::vector<kv::LayerSpec> layout_from_config(const ModelConfig& cfg);

// Largest float32 transient of one forward pass over `tokens` rows, of
// which `logit_rows` produce logits, attending over up to `context` keys.
int64_t activation_bytes(const ModelConfig& cfg, int64_t tokens, int64_t logit_rows, int64_t context);

struct MemoryPrediction {
  int64_t weight_bytes = 0;
  int64_t kv_bytes_per_token = 0;  // all layers, uncapped
  int64_t kv_bytes = 0;            // batch sequences of ctx tokens
  int64_t activation_bytes = 0;
  int64_t overhead_bytes = 0;  // runtime_overhead_bytes() when predicted
  int64_t total() const { return weight_bytes + kv_bytes + activation_bytes + overhead_bytes; }
};

struct FitQuery {
  int64_t ctx = 0;
  int64_t batch = 1;
  std::string kv = "contiguous";
  int64_t token_budget = 2048;  // rows per forward pass (prefill chunks)
  int64_t prefill_chunk = 512;
};

// Prediction for a checkpoint directory: weight bytes come from the
// safetensors headers (no tensor data is read).
MemoryPrediction predict_memory(const std::string& model_dir, const FitQuery& q);
MemoryPrediction predict_memory(const ModelConfig& cfg, DType kv_dtype, int64_t weight_bytes, const FitQuery& q);

// Physical memory of this machine in bytes.
int64_t machine_memory_bytes();

// Bytes the engine may spend on KV (live sequences + prefix cache): the
// budget (or machine memory) minus weights, one step's transient and the
// runtime overhead. Throws ResourceExhausted when nothing is left.
int64_t kv_budget_bytes(const Model& model, const EngineOptions& opt);

}  // namespace ingot::engine
