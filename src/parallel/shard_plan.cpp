#include "parallel/shard_plan.h"

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace ingot::parallel {

namespace {

bool ends_with(const std::string& s, const std::string& tail) { return s.ends_with(tail); }

// What kind of parameter a Hugging Face decoder name is.
enum class Role { QProj, KVProj, OProj, GateUp, Down, OBias, DownBias, Other };
// Which intermediate width a gate/up/down projection has.
enum class Mlp { Dense, Expert, SharedExpert };

Role role_of(const std::string& name) {
  auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (has(".self_attn.q_proj.")) return Role::QProj;
  if (has(".self_attn.k_proj.") || has(".self_attn.v_proj.")) return Role::KVProj;
  if (has(".self_attn.o_proj.")) return ends_with(name, ".bias") ? Role::OBias : Role::OProj;
  if (!has(".mlp.")) return Role::Other;
  if (has(".gate_proj.") || has(".up_proj.")) return Role::GateUp;
  if (has(".down_proj.")) return ends_with(name, ".bias") ? Role::DownBias : Role::Down;
  return Role::Other;  // the router (mlp.gate) and the shared expert's gate stay whole
}

Mlp mlp_of(const std::string& name) {
  if (name.find(".shared_expert.") != std::string::npos) return Mlp::SharedExpert;
  if (name.find(".experts.") != std::string::npos) return Mlp::Expert;
  return Mlp::Dense;
}

int64_t raw_int(const ModelConfig& c, const char* key) { return c.raw ? c.get_int(key, 0) : 0; }

int64_t width_of(const ModelConfig& c, Mlp m) {
  switch (m) {
    case Mlp::Expert: return raw_int(c, "moe_intermediate_size");
    case Mlp::SharedExpert: return raw_int(c, "shared_expert_intermediate_size");
    default: return c.intermediate_size;
  }
}

}  // namespace

bool ShardPlan::supports(const std::string& model_type) {
  return model_type == "llama" || model_type == "mistral" || model_type == "qwen2" || model_type == "qwen3" ||
         model_type == "qwen3_moe";
}

ShardPlan::ShardPlan(const ModelConfig& full, int ranks) : full_(full), ranks_(ranks) {
  if (ranks < 1) fail(ErrorKind::InvalidArgument, "--tensor-parallel must be at least 1, got ", ranks);
  if (!supports(full.model_type))
    fail(ErrorKind::Unsupported, "tensor parallelism is not supported for model_type '", full.model_type,
         "' (supported: llama, mistral, qwen2, qwen3, qwen3_moe)");
  const int64_t n = ranks, H = full.num_attention_heads, KV = full.num_key_value_heads;
  if (H <= 0 || KV <= 0 || full.intermediate_size <= 0)
    fail(ErrorKind::BadFormat, "config: heads and intermediate_size must be positive");
  if (H % n != 0)
    fail(ErrorKind::InvalidArgument, "num_attention_heads (", H, ") is not divisible by --tensor-parallel ", n);
  if (KV % n != 0 && n % KV != 0)
    fail(ErrorKind::InvalidArgument, "num_key_value_heads (", KV, ") and --tensor-parallel ", n,
         " do not divide one another");
  for (const char* key : {"intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size"}) {
    const int64_t w = std::string(key) == "intermediate_size" ? full.intermediate_size : raw_int(full, key);
    if (w % n != 0) fail(ErrorKind::InvalidArgument, key, " (", w, ") is not divisible by --tensor-parallel ", n);
  }
}

ModelConfig ShardPlan::rank_config() const {
  ModelConfig c = full_;
  c.num_attention_heads = full_.num_attention_heads / ranks_;
  c.num_key_value_heads = full_.num_key_value_heads >= ranks_ ? full_.num_key_value_heads / ranks_ : 1;
  c.intermediate_size = full_.intermediate_size / ranks_;
  // Family-specific widths are read from the raw config.
  auto raw = std::make_shared<nlohmann::json>(full_.raw ? *full_.raw : nlohmann::json::object());
  (*raw)["num_attention_heads"] = c.num_attention_heads;
  (*raw)["num_key_value_heads"] = c.num_key_value_heads;
  (*raw)["intermediate_size"] = c.intermediate_size;
  for (const char* key : {"moe_intermediate_size", "shared_expert_intermediate_size"})
    if (raw_int(full_, key) > 0) (*raw)[key] = raw_int(full_, key) / ranks_;
  c.raw = raw;
  return c;
}

Split ShardPlan::split_of(const std::string& name) const {
  if (ranks_ == 1) return Split::Replicated;
  switch (role_of(name)) {
    case Role::QProj:
    case Role::KVProj:
    case Role::GateUp: return Split::Rows;
    case Role::OProj:
    case Role::Down: return Split::Cols;
    case Role::OBias:
    case Role::DownBias: return Split::FirstRankOnly;
    case Role::Other: return Split::Replicated;
  }
  return Split::Replicated;
}

Range ShardPlan::range_of(const std::string& name, int rank) const {
  INGOT_CHECK(rank >= 0 && rank < ranks_, "rank ", rank, " of ", ranks_);
  const int64_t n = ranks_, D = full_.head_dim, H = full_.num_attention_heads, KV = full_.num_key_value_heads;
  const int64_t q_rows = H / n * D, inter = width_of(full_, mlp_of(name)) / n;
  switch (role_of(name)) {
    case Role::QProj:
    case Role::OProj: return {rank * q_rows, (rank + 1) * q_rows};
    case Role::KVProj: {
      if (KV >= n) return {rank * (KV / n) * D, (rank + 1) * (KV / n) * D};
      const int64_t head = rank / (n / KV);  // the KV head this rank's query heads read
      return {head * D, (head + 1) * D};
    }
    case Role::GateUp:
    case Role::Down: return {rank * inter, (rank + 1) * inter};
    default: return {0, 0};
  }
}

}  // namespace ingot::parallel
