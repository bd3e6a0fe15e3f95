// The batched decode rows of kv/batched_rows.h on the GPU (ctest label
// "gpu"): one write and one attention launch for many contiguous stores must
// give bit for bit what the per-sequence append/attend launches give, in
// plain steps and in captured, replayed steps, with key splits on; batches
// the kernels do not take are declined without touching the stores.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "backend/cuda/cuda_backend.h"
#include "kv/batched_rows.h"
#include "kv/contiguous.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "test_util.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::kv;
using namespace ingot::kv::testing;

namespace {

constexpr int64_t kKvHeads = 2, kHeads = 8, kDim = 64, kCap = 1200;
// Lengths around the key tile (128) and the split thresholds: one split for
// short rows, many for long ones, so one launch mixes per-row split plans.
const std::vector<int64_t> kLens = {1, 3, 17, 127, 128, 129, 255, 300, 513, 700, 1000};

LayerSpec layer_spec(int64_t window = 0) {
  LayerSpec s;
  s.kv_heads = kKvHeads;
  s.head_dim = kDim;
  s.v_head_dim = kDim;
  s.window = window;
  return s;
}

struct Batch {
  std::vector<std::unique_ptr<ContiguousLayerCache>> alone, batched;
  std::vector<LayerCache*> alone_p, batched_p;
};

// Two identical sets of stores, prefilled with the same random rows.
Batch make_batch(std::mt19937& rng, DType dt, int64_t window) {
  Batch b;
  for (int64_t len : kLens) {
    b.alone.push_back(std::make_unique<ContiguousLayerCache>(layer_spec(window), dt, Device::CUDA));
    b.batched.push_back(std::make_unique<ContiguousLayerCache>(layer_spec(window), dt, Device::CUDA));
    Tensor k = random_tensor(rng, {len, kKvHeads, kDim}).to(Device::CUDA);
    Tensor v = random_tensor(rng, {len, kKvHeads, kDim}).to(Device::CUDA);
    b.alone.back()->append(k, v);
    b.batched.back()->append(k, v);
    b.alone_p.push_back(b.alone.back().get());
    b.batched_p.push_back(b.batched.back().get());
  }
  return b;
}

struct RowInputs {
  Tensor q, k, v;  // [N, H, D], [N, KVH, D] float32 on the device
};
RowInputs random_rows(std::mt19937& rng) {
  const auto n = static_cast<int64_t>(kLens.size());
  return {random_tensor(rng, {n, kHeads, kDim}).to(Device::CUDA),
          random_tensor(rng, {n, kKvHeads, kDim}).to(Device::CUDA),
          random_tensor(rng, {n, kKvHeads, kDim}).to(Device::CUDA)};
}

Tensor host_lengths(const std::vector<LayerCache*>& cs, int64_t plus) {
  std::vector<int32_t> v;
  for (auto* c : cs) v.push_back(static_cast<int32_t>(c->length() + plus));
  return Tensor::from_i32(v, {static_cast<int64_t>(v.size())});
}

void expect_same_kv(const Batch& b) {
  for (size_t i = 0; i < kLens.size(); ++i) {
    ASSERT_EQ(b.alone[i]->length(), b.batched[i]->length()) << "sequence " << i;
    int64_t fa = 0, fb = 0;
    auto [ka, va] = b.alone[i]->fetch(&fa);
    auto [kb, vb] = b.batched[i]->fetch(&fb);
    EXPECT_TRUE(same_bytes(ka.to(Device::CPU), kb.to(Device::CPU))) << "keys of sequence " << i;
    EXPECT_TRUE(same_bytes(va.to(Device::CPU), vb.to(Device::CPU))) << "values of sequence " << i;
  }
}

void expect_same_rows(const Tensor& want, const Tensor& got, const char* what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  Tensor w = want.to(Device::CPU).contiguous(), g = got.to(Device::CPU).contiguous();
  for (int64_t i = 0; i < w.dim(0); ++i)
    EXPECT_TRUE(same_bytes(w.slice(0, i, i + 1), g.slice(0, i, i + 1)))
        << what << ": row " << i << " (" << kLens[static_cast<size_t>(i)] << " cached tokens), rel "
        << rel(g.slice(0, i, i + 1), w.slice(0, i, i + 1));
}

AttnParams params(int64_t window) {
  AttnParams p;
  p.scale = 0.125f;
  p.window = window;
  return p;
}

class BatchedRowsCuda : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {
 protected:
  void SetUp() override {
    runtime::init_backends();
    ASSERT_TRUE(cuda::available()) << "no CUDA device";
  }
};

}  // namespace

