// LoRA rows inside one batch: sequences with different adapters (MoE expert
// adapters included, whose updates apply to the rows routed to each expert)
// and with none give each sequence the logits it gets alone.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "io/safetensors.h"
#include "models/lora.h"
#include "models/model.h"
#include "util/error.h"

using namespace ingot;

namespace {

namespace fs = std::filesystem;

std::string golden(const std::string& name) { return std::string(INGOT_SHARED_DIR) + "/goldens/" + name; }

Tensor random_matrix(int64_t rows, int64_t cols, std::mt19937& g) {
  std::normal_distribution<float> d(0.0f, 0.3f);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (auto& x : v) x = d(g);
  return Tensor::from_f32(v, {rows, cols});
}

// A PEFT adapter of rank 2 on q_proj of every layer and on the gate / down
// projections of some experts (expert `first`, `first` + 3, ... of each layer).
fs::path write_adapter(const fs::path& dir, const LoraTargets& t, int first, uint32_t seed) {
  fs::create_directories(dir);
  std::mt19937 g(seed);
  std::vector<std::pair<std::string, Tensor>> tensors;
  auto add = [&](const std::string& module, std::array<int64_t, 2> shape) {
    const std::string p = "base_model.model.model." + module + ".";
    tensors.push_back({p + "lora_A.weight", random_matrix(2, shape[1], g)});
    tensors.push_back({p + "lora_B.weight", random_matrix(shape[0], 2, g)});
  };
  for (int64_t l = 0; l < t.layers; ++l) {
    const std::string layer = "layers." + std::to_string(l);
    add(layer + ".self_attn.q_proj", t.shape_of(l, LoraTarget::Q));
    const auto& e = t.experts.at(static_cast<size_t>(l));
    for (int64_t x = first; x < e.count; x += 3)
      for (LoraTarget m : {LoraTarget::Gate, LoraTarget::Down})
        add(layer + ".mlp.experts." + std::to_string(x) + "." + lora_target_name(m),
            e.shape[static_cast<size_t>(m)]);
  }
  write_safetensors((dir / "adapter_model.safetensors").string(), tensors);
  std::ofstream(dir / "adapter_config.json")
      << R"({"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "gate_proj", "down_proj"]})";
  return dir;
}

}  // namespace

TEST(LoraBatch, ExpertAdaptersOfSeveralSequencesInOneBatchMatchEachAlone) {
  auto model = load_model(golden("qwen3_moe-float32"));
  LoraTargets targets;
  ASSERT_TRUE(model->lora_targets(targets));
  ASSERT_FALSE(targets.experts.empty());
  const fs::path dir = fs::temp_directory_path() / ("ingot-lora-moe-" + std::to_string(::getpid()));
  auto a = load_lora_adapter(*model, write_adapter(dir / "a", targets, 0, 1).string(), {});
  auto b = load_lora_adapter(*model, write_adapter(dir / "b", targets, 1, 2).string(), {});
  fs::remove_all(dir);
  const std::vector<const LoraAdapter*> who = {a.get(), nullptr, b.get(), a.get()};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < who.size(); ++i) {
    std::vector<int32_t> p;
    for (int64_t k = 0; k < 5 + 2 * static_cast<int64_t>(i); ++k)
      p.push_back(static_cast<int32_t>((k * 31 + static_cast<int64_t>(i) * 57 + 3) % model->vocab_size()));
    prompts.push_back(p);
  }
  std::vector<Tensor> alone;
  for (size_t i = 0; i < who.size(); ++i) {
    auto c = new_cache(*model);
    BatchInput in;
    in.add(c.get(), prompts[i], true, who[i]);
    alone.push_back(model->forward(in));
  }
  std::vector<std::unique_ptr<kv::SequenceCache>> caches;
  BatchInput in;
  for (size_t i = 0; i < who.size(); ++i) {
    caches.push_back(new_cache(*model));
    in.add(caches.back().get(), prompts[i], true, who[i]);
  }
  Tensor together = model->forward(in);
  int64_t row = 0;
  for (size_t i = 0; i < who.size(); ++i) {
    const auto n = static_cast<int64_t>(prompts[i].size());
    EXPECT_EQ(together.slice(0, row, row + n).to_f32_vector(), alone[i].to_f32_vector()) << "sequence " << i;
    row += n;
  }
  // The adapters change the answer (else the comparison proves nothing).
  EXPECT_NE(alone[0].to_f32_vector(), [&] {
    auto c = new_cache(*model);
    BatchInput plain;
    plain.add(c.get(), prompts[0], true, nullptr);
    return model->forward(plain).to_f32_vector();
  }());
}
