// LoRA adapters over a loaded base model, never merged into its weights:
// read from PEFT (adapter_config.json + adapter_model.safetensors) or MLX-LM
// (adapter_config.json + adapters.safetensors) files, checked against the
// projections the model exposes, and applied per batch row, so one forward
// pass mixes sequences of different adapters and of none.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "models/model.h"
#include "ops/weight.h"

namespace ingot {

// The projections of a decoder layer an adapter may target.
enum class LoraTarget : int { Q, K, V, O, Gate, Up, Down };
constexpr int kLoraTargets = 7;
// The Hugging Face module name: "q_proj", ..., "down_proj".
const char* lora_target_name(LoraTarget t);

// What a model can take adapters on: per layer and projection its [out, in]
// shape ({0, 0}: that projection takes none).
struct LoraTargets {
  std::string model_type;
  int64_t layers = 0;
  // The dtype adapters are kept in: float32 over float32 checkpoints (exact
  // against a merged model), bf16 over 16-bit and quantized ones, where a
  // float32 rank-64 adapter would read nearly as many bytes per token as the
  // base weights.
  DType dtype = DType::F32;
  using Shapes = std::array<std::array<int64_t, 2>, kLoraTargets>;
  std::vector<Shapes> per_layer;  // one per layer: layers may differ (Gemma 4, hybrid models)
  std::array<int64_t, 2> shape_of(int64_t layer, LoraTarget t) const {
    return per_layer.at(static_cast<size_t>(layer))[static_cast<size_t>(t)];
  }
  // MoE layers' experts (`mlp.experts.E.{gate,up,down}_proj`): per layer the
  // expert count (0: a dense layer) and one expert's Gate / Up / Down shapes
  // (the other targets unused). Empty: experts take no adapters.
  struct Experts {
    int64_t count = 0;
    Shapes shape{};
  };
  std::vector<Experts> experts;
};

// A layer's shapes from its projections' weights (an undefined weight: none).
LoraTargets::Shapes lora_shapes(const Weight& q, const Weight& k, const Weight& v, const Weight& o,
                                const Weight& gate, const Weight& up, const Weight& down);

// Where a projection's adapter update applies: a layer's own projection over
// every row of the batch, or one MoE expert's over the batch rows routed to it
// (x and y then hold just those rows, in that order).
struct LoraSite {
  int64_t layer = 0;
  int64_t expert = -1;                         // -1: the layer's own projection
  const std::vector<int64_t>* rows = nullptr;  // ascending batch rows (expert sites)
};

struct LoraLimits {
  int max_rank = 64;
};

class LoraAdapter {
 public:
  // Reads the adapter folder `dir` (either format) for a model described by
  // `targets`, onto `device`. Every problem is an Error naming the file or
  // tensor: missing/corrupt files, a rank above the limit, shapes or layers
  // that do not match the base, modules the model has no slot for,
  // modules_to_save, DoRA.
  static std::shared_ptr<const LoraAdapter> load(const std::string& dir, const LoraTargets& targets,
                                                 const LoraLimits& limits, Device device);

  // True when every pair matches `targets` (the adapter was loaded for such a model).
  bool fits(const LoraTargets& targets) const;

  struct Pair {
    Weight a;  // [r, in] in LoraTargets::dtype
    Weight bt;  // Bᵀ, [r, out] in LoraTargets::dtype, scale folded in
  };
  // The pair on `layer`'s projection `t`, or nullptr when the adapter leaves it alone.
  const Pair* pair(int64_t layer, LoraTarget t) const;
  // The pair on expert `expert`'s projection `t` (Gate / Up / Down) of `layer`, or nullptr.
  const Pair* expert_pair(int64_t layer, int64_t expert, LoraTarget t) const;

  const std::string& path() const { return path_; }
  const std::string& format() const { return format_; }  // "peft" or "mlx"
  int rank() const { return rank_; }
  float scale() const { return scale_; }
  size_t bytes() const { return bytes_; }
  // Distinct for every load, so state derived from one load (cached
  // prefixes) is never reused for another, even of the same path.
  uint64_t key() const { return key_; }

 private:
  std::string path_, format_;
  int rank_ = 0;
  float scale_ = 1;
  size_t bytes_ = 0;
  uint64_t key_ = 0;
  std::vector<std::array<std::unique_ptr<Pair>, kLoraTargets>> layers_;
  std::map<std::tuple<int64_t, int64_t, int>, std::unique_ptr<Pair>> experts_;  // (layer, expert, target)
};

// LoraAdapter::load for `model` on its device; Unsupported when the model
// takes no adapters.
std::shared_ptr<const LoraAdapter> load_lora_adapter(const Model& model, const std::string& dir,
                                                     const LoraLimits& limits);

// The adapters of one packed batch grouped by rows, so each projection adds
// one low-rank update per distinct adapter.
class LoraBatch {
 public:
  explicit LoraBatch(const BatchInput& in);
  bool empty() const { return groups_.empty(); }
  // y += the per-row adapter update of layer `layer`'s projection `t` on x.
  void add(Tensor& y, const Tensor& x, int64_t layer, LoraTarget t) const { add(y, x, LoraSite{layer}, t); }
  // The same at `site` (an expert's rows: y and x hold only them).
  void add(Tensor& y, const Tensor& x, const LoraSite& site, LoraTarget t) const;
  // Every projection of `ys` reading the same x (q / k / v, gate / up), in one call.
  void add(const std::vector<std::pair<Tensor*, LoraTarget>>& ys, const Tensor& x, const LoraSite& site) const;

 private:
  struct Group {
    const LoraAdapter* adapter;
    std::vector<int64_t> rows;  // empty: every row of the batch
  };
  // The low-rank work of projection `t` at `site`: one entry per group the adapter of which targets it.
  std::vector<LowRankGroup> groups_for(const LoraSite& site, LoraTarget t) const;
  std::vector<Group> groups_;
};

}  // namespace ingot
