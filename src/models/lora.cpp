#include "models/lora.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "io/safetensors.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot {

namespace {

using json = nlohmann::json;

constexpr const char* kTargetNames[kLoraTargets] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                    "gate_proj", "up_proj", "down_proj"};
constexpr const char* kTargetBlocks[kLoraTargets] = {"self_attn", "self_attn", "self_attn", "self_attn",
                                                     "mlp",       "mlp",       "mlp"};

int target_index(const std::string& name) {
  for (int i = 0; i < kLoraTargets; ++i)
    if (name == kTargetNames[i]) return i;
  return -1;
}

std::string known_targets() {
  std::string s;
  for (const char* n : kTargetNames) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

// One adapter tensor, as read, keyed by where it applies.
struct RawPair {
  Tensor a, b;  // as stored
  std::string a_name, b_name;
};
using RawPairs = std::map<std::tuple<int64_t, int, int64_t>, RawPair>;  // (layer, target, expert or -1)

struct Parsed {
  std::string format;
  int rank = 0;
  float scale = 1;
  bool transposed = false;  // MLX stores a as [in, r] and b as [r, out]
  RawPairs pairs;
};

json read_config(const std::string& path) {
  if (!file_exists(path)) fail(ErrorKind::NotFound, "LoRA adapter: no ", path);
  try {
    json j = json::parse(read_text_file(path));
    if (!j.is_object()) fail(ErrorKind::BadFormat, "LoRA adapter: ", path, " is not a JSON object");
    return j;
  } catch (const json::exception& e) {
    fail(ErrorKind::BadFormat, "LoRA adapter: ", path, " is not valid JSON: ", e.what());
  }
}

std::unique_ptr<SafetensorsFile> open_weights(const std::string& path) {
  if (!file_exists(path)) fail(ErrorKind::NotFound, "LoRA adapter: no ", path);
  try {
    return SafetensorsFile::open(path);
  } catch (const Error& e) {
    fail(ErrorKind::BadFormat, "LoRA adapter: ", path, ": ", e.what());
  }
}

// "model.layers.<i>.<block>.<module>.<suffix>" -> layer and target, naming
// the tensor in the error when it is anything else.
void add_tensor(RawPairs& pairs, const SafetensorsFile& f, const std::string& name, const std::string& inner,
                const std::string& a_suffix, const std::string& b_suffix) {
  static const std::regex re(R"(model\.layers\.(\d+)\.([a-z_]+)\.([a-z_]+)\.(.+))");
  std::smatch m;
  if (!std::regex_match(inner, m, re))
    fail(ErrorKind::Unsupported, "LoRA adapter: tensor '", name, "' targets no decoder-layer projection (supported: ",
         known_targets(), ")");
  int t = target_index(m[3]);
  std::string suffix = m[4];
  int64_t expert = -1;
  if (m[2] == "mlp" && m[3] == "experts") {
    // "mlp.experts.<e>.<gate|up|down>_proj.<suffix>": one MoE expert's projection.
    static const std::regex ex(R"((\d{1,9})\.([a-z_]+)\.(.+))");
    std::smatch em;
    const std::string rest = suffix;
    t = std::regex_match(rest, em, ex) ? target_index(em[2]) : -1;
    if (t < static_cast<int>(LoraTarget::Gate))
      fail(ErrorKind::Unsupported, "LoRA adapter: tensor '", name,
           "' targets an unknown expert module (supported: gate_proj, up_proj, down_proj)");
    expert = std::stoll(em[1]);
    suffix = em[3];
  } else if (t < 0 || m[2] != kTargetBlocks[t]) {
    fail(ErrorKind::Unsupported, "LoRA adapter: tensor '", name, "' targets unknown module '", m[2].str(), ".",
         m[3].str(), "' (supported: ", known_targets(), ")");
  }
  if (suffix != a_suffix && suffix != b_suffix)
    fail(ErrorKind::Unsupported, "LoRA adapter: tensor '", name, "' is not a LoRA ", a_suffix, " / ", b_suffix,
         " matrix");
  int64_t layer = 0;
  try {
    layer = std::stoll(m[1]);
  } catch (const std::exception&) {
    fail(ErrorKind::BadFormat, "LoRA adapter: tensor '", name, "' has a bad layer index");
  }
  RawPair& p = pairs[{layer, t, expert}];
  if (suffix == a_suffix) {
    p.a = f.get(name);
    p.a_name = name;
  } else {
    p.b = f.get(name);
    p.b_name = name;
  }
}

int positive_int(const json& j, const char* key, const std::string& file) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > 1 << 20)
    fail(ErrorKind::BadFormat, "LoRA adapter: ", file, ": '", key, "' must be a positive integer");
  return it->get<int>();
}

