// Decoder family: the KV cache makes decoding incremental without changing
// the numbers, and bad checkpoints fail with a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "io/safetensors.h"
#include "models/model.h"
#include "ops/ops.h"
#include "util/error.h"

using namespace ingot;

namespace {

std::string golden(const std::string& name) { return std::string(INGOT_SHARED_DIR) + "/goldens/" + name; }

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / (den + 1e-30));
}

std::vector<float> row(const Tensor& t, int64_t r) { return t.slice(0, r, r + 1).to_f32_vector(); }

}  // namespace

class DecoderGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(DecoderGolden, IncrementalDecodeEqualsFullRecompute) {
  ASSERT_TRUE(std::filesystem::exists(golden(GetParam()))) << "missing golden " << GetParam();
  auto model = load_model(golden(GetParam()));
  std::vector<int32_t> ids = {5, 17, 301, 44, 9, 250, 77, 128, 3, 400, 61, 12};
  // Full recompute: logits of every position in one pass.
  auto full_cache = new_cache(*model);
  Tensor full = model->forward(BatchInput::of(full_cache.get(), ids, true));
  // Incremental: a 5-token prefill, then one token at a time.
  auto cache = new_cache(*model);
  std::vector<int32_t> head(ids.begin(), ids.begin() + 5);
  Tensor pre = model->forward(BatchInput::of(cache.get(), head, true));
  for (int64_t r = 0; r < 5; ++r) EXPECT_LT(rel(row(pre, r), row(full, r)), 1e-6) << "prefill row " << r;
  for (size_t i = 5; i < ids.size(); ++i) {
    Tensor step = model->forward(BatchInput::of(cache.get(), std::vector<int32_t>{ids[i]}, false));
    EXPECT_LT(rel(row(step, 0), row(full, int64_t(i))), 1e-5) << "step " << i;
  }
  EXPECT_EQ(cache->offset(), int64_t(ids.size()));
}

TEST_P(DecoderGolden, TrimRewindsTheCache) {
  auto model = load_model(golden(GetParam()));
  std::vector<int32_t> ids = {5, 17, 301, 44, 9, 250};
  auto cache = new_cache(*model);
  model->forward(BatchInput::of(cache.get(), ids, false));
  Tensor a = model->forward(BatchInput::of(cache.get(), std::vector<int32_t>{7}, false));
  cache->trim(1);
  Tensor b = model->forward(BatchInput::of(cache.get(), std::vector<int32_t>{7}, false));
  EXPECT_EQ(a.to_f32_vector(), b.to_f32_vector());
  auto fork = cache->clone();
  Tensor c = model->forward(BatchInput::of(fork.get(), std::vector<int32_t>{9}, false));
  Tensor d = model->forward(BatchInput::of(cache.get(), std::vector<int32_t>{9}, false));
  EXPECT_EQ(c.to_f32_vector(), d.to_f32_vector());
}

INSTANTIATE_TEST_SUITE_P(Families, DecoderGolden,
                         ::testing::Values("llama-float32", "llama3-rope-float32", "qwen2-float32", "qwen3-float32",
                                           "qwen3-bfloat16"));

TEST(DecoderLoad, TwoSequencesInOneBatchMatchAlone) {
  auto model = load_model(golden("qwen2-float32"));
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7}, b = {100, 200, 300};
  auto ca = new_cache(*model), cb = new_cache(*model);
  Tensor la = model->forward(BatchInput::of(ca.get(), a, false));
  Tensor lb = model->forward(BatchInput::of(cb.get(), b, false));
  auto ca2 = new_cache(*model), cb2 = new_cache(*model);
  BatchInput both;
  both.add(ca2.get(), a);
  both.add(cb2.get(), b);
  Tensor lab = model->forward(both);
  EXPECT_EQ(row(lab, 0), la.to_f32_vector());
  EXPECT_EQ(row(lab, 1), lb.to_f32_vector());
}

TEST(DecoderLoad, BadCheckpointsAreClearErrors) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ingot_bad_model_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(golden("llama-float32") + "/config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  // No weights at all.
  EXPECT_THROW(load_model(dir.string()), Error);
  // A tensor with the wrong shape.
  write_safetensors((dir / "model.safetensors").string(),
                    {{"model.embed_tokens.weight", Tensor::zeros({10, 64}, DType::F32)}});
  try {
    load_model(dir.string());
    FAIL() << "loaded a model with a wrong embedding shape";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("embed_tokens"), std::string::npos) << e.what();
  }
  // Unknown model_type.
  std::ofstream(dir / "config.json") << R"({"model_type": "transmogrifier"})";
  try {
    load_model(dir.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("transmogrifier"), std::string::npos);
  }
  fs::remove_all(dir);
}

TEST(DecoderLoad, TokenIdOutOfRangeIsAnError) {
  auto model = load_model(golden("llama-float32"));
  auto cache = new_cache(*model);
  EXPECT_THROW(model->forward(BatchInput::of(cache.get(), std::vector<int32_t>{1, 512}, false)), Error);
  EXPECT_THROW(model->forward(BatchInput::of(cache.get(), std::vector<int32_t>{-1}, false)), Error);
}