TEST_P(BatchedRowsCuda, PlainStepsMatchThePerSequenceLaunchesBitForBit) {
  const auto [dt, window] = GetParam();
  std::mt19937 rng(11);
  Batch b = make_batch(rng, dt, window);
  const AttnParams p = params(window);
  for (int step = 0; step < 3; ++step) {
    RowInputs r = random_rows(rng);
    Tensor positions = host_lengths(b.batched_p, 0).to(Device::CUDA);
    std::vector<Tensor> outs;
    for (size_t i = 0; i < kLens.size(); ++i) {
      const auto j = static_cast<int64_t>(i);
      b.alone[i]->append(r.k.slice(0, j, j + 1), r.v.slice(0, j, j + 1));
      outs.push_back(b.alone[i]->attend(r.q.slice(0, j, j + 1).contiguous(), p));
    }
    Tensor got = append_attend_rows(b.batched_p, r.q, r.k, r.v, positions, nullptr, p);
    expect_same_rows(ops::concat_rows(outs), got, "plain step");
    expect_same_kv(b);
  }
}

TEST_P(BatchedRowsCuda, ReplayedStepsMatchThePerSequenceLaunchesBitForBit) {
  const auto [dt, window] = GetParam();
  std::mt19937 rng(12);
  Batch b = make_batch(rng, dt, window);
  const AttnParams p = params(window);
  for (auto& c : b.alone) ASSERT_TRUE(c->reserve_fixed(kCap));
  for (auto& c : b.batched) ASSERT_TRUE(c->reserve_fixed(kCap));
  const auto n = static_cast<int64_t>(kLens.size());
  RowInputs r = random_rows(rng);
  Tensor positions = Tensor::zeros({n}, DType::I32, Device::CUDA);
  Tensor kv_lens = Tensor::zeros({n}, DType::I32, Device::CUDA);
  Tensor want, got;
  auto per_sequence = [&] {
    std::vector<Tensor> outs;
    for (int64_t j = 0; j < n; ++j) {
      auto& c = *b.alone[static_cast<size_t>(j)];
      c.append_at(r.k.slice(0, j, j + 1), r.v.slice(0, j, j + 1), positions.slice(0, j, j + 1));
      outs.push_back(c.attend_upto(r.q.slice(0, j, j + 1).contiguous(), p, kv_lens.slice(0, j, j + 1)));
    }
    want = ops::concat_rows(outs);
  };
  const kv::StepRows step{&kv_lens};
  auto batched = [&] { got = append_attend_rows(b.batched_p, r.q, r.k, r.v, positions, &step, p); };
  auto set_lengths = [&] {
    copy_into(host_lengths(b.batched_p, 0), positions);
    copy_into(host_lengths(b.batched_p, 1), kv_lens);
  };
  // Eager first, then captured graphs replayed over new rows and lengths.
  set_lengths();
  per_sequence();
  batched();
  expect_same_rows(want, got, "eager graph-style step");
  for (auto& c : b.alone) c->advance(1);
  for (auto& c : b.batched) c->advance(1);
  expect_same_kv(b);
  auto g_alone = backend(Device::CUDA).capture_step(per_sequence);
  auto g_batched = backend(Device::CUDA).capture_step(batched);
  ASSERT_NE(g_alone, nullptr);
  ASSERT_NE(g_batched, nullptr);
  for (int step = 0; step < 4; ++step) {
    RowInputs fresh = random_rows(rng);
    copy_into(fresh.q, r.q);
    copy_into(fresh.k, r.k);
    copy_into(fresh.v, r.v);
    set_lengths();
    g_alone->replay();
    g_batched->replay();
    expect_same_rows(want, got, "replayed step");
    for (auto& c : b.alone) c->advance(1);
    for (auto& c : b.batched) c->advance(1);
    expect_same_kv(b);
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, BatchedRowsCuda,
                         ::testing::Values(std::make_tuple(DType::BF16, int64_t{0}),
                                           std::make_tuple(DType::F32, int64_t{0}),
                                           std::make_tuple(DType::BF16, int64_t{200})));

TEST(BatchedRowsDecline, BatchesTheKernelsDoNotTakeLeaveTheStoresAlone) {
  runtime::init_backends();
  ASSERT_TRUE(cuda::available()) << "no CUDA device";
  std::mt19937 rng(13);
  Batch b = make_batch(rng, DType::BF16, 0);
  RowInputs r = random_rows(rng);
  const auto n = static_cast<int64_t>(kLens.size());
  Tensor positions = host_lengths(b.batched_p, 0).to(Device::CUDA);
  const AttnParams p = params(0);
  auto declined = [&](const std::vector<LayerCache*>& cs, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& pos) {
    Tensor o = append_attend_rows(cs, q, k, v, pos, nullptr, p);
    return !o.defined();
  };
  // Rows that do not match the sequences (a prefill chunk), or a single sequence.
  EXPECT_TRUE(declined(b.batched_p, r.q.slice(0, 0, n - 1), r.k, r.v, positions));
  EXPECT_TRUE(declined({b.batched_p[0]}, r.q.slice(0, 0, 1), r.k.slice(0, 0, 1), r.v.slice(0, 0, 1),
                       positions.slice(0, 0, 1)));
  // Mixed dtypes, mixed windows, CPU stores.
  ContiguousLayerCache f32(layer_spec(), DType::F32, Device::CUDA), windowed(layer_spec(64), DType::BF16, Device::CUDA);
  ContiguousLayerCache on_cpu_a(layer_spec(), DType::F32, Device::CPU), on_cpu_b(layer_spec(), DType::F32, Device::CPU);
  auto with_first = [&](LayerCache* c) {
    std::vector<LayerCache*> v = b.batched_p;
    v[0] = c;
    return v;
  };
  EXPECT_TRUE(declined(with_first(&f32), r.q, r.k, r.v, positions));
  EXPECT_TRUE(declined(with_first(&windowed), r.q, r.k, r.v, positions));
  const Tensor q2 = r.q.slice(0, 0, 2).to(Device::CPU), k2 = r.k.slice(0, 0, 2).to(Device::CPU),
               v2 = r.v.slice(0, 0, 2).to(Device::CPU);
  EXPECT_TRUE(declined({&on_cpu_a, &on_cpu_b}, q2, k2, v2, Tensor::from_i32({0, 0}, {2})));
  // Graph-style steps need stores with rows (reserve_fixed); a new store has none.
  ContiguousLayerCache fresh(layer_spec(), DType::BF16, Device::CUDA);
  Tensor lens = host_lengths(b.batched_p, 1).to(Device::CUDA);
  const kv::StepRows step{&lens};
  EXPECT_FALSE(append_attend_rows(with_first(&fresh), r.q, r.k, r.v, positions, &step, p).defined());
  EXPECT_EQ(fresh.length(), 0);
  // Nothing was written or counted.
  for (size_t i = 0; i < kLens.size(); ++i) EXPECT_EQ(b.batched[i]->length(), kLens[i]) << "sequence " << i;
}
