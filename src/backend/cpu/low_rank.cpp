// The CPU's low_rank_add: per group, the shrink (x · Aᵀ, r dot products per
// row) and the expand (rank-r dot products per output) run straight on the
// adapter's rows with the vector helpers, without materialising gathered
// inputs or scattered outputs. A decode step calls it for every projection
// of every layer: a few rows, so the shrink splits over rank rows (not only
// over input rows) and the expand over outputs, and both threads share even a
// one-row update; only tiny groups stay on the calling thread. Every dot
// product keeps its operation sequence whatever the split (dot_rows reduces
// each row alone), so a row's update does not depend on its batch.
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "util/error.h"

namespace ingot::cpu {

namespace {

// Multiply-adds below which a group runs on the calling thread.
constexpr int64_t kSerialWork = int64_t{1} << 13;

bool dense(const Weight& w) { return !w.is_affine() && !is_quantized(w.dtype()) && w.data.is_contiguous(); }

}  // namespace

void CpuBackend::low_rank_add(Tensor& y, const Tensor& x_in, const std::vector<LowRankGroup>& groups) {
  Tensor x = x_in.contiguous();
  if (x.dtype() != DType::F32) x = x.to(DType::F32);
  INGOT_CHECK(y.dtype() == DType::F32 && y.is_contiguous() && y.ndim() == 2 && x.ndim() == 2 && y.dim(0) == x.dim(0),
              "low_rank_add y ", y.describe(), " x ", x.describe());
  const int64_t N = x.dim(0), K = x.dim(1), M = y.dim(1);
  const float* X = x.data<float>();
  float* Y = y.data<float>();
  for (const LowRankGroup& g : groups) {
    const Weight& a = *g.a;
    const Weight& b = *g.b;
    INGOT_CHECK(dense(a) && dense(b) && a.cols() == K && b.rows() == M && b.cols() == a.rows());
    const int64_t r = a.rows();
    const int64_t n = g.rows.empty() ? N : static_cast<int64_t>(g.rows.size());
    auto row_of = [&](int64_t i) { return g.rows.empty() ? i : g.rows[static_cast<size_t>(i)]; };
    for (int64_t i = 0; i < n; ++i) INGOT_CHECK(row_of(i) >= 0 && row_of(i) < N);
    std::vector<float> t(static_cast<size_t>(n * r));
    const size_t a_elem = static_cast<size_t>(dtype_info(a.dtype()).block_bytes);
    // t[p] for p in [p0, p1) of the (input row, rank row) pairs.
    auto shrink = [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1;) {
        const int64_t i = p / r, j = p % r, run = std::min(r - j, p1 - p);
        const void* aj = static_cast<const uint8_t*>(a.data.raw()) + static_cast<size_t>(j * K) * a_elem;
        dot_rows(X + row_of(i) * K, aj, a.dtype(), K, run, K, &t[static_cast<size_t>(p)]);
        p += run;
      }
    };
    const size_t b_elem = static_cast<size_t>(dtype_info(b.dtype()).block_bytes);
    auto expand = [&](int64_t m0, int64_t m1) {
      std::vector<float> acc(static_cast<size_t>(m1 - m0));
      const void* bm = static_cast<const uint8_t*>(b.data.raw()) + static_cast<size_t>(m0 * r) * b_elem;
      for (int64_t i = 0; i < n; ++i) {
        dot_rows(&t[static_cast<size_t>(i * r)], bm, b.dtype(), r, m1 - m0, r, acc.data());
        float* yr = Y + row_of(i) * M + m0;
        for (int64_t m = 0; m < m1 - m0; ++m) yr[m] += acc[static_cast<size_t>(m)];
      }
    };
    const int64_t threads = pool().size();
    if (threads == 1 || n * r * (K + M) < kSerialWork) {
      shrink(0, n * r);
      expand(0, M);
    } else {
      pool().parallel_for(n * r, std::max<int64_t>(1, n * r / threads), shrink);
      pool().parallel_for(M, std::max<int64_t>(16, M / threads), expand);
    }
  }
}

}  // namespace ingot::cpu