float number(const json& j, const char* key, const std::string& file) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number() || !std::isfinite(it->get<double>()))
    fail(ErrorKind::BadFormat, "LoRA adapter: ", file, ": '", key, "' must be a number");
  return it->get<float>();
}

bool flag(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

bool non_empty(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null() && !(it->is_array() && it->empty()) && !(it->is_object() && it->empty());
}

Parsed parse_peft(const std::string& dir) {
  const std::string cfg_path = dir + "/adapter_config.json";
  json c = read_config(cfg_path);
  if (c.contains("peft_type") && c["peft_type"] != "LORA")
    fail(ErrorKind::Unsupported, "LoRA adapter: ", cfg_path, ": peft_type ", c["peft_type"].dump(),
         " is not LORA");
  if (non_empty(c, "modules_to_save"))
    fail(ErrorKind::Unsupported, "LoRA adapter: ", cfg_path, ": modules_to_save ", c["modules_to_save"].dump(),
         " replaces base weights, which an adapter served beside others cannot do; merge it into the model instead");
  if (flag(c, "use_dora")) fail(ErrorKind::Unsupported, "LoRA adapter: ", cfg_path, ": DoRA (use_dora) is not supported");
  if (flag(c, "fan_in_fan_out"))
    fail(ErrorKind::Unsupported, "LoRA adapter: ", cfg_path, ": fan_in_fan_out (Conv1D bases) is not supported");
  if (c.contains("bias") && c["bias"] != "none")
    fail(ErrorKind::Unsupported, "LoRA adapter: ", cfg_path, ": bias ", c["bias"].dump(), " is not supported (only \"none\")");
  for (const char* k : {"rank_pattern", "alpha_pattern"})
    if (non_empty(c, k)) fail(ErrorKind::Unsupported, "LoRA adapter: ", cfg_path, ": per-module ", k, " is not supported");
  if (auto it = c.find("target_modules"); it != c.end() && it->is_array())
    for (const json& m : *it)
      if (!m.is_string() || target_index(m.get<std::string>()) < 0)
        fail(ErrorKind::Unsupported, "LoRA adapter: ", cfg_path, ": unknown target module ", m.dump(),
             " (supported: ", known_targets(), ")");
  Parsed p;
  p.format = "peft";
  p.rank = positive_int(c, "r", cfg_path);
  const float alpha = c.contains("lora_alpha") ? number(c, "lora_alpha", cfg_path) : 8.0f;
  p.scale = flag(c, "use_rslora") ? alpha / std::sqrt(static_cast<float>(p.rank)) : alpha / static_cast<float>(p.rank);
  const std::string wpath = dir + "/adapter_model.safetensors";
  if (!file_exists(wpath) && file_exists(dir + "/adapter_model.bin"))
    fail(ErrorKind::Unsupported, "LoRA adapter: ", dir, " holds adapter_model.bin (pickle); save it as safetensors");
  auto f = open_weights(wpath);
  const std::string prefix = "base_model.model.";
  for (const TensorInfo& t : f->tensors()) {
    std::string inner = t.name.starts_with(prefix) ? t.name.substr(prefix.size()) : t.name;
    add_tensor(p.pairs, *f, t.name, inner, "lora_A.weight", "lora_B.weight");
  }
  return p;
}

Parsed parse_mlx(const std::string& dir) {
  const std::string cfg_path = dir + "/adapter_config.json";
  json c = read_config(cfg_path);
  const std::string type = c.value("fine_tune_type", "lora");
  if (type != "lora")
    fail(ErrorKind::Unsupported, "LoRA adapter: ", cfg_path, ": fine_tune_type '", type, "' is not supported (only lora)");
  if (flag(c, "use_dora")) fail(ErrorKind::Unsupported, "LoRA adapter: ", cfg_path, ": DoRA is not supported");
  auto lp = c.find("lora_parameters");
  if (lp == c.end() || !lp->is_object())
    fail(ErrorKind::BadFormat, "LoRA adapter: ", cfg_path, ": no lora_parameters object");
  if (auto keys = lp->find("keys"); keys != lp->end() && keys->is_array())
    for (const json& k : *keys) {
      const std::string s = k.is_string() ? k.get<std::string>() : k.dump();
      const size_t dot = s.rfind('.');
      if (target_index(dot == std::string::npos ? s : s.substr(dot + 1)) < 0)
        fail(ErrorKind::Unsupported, "LoRA adapter: ", cfg_path, ": unknown target module '", s, "' (supported: ",
             known_targets(), ")");
    }
  Parsed p;
  p.format = "mlx";
  p.transposed = true;
  p.rank = positive_int(*lp, "rank", cfg_path);
  p.scale = number(*lp, "scale", cfg_path);
  auto f = open_weights(dir + "/adapters.safetensors");
  for (const TensorInfo& t : f->tensors()) add_tensor(p.pairs, *f, t.name, t.name, "lora_a", "lora_b");
  return p;
}

// A stored matrix as float32 [rows, cols] (transposed when asked), scaled.
Tensor to_f32_matrix(const Tensor& t, bool transpose, float scale, const std::string& name) {
  if (t.ndim() != 2 || !dtype_info(t.dtype()).is_float)
    fail(ErrorKind::BadFormat, "LoRA adapter: tensor '", name, "' is not a float matrix: ", t.describe());
  std::vector<float> v = t.to(DType::F32).contiguous().to_f32_vector();
  const int64_t r = t.dim(0), c = t.dim(1);
  for (float x : v)
    if (!std::isfinite(x)) fail(ErrorKind::BadFormat, "LoRA adapter: tensor '", name, "' holds a non-finite value");
  if (!transpose) {
    for (float& x : v) x *= scale;
    return Tensor::from_f32(v, {r, c});
  }
  std::vector<float> o(v.size());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) o[static_cast<size_t>(j * r + i)] = v[static_cast<size_t>(i * c + j)] * scale;
  return Tensor::from_f32(o, {c, r});
}

