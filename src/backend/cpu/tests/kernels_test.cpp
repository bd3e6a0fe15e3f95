// Raw kernels on every ISA level this CPU supports, against double references.
#include "backend/cpu/kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <atomic>
#include <cstring>

#include "backend/cpu/tests/test_util.h"
#include "backend/cpu/thread_pool.h"
#include "tensor/half.h"

namespace ingot::cpu {
namespace {

using testing::IsaGuard;
using testing::random_floats;

// Weights in a dense dtype plus their exact f32 values.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

Weights make_weights(DType t, int64_t m, int64_t ld, uint32_t seed) {
  Weights w;
  std::vector<float> src = random_floats(static_cast<size_t>(m * ld), seed);
  w.values.resize(src.size());
  w.bytes.resize(src.size() * dtype_size(t));
  for (size_t i = 0; i < src.size(); ++i) {
    if (t == DType::F32) {
      w.values[i] = src[i];
      std::memcpy(&w.bytes[i * 4], &src[i], 4);
    } else {
      uint16_t h = t == DType::BF16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
      w.values[i] = t == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
      std::memcpy(&w.bytes[i * 2], &h, 2);
    }
  }
  return w;
}

class PerIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { set_isa(GetParam()); }
  IsaGuard guard_;
};

TEST_P(PerIsa, LinearMatchesDoubleReference) {
  const int64_t ns[] = {1, 2, 3, 4, 5, 9, 17};
  const int64_t ks[] = {1, 7, 16, 17, 64, 100, 257};
  const int64_t ms[] = {1, 3, 4, 5, 8, 9, 33};
  uint32_t seed = 1;
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (int64_t n : ns)
      for (int64_t k : ks) {
        int64_t m = ms[(n + k) % 7];
        int64_t ldw = k + (k % 3);  // rows of W further apart than k sometimes
        Weights w = make_weights(t, m, ldw, ++seed);
        std::vector<float> x = random_floats(static_cast<size_t>(n * k), ++seed);
        std::vector<float> y(static_cast<size_t>(n * m), -7.0f);
        linear_dense(x.data(), n, k, w.bytes.data(), t, ldw, m, y.data());
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < m; ++j) {
            double ref = 0, mag = 0;
            for (int64_t c = 0; c < k; ++c) {
              double p = static_cast<double>(x[i * k + c]) * w.values[j * ldw + c];
              ref += p;
              mag += std::fabs(p);
            }
            ASSERT_NEAR(y[i * m + j], ref, 1e-6 * mag + 1e-7)
                << dtype_name(t) << " n=" << n << " k=" << k << " m=" << m << " at " << i << "," << j;
          }
      }
}

// The bulk (outer-product) GEMM: against the double reference over row,
// column and depth counts that leave partial micro tiles, column blocks and
// k blocks; and a row's bits alone equal its bits inside the batch.
TEST_P(PerIsa, LinearBulkMatchesReferenceAndIsRowInvariant) {
  struct Case {
    int64_t n, k, m;
  };
  uint32_t seed = 900;
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (Case c : {Case{1, 1, 1}, Case{7, 17, 33}, Case{13, 300, 70}, Case{250, 64, 17}, Case{6, 513, 129}}) {
      const int64_t ldw = c.k + (c.k % 3);
      Weights w = make_weights(t, c.m, ldw, ++seed);
      std::vector<float> x = random_floats(static_cast<size_t>(c.n * c.k), ++seed);
      std::vector<float> y(static_cast<size_t>(c.n * c.m), -7.0f);
      linear_bulk(x.data(), c.n, c.k, w.bytes.data(), t, ldw, c.m, y.data());
      for (int64_t i = 0; i < c.n; ++i)
        for (int64_t j = 0; j < c.m; ++j) {
          double ref = 0, mag = 0;
          for (int64_t q = 0; q < c.k; ++q) {
            const double p = static_cast<double>(x[i * c.k + q]) * w.values[j * ldw + q];
            ref += p;
            mag += std::fabs(p);
          }
          ASSERT_NEAR(y[i * c.m + j], ref, 1e-6 * mag + 1e-7)
              << dtype_name(t) << " n=" << c.n << " k=" << c.k << " m=" << c.m << " at " << i << "," << j;
        }
      for (int64_t i : {int64_t{0}, c.n - 1}) {
        std::vector<float> one(static_cast<size_t>(c.m));
        linear_bulk(x.data() + i * c.k, 1, c.k, w.bytes.data(), t, ldw, c.m, one.data());
        ASSERT_EQ(0, std::memcmp(one.data(), y.data() + i * c.m, one.size() * sizeof(float))) << "row " << i;
      }
    }
}

