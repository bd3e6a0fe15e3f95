// A sparse mixture-of-experts MLP block (Qwen3-MoE, Qwen3-Next): softmax
// router, top-k experts per token (optionally renormalised), experts run as
// grouped matmuls — tokens are grouped by expert and each expert runs one
// linear over its whole group — plus an optional sigmoid-gated shared expert.
#pragma once
#include <string>
#include <vector>

#include "models/common.h"
#include "models/weights.h"
#include "ops/ops.h"

namespace ingot::family {

struct MoeBlock {
  Weight router;  // [experts, hidden]
  std::vector<Weight> gate, up, down;
  int64_t top_k = 1;
  bool norm_topk = false;
  GluOp act = GluOp::SwiGlu;
  DType weight_dtype = DType::F32;  // routing weights are rounded to it, as the reference casts them
  Weight shared_gate, shared_up, shared_down, shared_router;  // shared expert: optional

  int64_t num_experts() const { return static_cast<int64_t>(gate.size()); }
  size_t nbytes() const;
};

// Loads `prefix`.gate, `prefix`.experts.{e}.{gate,up,down}_proj and, when
// present, `prefix`.shared_expert.* + `prefix`.shared_expert_gate.
MoeBlock load_moe(const WeightSource& src, const std::string& prefix, int64_t experts, int64_t hidden,
                  int64_t inter, int64_t shared_inter, int64_t top_k, bool norm_topk, GluOp act);

// What adapters may target on the experts (none when the block has no experts).
LoraTargets::Experts lora_experts(const MoeBlock& m);

// Per token: the chosen experts (best first) and their weights.
struct Routing {
  std::vector<int32_t> expert;  // [N * top_k]
  std::vector<float> weight;    // [N * top_k]
};
Routing route(const MoeBlock& m, const Tensor& h, const ActRound& r = {});

// The block's output for h [N, hidden] (grouped path); with `lora`, each
// expert adds the update of its rows' adapters on its projections of layer `layer`.
Tensor moe_forward(const MoeBlock& m, const Tensor& h, const ActRound& r = {}, const LoraBatch* lora = nullptr,
                   int64_t layer = 0);
// The same function one token and one expert at a time: the test reference.
Tensor moe_forward_naive(const MoeBlock& m, const Tensor& h, const ActRound& r = {});

}  // namespace ingot::family