std::atomic<uint64_t> g_next_key{1};

}  // namespace

const char* lora_target_name(LoraTarget t) { return kTargetNames[static_cast<int>(t)]; }

LoraTargets::Shapes lora_shapes(const Weight& q, const Weight& k, const Weight& v, const Weight& o,
                                const Weight& gate, const Weight& up, const Weight& down) {
  LoraTargets::Shapes s{};
  const Weight* w[kLoraTargets] = {&q, &k, &v, &o, &gate, &up, &down};
  for (int t = 0; t < kLoraTargets; ++t)
    if (w[t]->defined()) s[static_cast<size_t>(t)] = {w[t]->rows(), w[t]->cols()};
  return s;
}

std::shared_ptr<const LoraAdapter> LoraAdapter::load(const std::string& dir, const LoraTargets& targets,
                                                     const LoraLimits& limits, Device device) {
  if (!is_directory(dir)) fail(ErrorKind::NotFound, "LoRA adapter folder not found: ", dir);
  if (targets.layers <= 0) fail(ErrorKind::Unsupported, "LoRA adapters are not supported for ", targets.model_type);
  INGOT_CHECK(static_cast<int64_t>(targets.per_layer.size()) == targets.layers, "LoRA targets: ",
              targets.per_layer.size(), " layer shapes for ", targets.layers, " layers");
  Parsed p;
  if (file_exists(dir + "/adapters.safetensors"))
    p = parse_mlx(dir);
  else if (file_exists(dir + "/adapter_config.json"))
    p = parse_peft(dir);
  else
    fail(ErrorKind::NotFound, "LoRA adapter: ", dir,
         " has neither adapter_config.json + adapter_model.safetensors (PEFT) nor adapters.safetensors (MLX-LM)");
  if (p.rank > limits.max_rank)
    fail(ErrorKind::InvalidArgument, "LoRA adapter: ", dir, ": rank ", p.rank, " is above the limit ",
         limits.max_rank, " (--max-lora-rank)");
  if (p.pairs.empty()) fail(ErrorKind::BadFormat, "LoRA adapter: ", dir, " holds no LoRA tensors");

  auto out = std::shared_ptr<LoraAdapter>(new LoraAdapter());
  out->path_ = dir;
  out->format_ = p.format;
  out->rank_ = p.rank;
  out->scale_ = p.scale;
  out->key_ = g_next_key.fetch_add(1);
  out->layers_.resize(static_cast<size_t>(targets.layers));
  for (auto& [where, raw] : p.pairs) {
    const auto [layer, t, expert] = where;
    const std::string what = "model.layers." + std::to_string(layer) + "." + kTargetBlocks[t] +
                             (expert >= 0 ? ".experts." + std::to_string(expert) : std::string()) + "." +
                             kTargetNames[t];
    if (!raw.a.defined() || !raw.b.defined())
      fail(ErrorKind::BadFormat, "LoRA adapter: ", what, " has only one of its two LoRA matrices");
    if (layer >= targets.layers)
      fail(ErrorKind::InvalidArgument, "LoRA adapter: ", what, " is beyond the base model's ", targets.layers,
           " layers (an adapter for another model?)");
    std::array<int64_t, 2> shape{};
    if (expert < 0) {
      shape = targets.shape_of(layer, static_cast<LoraTarget>(t));
    } else if (static_cast<size_t>(layer) < targets.experts.size()) {
      const LoraTargets::Experts& e = targets.experts[static_cast<size_t>(layer)];
      if (expert >= e.count && e.count > 0)
        fail(ErrorKind::InvalidArgument, "LoRA adapter: ", what, " is beyond the layer's ", e.count,
             " experts (an adapter for another model?)");
      if (e.count > 0) shape = e.shape[static_cast<size_t>(t)];
    }
    const auto [rows, cols] = shape;
    if (rows == 0) fail(ErrorKind::Unsupported, "LoRA adapter: ", targets.model_type, " takes no adapter on ", what);
    Tensor a = to_f32_matrix(raw.a, p.transposed, 1.0f, raw.a_name);
    Tensor b = to_f32_matrix(raw.b, p.transposed, p.scale, raw.b_name);
    if (a.dim(0) != p.rank || b.dim(1) != p.rank)
      fail(ErrorKind::BadFormat, "LoRA adapter: ", what, ": matrices of rank ", a.dim(0), " / ", b.dim(1),
           " where the config says rank ", p.rank);
    if (a.dim(1) != cols || b.dim(0) != rows)
      fail(ErrorKind::InvalidArgument, "LoRA adapter: ", what, ": update of shape [", b.dim(0), ", ", a.dim(1),
           "] does not match the base projection [", rows, ", ", cols, "] (an adapter for another model?)");
    auto pair = std::make_unique<Pair>();
    pair->a.data = a.to(targets.dtype).to(device);
    pair->bt.data = b.transpose(0, 1).contiguous().to(targets.dtype).to(device);
    out->bytes_ += pair->a.nbytes() + pair->bt.nbytes();
    if (expert >= 0)
      out->experts_[{layer, expert, t}] = std::move(pair);
    else
      out->layers_[static_cast<size_t>(layer)][static_cast<size_t>(t)] = std::move(pair);
  }
  return out;
}