// A row's result is the same bits whether it is computed alone, in a small
// group, in a large batch (the tiled path) or on another thread count.
TEST_P(PerIsa, LinearIsBatchInvariant) {
  // k = 1100 spans several k-blocks plus a tail; k = 20000 makes blocks of a
  // few x rows and converts 16-bit weights four rows at a time (several
  // groups per block, the last one partial).
  for (int64_t k : {int64_t{1100}, int64_t{20000}}) {
    for (DType t : {DType::F32, DType::BF16, DType::F16}) {
      const int64_t n = 37, m = 45;
      Weights w = make_weights(t, m, k, 11);
      std::vector<float> x = random_floats(static_cast<size_t>(n * k), 12);
      std::vector<float> full(static_cast<size_t>(n * m));
      linear_dense(x.data(), n, k, w.bytes.data(), t, k, m, full.data());
      for (int64_t start = 0; start < n; start += 5)
        for (int64_t len : {1, 2, 3, 6, 13}) {
          if (start + len > n) continue;
          std::vector<float> part(static_cast<size_t>(len * m));
          linear_dense(x.data() + start * k, len, k, w.bytes.data(), t, k, m, part.data());
          ASSERT_EQ(0, std::memcmp(part.data(), full.data() + start * m, part.size() * sizeof(float)))
              << dtype_name(t) << " k " << k << " rows " << start << "+" << len;
        }
      // Only some output columns (a weight slice) give the same bits too.
      std::vector<float> cols(static_cast<size_t>(n * 7));
      linear_dense(x.data(), n, k, w.bytes.data() + 10 * k * dtype_size(t), t, k, 7, cols.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(
            0, std::memcmp(&cols[static_cast<size_t>(i * 7)], &full[static_cast<size_t>(i * m + 10)], 7 * 4));
      for (int threads : {1, 3}) {
        set_num_threads(threads);
        std::vector<float> again(full.size());
        linear_dense(x.data(), n, k, w.bytes.data(), t, k, m, again.data());
        ASSERT_EQ(0, std::memcmp(again.data(), full.data(), full.size() * sizeof(float)))
            << threads << " threads";
      }
      set_num_threads(0);
    }
  }
}

TEST_P(PerIsa, VectorHelpersMatchDoubleReference) {
  for (int64_t n : {1, 5, 8, 15, 16, 17, 31, 64, 129}) {
    std::vector<float> a = random_floats(static_cast<size_t>(n), 100 + static_cast<uint32_t>(n));
    std::vector<float> b = random_floats(static_cast<size_t>(n), 200 + static_cast<uint32_t>(n));
    std::vector<uint16_t> bh(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) bh[i] = f32_to_bf16(b[i]);
    double d = 0, dh = 0, ss = 0, s = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      d += static_cast<double>(a[i]) * b[i];
      dh += static_cast<double>(a[i]) * bf16_to_f32(bh[i]);
      ss += static_cast<double>(a[i]) * a[i];
      s += a[i];
      mag += std::fabs(a[i]);
    }
    EXPECT_NEAR(dot(a.data(), b.data(), DType::F32, n), d, 1e-6 * mag + 1e-7);
    EXPECT_NEAR(dot(a.data(), bh.data(), DType::BF16, n), dh, 1e-6 * mag + 1e-7);
    EXPECT_NEAR(sum_squares(a.data(), n), ss, 1e-6 * ss + 1e-7);
    EXPECT_NEAR(sum(a.data(), n), s, 1e-6 * mag + 1e-7);
    std::vector<float> y = b;
    axpy(0.75f, bh.data(), DType::BF16, y.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], b[i] + 0.75 * bf16_to_f32(bh[i]), 1e-6);
    std::vector<float> out(static_cast<size_t>(n));
    scale_by(a.data(), 0.5f, b.data(), true, out.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(out[i], (a[i] * 0.5f) * (1.0f + b[i]));
    std::vector<float> conv(static_cast<size_t>(n));
    to_f32(bh.data(), DType::BF16, n, conv.data());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(conv[i], bf16_to_f32(bh[i]));
  }
}

