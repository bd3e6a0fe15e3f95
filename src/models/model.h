// The model interface the engine drives, and the family registry.
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/config.h"
#include "kv/cache.h"
#include "models/weights.h"
#include "tensor/tensor.h"

namespace ingot {

class LoraAdapter;
struct LoraTargets;

// One sequence's slice of a batched forward pass.
struct SeqInput {
  kv::SequenceCache* cache = nullptr;
  int64_t n_tokens = 0;      // consecutive tokens in BatchInput::tokens
  bool all_logits = false;   // logits for every token, else only the last
  const LoraAdapter* lora = nullptr;  // applied to this sequence's rows; nullptr: the base model
};

// Inputs of a graph-replayable step, already on the model's device, so a
// captured forward reads them afresh at every replay (stepgraph/greedy_step.h).
struct StepInputs {
  Tensor ids;        // i32 [N] token ids
  Tensor positions;  // i32 [N] absolute positions (K/V rows written there)
  Tensor kv_lens;    // i32 [num seqs] keys each sequence attends to after this step
  // Paged stores: i64 [layers, num seqs], each sequence's table handle in
  // each layer (kv/batched_rows.h StepRows), and the most keys a sequence may
  // reach while the step is replayed. Undefined for contiguous stores.
  Tensor tables;
  int64_t max_keys = 0;
};

// Tokens of several sequences, concatenated; each continues its own cache.
struct BatchInput {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;  // each token's absolute position (where its K/V row goes)
  std::vector<SeqInput> seqs;
  // Set: ids/positions come from here (tokens may be empty) and the caches are
  // written and read through append_at / attend_upto; only decode rows.
  const StepInputs* step = nullptr;
  // Rows of the final-normed hidden state [rows, hidden] float32 instead of
  // logits (embeddings), for models whose supports_hidden_states().
  bool hidden_states = false;

  // Appends a sequence's next tokens, numbered from where its cache stands.
  void add(kv::SequenceCache* cache, std::span<const int32_t> next, bool all_logits = false,
           const LoraAdapter* lora = nullptr) {
    const int64_t base = cache ? cache->offset() : 0;
    tokens.insert(tokens.end(), next.begin(), next.end());
    for (size_t i = 0; i < next.size(); ++i) positions.push_back(static_cast<int32_t>(base + static_cast<int64_t>(i)));
    seqs.push_back({cache, static_cast<int64_t>(next.size()), all_logits, lora});
  }
  // A batch of one sequence.
  static BatchInput of(kv::SequenceCache* cache, std::span<const int32_t> next, bool all_logits = false) {
    BatchInput in;
    in.add(cache, next, all_logits);
    return in;
  }
};

// How a sequence's cache should be built.
struct CacheOptions {
  std::string kind = "contiguous";  // a kv::StoreKind name (kv/kinds.h)
  std::optional<DType> dtype;       // default: the model's compute dtype for K/V
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  int64_t vocab_size() const { return config().vocab_size; }
  // Logits [rows, vocab] float32: per sequence, every token or only the last.
  virtual Tensor forward(const BatchInput& in) = 0;
  virtual bool supports_hidden_states() const { return false; }
  // Shapes of each layer's K/V store.
  virtual std::vector<kv::LayerSpec> cache_layout() const = 0;
  virtual DType kv_dtype() const = 0;
  virtual Device device() const = 0;
  // Bytes of weights as loaded.
  virtual size_t weight_bytes() const = 0;
  // Models whose caches are not one store per layer_spec (tensor parallel)
  // make their own; nullptr lets new_cache build it from cache_layout().
  virtual std::unique_ptr<kv::SequenceCache> make_cache(const CacheOptions&) const { return nullptr; }
  // True when forward() honours BatchInput::step, so it can be captured once
  // and replayed for every token.
  virtual bool supports_step_inputs() const { return false; }
  // The projections LoRA adapters may target (models/lora.h); false when
  // this model takes no adapters (then `out` is untouched).
  virtual bool lora_targets(LoraTargets& out) const {
    (void)out;
    return false;
  }
};

// A new, empty cache for one sequence of `model`.
std::unique_ptr<kv::SequenceCache> new_cache(const Model& model, const CacheOptions& opt = {});

using ModelFactory =
    std::function<std::unique_ptr<Model>(const ModelConfig&, const WeightSource&, const LoadOptions&)>;
// Registers a family under one or more model_type names.
void register_family(const std::vector<std::string>& model_types, ModelFactory f);
bool is_supported_model_type(const std::string& model_type);
std::vector<std::string> supported_model_types();

// Loads a Hugging Face checkpoint directory (config.json + safetensors).
std::unique_ptr<Model> load_model(const std::string& dir, const LoadOptions& opt = {});
// Builds from an already-open source (GGUF and tests).
std::unique_ptr<Model> build_model(const ModelConfig& cfg, const WeightSource& src, const LoadOptions& opt);

}  // namespace ingot