bool LoraAdapter::fits(const LoraTargets& targets) const {
  if (static_cast<int64_t>(layers_.size()) != targets.layers) return false;
  for (size_t l = 0; l < layers_.size(); ++l)
    for (int t = 0; t < kLoraTargets; ++t)
      if (const Pair* p = layers_[l][static_cast<size_t>(t)].get()) {
        const auto [rows, cols] = targets.shape_of(static_cast<int64_t>(l), static_cast<LoraTarget>(t));
        if (p->bt.cols() != rows || p->a.cols() != cols) return false;
      }
  for (const auto& [where, p] : experts_) {
    const auto [layer, expert, t] = where;
    if (static_cast<size_t>(layer) >= targets.experts.size()) return false;
    const LoraTargets::Experts& e = targets.experts[static_cast<size_t>(layer)];
    const auto [rows, cols] = e.shape[static_cast<size_t>(t)];
    if (expert >= e.count || p->bt.cols() != rows || p->a.cols() != cols) return false;
  }
  return true;
}

const LoraAdapter::Pair* LoraAdapter::expert_pair(int64_t layer, int64_t expert, LoraTarget t) const {
  auto it = experts_.find({layer, expert, static_cast<int>(t)});
  return it == experts_.end() ? nullptr : it->second.get();
}

