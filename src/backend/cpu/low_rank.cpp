// The CPU's low_rank_add: for every (output, adapter group) job, the shrink
// (x · Aᵀ, r dot products per row) and the expand (r axpys over each row's
// outputs, from Bᵀ's rank rows) run straight on the adapter's rows with the
// vector helpers, without materialising gathered inputs or scattered
// outputs. A decode step calls it for every projection group of every layer
// (q/k/v together, gate/up together): a few rows and a few thousand
// multiply-adds, where a pool dispatch and its wait cost as much as the
// arithmetic. So:
//   - tiny calls run on the calling thread;
//   - calls whose shrinks are small run in ONE pool pass: every thread
//     computes all the shrinks itself (a few dot products) and then its share
//     of the expand, with no wait between the two;
//   - larger calls shrink in one pass (split over (row, rank row) pairs) and
//     expand in a second (split over the outputs of every projection).
// Every dot product and axpy keeps its operation sequence whatever the split
// (dot_rows reduces each row alone; axpy is elementwise), so a row's update
// depends neither on its batch nor on the path taken.
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "util/error.h"

namespace ingot::cpu {

namespace {

// Multiply-adds below which a call runs on the calling thread.
constexpr int64_t kSerialWork = int64_t{1} << 13;
// Shrink multiply-adds up to which every thread repeats the shrinks rather
// than waiting for a pass that splits them.
constexpr int64_t kRepeatedShrink = int64_t{1} << 16;

bool dense(const Weight& w) { return !w.is_affine() && !is_quantized(w.dtype()) && w.data.is_contiguous(); }

size_t elem_bytes(const Weight& w) { return static_cast<size_t>(dtype_info(w.dtype()).block_bytes); }

const uint8_t* row_ptr(const Weight& w, int64_t row) {
  return static_cast<const uint8_t*>(w.data.raw()) + static_cast<size_t>(row * w.cols()) * elem_bytes(w);
}

// One adapter group's update of one output.
struct Job {
  const LowRankGroup* g;
  int out;         // index into the outputs
  int64_t n, r;    // rows, rank
  int64_t t0;      // first shrink pair: the job's t is t[t0, t0 + n * r)
  int64_t row(int64_t i) const { return g->rows.empty() ? i : g->rows[static_cast<size_t>(i)]; }
};

class LowRankPlan {
 public:
  LowRankPlan(const std::vector<LowRankOutput>& outs, const Tensor& x) : x_(x) {
    N_ = x.dim(0);
    K_ = x.dim(1);
    for (size_t o = 0; o < outs.size(); ++o) {
      Tensor& y = *outs[o].y;
      INGOT_CHECK(y.dtype() == DType::F32 && y.is_contiguous() && y.ndim() == 2 && y.dim(0) == N_,
                  "low_rank_add y ", y.describe(), " x ", x.describe());
      const int64_t M = y.dim(1);
      ys_.push_back(y.data<float>());
      ms_.push_back(M);
      m_begin_.push_back(total_m_);
      total_m_ += M;
      for (const LowRankGroup& g : outs[o].groups) {
        INGOT_CHECK(g.a && g.bt && dense(*g.a) && dense(*g.bt) && g.a->cols() == K_ && g.bt->cols() == M &&
                        g.bt->rows() == g.a->rows(),
                    "low_rank_add: adapter factors do not fit y ", y.describe(), " x ", x.describe());
        const int64_t n = g.rows.empty() ? N_ : static_cast<int64_t>(g.rows.size());
        for (int64_t r : g.rows) INGOT_CHECK(r >= 0 && r < N_, "low_rank_add: row ", r, " of ", N_);
        const Job j{&g, static_cast<int>(o), n, g.a->rows(), pairs_};
        jobs_.push_back(j);
        pairs_ += n * j.r;
        shrink_work_ += n * j.r * K_;
        expand_work_ += n * j.r * M;
      }
    }
  }