// GELU (vector erf), softmax and layer norm rows against double references,
// over lengths with and without a partial last register.
TEST_P(PerIsa, ActivationRowsMatchDoubleReference) {
  for (int64_t n : {1, 7, 8, 16, 17, 100, 1500}) {
    std::vector<float> x = random_floats(static_cast<size_t>(n), 300 + static_cast<uint32_t>(n), -6.0f, 6.0f);
    if (n > 3) x[1] = 0.0f, x[2] = -0.0f, x[3] = -30.0f;
    std::vector<float> y(static_cast<size_t>(n));
    gelu(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double v = x[i], want = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      ASSERT_NEAR(y[i], want, 4e-7 * std::max(1.0, std::fabs(v))) << "gelu(" << v << ")";
    }
    // Softmax: scores on a wide range, one masked (-inf) key when there is room.
    std::vector<float> s = random_floats(static_cast<size_t>(n), 400 + static_cast<uint32_t>(n), -40.0f, 20.0f);
    if (n > 2) s[1] = -std::numeric_limits<float>::infinity();
    softmax_row(s.data(), y.data(), n);
    double mx = -1e300, sum = 0;
    for (float v : s) mx = std::max<double>(mx, v);
    for (float v : s) sum += std::exp(v - mx);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], std::exp(s[i] - mx) / sum, 1e-6) << "softmax " << i;
    if (n > 2) {
      EXPECT_EQ(y[1], 0.0f);
    }
    // Layer norm with and without a bias.
    std::vector<float> w = random_floats(static_cast<size_t>(n), 500 + static_cast<uint32_t>(n));
    std::vector<float> b = random_floats(static_cast<size_t>(n), 600 + static_cast<uint32_t>(n));
    std::vector<float> xs = x;
    for (float& v : xs) v += 3.0f;  // an offset mean
    double mean = 0, var = 0;
    for (float v : xs) mean += v;
    mean /= static_cast<double>(n);
    for (float v : xs) var += (v - mean) * (v - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(n) + 1e-5);
    for (const float* bias : {static_cast<const float*>(b.data()), static_cast<const float*>(nullptr)}) {
      layer_norm_row(xs.data(), w.data(), bias, 1e-5f, y.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(y[i], (xs[i] - mean) * inv * w[i] + (bias ? bias[i] : 0.0), 2e-5) << "layer_norm " << i;
    }
  }
}

// Attention scores: many rows at once give each row exactly dot()'s bits.
TEST_P(PerIsa, DotRowsEqualsDotPerRow) {
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (int64_t k : {1, 17, 64, 100})
      for (int64_t rows : {1, 5, 16, 17, 35}) {
        const int64_t ld = k + 3;
        Weights w = make_weights(t, rows, ld, static_cast<uint32_t>(k * 100 + rows));
        std::vector<float> a = random_floats(static_cast<size_t>(k), 7);
        std::vector<float> out(static_cast<size_t>(rows));
        dot_rows(a.data(), w.bytes.data(), t, ld, rows, k, out.data());
        for (int64_t r = 0; r < rows; ++r) {
          float one = dot(a.data(), w.bytes.data() + r * ld * dtype_size(t), t, k);
          ASSERT_EQ(0, std::memcmp(&one, &out[static_cast<size_t>(r)], 4))
              << dtype_name(t) << " k=" << k << " rows=" << rows << " r=" << r;
        }
      }
}

TEST_P(PerIsa, ActiveLevelIsTheForcedOne) { EXPECT_EQ(active_isa(), GetParam()); }

INSTANTIATE_TEST_SUITE_P(Cpu, PerIsa, ::testing::ValuesIn(supported_isas()),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return std::string(isa_name(i.param));
                         });

// The CI machines have AVX-512; if this one reports it, every level must be available.
TEST(CpuFeatures, LevelsFollowFeatures) {
  const CpuFeatures& f = cpu_features();
  auto isas = supported_isas();
  EXPECT_EQ(isas.front(), Isa::Portable);
  bool has512 = std::find(isas.begin(), isas.end(), Isa::Avx512) != isas.end();
  EXPECT_EQ(has512, f.avx512f && f.avx512bw && f.avx512vl && f.fma);
  if (has512) {
    EXPECT_EQ(isas.size(), 3u);
  }
}

TEST(ThreadPool, RunsEveryTaskOnceAcrossManyJobs) {
  ThreadPool p(3);
  std::vector<int> hits(257);
  for (int rep = 0; rep < 2000; ++rep) {
    int64_t tasks = 1 + rep % 257;
    p.run(tasks, [&](int64_t t) { hits[static_cast<size_t>(t)]++; });
  }
  std::vector<int> expect(257, 0);
  for (int rep = 0; rep < 2000; ++rep)
    for (int64_t t = 0; t < 1 + rep % 257; ++t) expect[static_cast<size_t>(t)]++;
  EXPECT_EQ(hits, expect);
}

TEST(ThreadPool, NestedRunIsSerialAndComplete) {
  ThreadPool p(2);
  std::atomic<int> count{0};
  p.run(4, [&](int64_t) { p.run(5, [&](int64_t) { count++; }); });
  EXPECT_EQ(count.load(), 20);
}

}  // namespace
}  // namespace ingot::cpu