std::shared_ptr<const LoraAdapter> load_lora_adapter(const Model& model, const std::string& dir,
                                                     const LoraLimits& limits) {
  LoraTargets targets;
  if (!model.lora_targets(targets))
    fail(ErrorKind::Unsupported, "LoRA adapters are not supported for model type '", model.config().model_type,
         "' (supported: the dense decoders llama, mistral, qwen2, qwen3, Gemma 2 / 3 / 4, Qwen3-MoE, Qwen3-Next and Qwen3.5, on one device)");
  return LoraAdapter::load(dir, targets, limits, model.device());
}

const LoraAdapter::Pair* LoraAdapter::pair(int64_t layer, LoraTarget t) const {
  if (layer < 0 || layer >= static_cast<int64_t>(layers_.size())) return nullptr;
  return layers_[static_cast<size_t>(layer)][static_cast<size_t>(t)].get();
}

LoraBatch::LoraBatch(const BatchInput& in) {
  int64_t row = 0, total = 0;
  for (const SeqInput& s : in.seqs) total += s.n_tokens;
  for (const SeqInput& s : in.seqs) {
    if (s.lora) {
      auto it = std::find_if(groups_.begin(), groups_.end(), [&](const Group& g) { return g.adapter == s.lora; });
      if (it == groups_.end()) it = groups_.insert(groups_.end(), Group{s.lora, {}});
      for (int64_t i = 0; i < s.n_tokens; ++i) it->rows.push_back(row + i);
    }
    row += s.n_tokens;
  }
  // One adapter on every row: no gather / scatter needed.
  if (groups_.size() == 1 && static_cast<int64_t>(groups_[0].rows.size()) == total) groups_[0].rows.clear();
}

std::vector<LowRankGroup> LoraBatch::groups_for(const LoraSite& site, LoraTarget t) const {
  std::vector<LowRankGroup> work;
  for (const Group& g : groups_) {
    const LoraAdapter::Pair* p =
        site.expert < 0 ? g.adapter->pair(site.layer, t) : g.adapter->expert_pair(site.layer, site.expert, t);
    if (!p) continue;
    if (!site.rows) {
      work.push_back({&p->a, &p->bt, g.rows});
      continue;
    }
    // Positions in y / x of the site's rows that belong to this group (both lists ascend).
    std::vector<int64_t> at;
    const std::vector<int64_t>& rows = *site.rows;
    for (size_t i = 0, j = 0; i < rows.size(); ++i) {
      if (g.rows.empty()) {
        at.push_back(static_cast<int64_t>(i));
        continue;
      }
      while (j < g.rows.size() && g.rows[j] < rows[i]) ++j;
      if (j < g.rows.size() && g.rows[j] == rows[i]) at.push_back(static_cast<int64_t>(i));
    }
    if (at.empty()) continue;
    if (at.size() == rows.size()) at.clear();  // every row of the site: no gather / scatter
    work.push_back({&p->a, &p->bt, std::move(at)});
  }
  return work;
}

void LoraBatch::add(Tensor& y, const Tensor& x, const LoraSite& site, LoraTarget t) const {
  add({{&y, t}}, x, site);
}

void LoraBatch::add(const std::vector<std::pair<Tensor*, LoraTarget>>& ys, const Tensor& x,
                    const LoraSite& site) const {
  if (groups_.empty()) return;
  std::vector<LowRankOutput> outs;
  for (const auto& [y, t] : ys) {
    std::vector<LowRankGroup> work = groups_for(site, t);
    if (work.empty()) continue;
    if (!y->is_contiguous()) *y = y->contiguous();
    outs.push_back({y, std::move(work)});
  }
  if (outs.empty()) return;
  ops::low_rank_add(outs, x.ndim() == 2 ? x : x.reshape({x.dim(0), x.numel() / x.dim(0)}));
}

}  // namespace ingot