  void run() {
    if (jobs_.empty()) return;
    const int64_t threads = pool().size();
    if (threads == 1 || shrink_work_ + expand_work_ < kSerialWork) {
      std::vector<float> t(static_cast<size_t>(pairs_));
      shrink(0, pairs_, t.data());
      expand(0, total_m_, t.data());
    } else if (shrink_work_ <= kRepeatedShrink) {
      const int64_t per = (total_m_ + threads - 1) / threads;
      pool().run(threads, [&](int64_t k) {
        std::vector<float> t(static_cast<size_t>(pairs_));
        shrink(0, pairs_, t.data());
        expand(std::min(total_m_, k * per), std::min(total_m_, (k + 1) * per), t.data());
      });
    } else {
      std::vector<float> t(static_cast<size_t>(pairs_));
      pool().parallel_for(pairs_, std::max<int64_t>(1, pairs_ / threads),
                          [&](int64_t p0, int64_t p1) { shrink(p0, p1, t.data()); });
      pool().parallel_for(total_m_, std::max<int64_t>(16, total_m_ / threads),
                          [&](int64_t e0, int64_t e1) { expand(e0, e1, t.data()); });
    }
  }

 private:
  // t[p] for the shrink pairs p in [p0, p1): (row, rank row) of each job in turn.
  void shrink(int64_t p0, int64_t p1, float* t) const {
    const float* X = x_.data<float>();
    size_t ji = 0;
    for (int64_t p = p0; p < p1;) {
      while (p >= jobs_[ji].t0 + jobs_[ji].n * jobs_[ji].r) ++ji;
      const Job& j = jobs_[ji];
      const int64_t q = p - j.t0, i = q / j.r, k = q % j.r, run = std::min(j.r - k, p1 - p);
      dot_rows(X + j.row(i) * K_, row_ptr(*j.g->a, k), j.g->a->dtype(), K_, run, K_, t + p);
      p += run;
    }
  }

  // The outputs [e0, e1) of all projections laid end to end, a tile of
  // outputs at a time: per job, each row's sums start at zero and take one
  // axpy per rank row of Bᵀ (contiguous outputs, no horizontal sums), rank
  // rows outermost so a tile of Bᵀ is read once for all of the job's rows.
  void expand(int64_t e0, int64_t e1, const float* t) const {
    constexpr int64_t kTile = 256;
    std::vector<float> acc;
    for (size_t o = 0; o < ys_.size(); ++o) {
      const int64_t lo = std::max<int64_t>(e0 - m_begin_[o], 0), hi = std::min(e1 - m_begin_[o], ms_[o]);
      for (int64_t m0 = lo; m0 < hi; m0 += kTile) {
        const int64_t len = std::min(kTile, hi - m0);
        for (const Job& j : jobs_) {
          if (j.out != static_cast<int>(o)) continue;
          const Weight& bt = *j.g->bt;
          acc.assign(static_cast<size_t>(j.n * len), 0.0f);
          for (int64_t k = 0; k < j.r; ++k) {
            const uint8_t* row = row_ptr(bt, k) + static_cast<size_t>(m0) * elem_bytes(bt);
            for (int64_t i = 0; i < j.n; ++i)
              axpy(t[j.t0 + i * j.r + k], row, bt.dtype(), &acc[static_cast<size_t>(i * len)], len);
          }
          for (int64_t i = 0; i < j.n; ++i) {
            float* yr = ys_[o] + j.row(i) * ms_[o] + m0;
            const float* a = &acc[static_cast<size_t>(i * len)];
            for (int64_t m = 0; m < len; ++m) yr[m] += a[m];
          }
        }
      }
    }
  }

  const Tensor& x_;
  int64_t N_ = 0, K_ = 0;
  std::vector<float*> ys_;
  std::vector<int64_t> ms_, m_begin_;
  int64_t total_m_ = 0;
  std::vector<Job> jobs_;
  int64_t pairs_ = 0, shrink_work_ = 0, expand_work_ = 0;
};

}  // namespace

void CpuBackend::low_rank_add(const std::vector<LowRankOutput>& outs, const Tensor& x_in) {
  Tensor x = x_in.contiguous();
  if (x.dtype() != DType::F32) x = x.to(DType::F32);
  INGOT_CHECK(x.ndim() == 2, "low_rank_add x ", x.describe());
  LowRankPlan(outs, x).run();
}

}  // namespace ingot::cpu
