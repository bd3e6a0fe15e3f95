// Left-padded layouts: a masked dense attention over a rectangular batch
// equals each row's own attention.
#include <gtest/gtest.h>

#include <limits>

#include "kv/contiguous.h"
#include "kv/rows.h"
#include "ops/ops.h"
#include "test_util.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::kv;
using namespace ingot::kv::testing;

namespace {

// Reference dense attention of one row with an additive mask row-block [T, S].
std::vector<float> masked_attention(const float* q, const float* k, const float* v, const float* mask, int64_t t,
                                    int64_t s, int64_t h, int64_t kvh, int64_t d, float scale) {
  std::vector<float> out(static_cast<size_t>(t * h * d), 0.0f);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t hh = 0; hh < h; ++hh) {
      const int64_t kh = hh / (h / kvh);
      std::vector<double> sc(static_cast<size_t>(s));
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < s; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += q[(i * h + hh) * d + c] * k[(j * kvh + kh) * d + c];
        sc[j] = dot * scale + mask[i * s + j];
        mx = std::max(mx, sc[j]);
      }
      double sum = 0;
      for (double& x : sc) sum += (x = std::exp(x - mx));
      for (int64_t j = 0; j < s; ++j)
        for (int64_t c = 0; c < d; ++c)
          out[(i * h + hh) * d + c] += static_cast<float>(sc[j] / sum * v[(j * kvh + kh) * d + c]);
    }
  return out;
}

}  // namespace

TEST(Rows, LeftPadMaskMatchesPerRowAttention) {
  std::mt19937 rng(4);
  const int64_t kvh = 2, h = 4, d = 8, q_len = 2;
  LayerSpec s;
  s.kv_heads = kvh;
  s.head_dim = s.v_head_dim = d;
  std::vector<int64_t> lens = {5, 12, 2, 9};
  for (int64_t window : {int64_t{0}, int64_t{4}}) {
    PaddedLayout L = left_pad_layout(lens, q_len);
    Tensor mask = left_pad_mask(L, window);
    std::vector<int32_t> pos = left_pad_positions(L);
    for (size_t b = 0; b < lens.size(); ++b) {
      ContiguousLayerCache c(s, DType::F32, Device::CPU);
      Tensor k = random_tensor(rng, {lens[b], kvh, d}), v = random_tensor(rng, {lens[b], kvh, d});
      Tensor q = random_tensor(rng, {q_len, h, d});
      c.append(k, v);
      AttnParams p;
      p.scale = 0.3f;
      p.window = window;
      Tensor own = c.attend(q, p);
      // The same row left-padded to the batch width with junk keys.
      const int64_t S = L.width, pad = L.pad[b];
      Tensor kp = random_tensor(rng, {S, kvh, d}), vp = random_tensor(rng, {S, kvh, d});
      Tensor kd = kp.slice(0, pad, S), vd = vp.slice(0, pad, S);
      copy_into(k, kd);
      copy_into(v, vd);
      std::vector<float> o = masked_attention(q.data<float>(), kp.data<float>(), vp.data<float>(),
                                              mask.data<float>() + b * q_len * S, q_len, S, h, kvh, d, p.scale);
      EXPECT_LE(rel(Tensor::from_f32(o, {q_len, h, d}), own), 1e-6) << "row " << b << " window " << window;
      for (int64_t i = 0; i < q_len; ++i) EXPECT_EQ(pos[b * q_len + i], lens[b] - q_len + i);
    }
  }
  EXPECT_THROW(left_pad_layout({1, 3}, 2), Error);
}

TEST(Rows, ExtractFilterMergeBookkeeping) {
  LayerSpec s;
  s.kv_heads = 1;
  s.head_dim = s.v_head_dim = 4;
  std::mt19937 rng(2);
  Rows r;
  for (int64_t n : {3, 5, 7}) {
    auto c = make_contiguous_cache({s}, DType::F32, Device::CPU);
    c->layer(0).append(random_tensor(rng, {n, 1, 4}), random_tensor(rng, {n, 1, 4}));
    r.push(std::move(c));
  }
  EXPECT_EQ(r.offsets(), (std::vector<int64_t>{3, 5, 7}));
  EXPECT_EQ(r.positions(2), (std::vector<int32_t>{3, 4, 5, 6, 7, 8}));
  auto e = r.extract(1);
  EXPECT_EQ(e->offset(), 5);
  EXPECT_EQ(r.offsets(), (std::vector<int64_t>{3, 7}));
  r.filter({1});
  EXPECT_EQ(r.offsets(), (std::vector<int64_t>{7}));
  Rows other;
  other.push(std::move(e));
  r.merge(std::move(other));
  EXPECT_EQ(r.offsets(), (std::vector<int64_t>{7, 5}));
  EXPECT_THROW(r.extract(5), Error);
  EXPECT_THROW(r.filter({0, 0}), Error);
}
