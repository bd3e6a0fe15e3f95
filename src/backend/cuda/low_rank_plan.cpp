#include "backend/cuda/low_rank.h"

#include <cstdint>
#include <vector>

#include "backend/cuda/kernels.h"

namespace ingot::cuda {

namespace {

bool dense_float(const Weight& w, Device device) {
  return !w.is_affine() && !is_quantized(w.dtype()) && w.data.is_contiguous() && w.data.device() == device &&
         (w.dtype() == DType::F32 || w.dtype() == DType::BF16 || w.dtype() == DType::F16);
}

}  // namespace

bool plan_low_rank(int64_t rows, int64_t k, int64_t m, const std::vector<LowRankGroup>& groups, Device device,
                   LowRankJobs* jobs, DType* dtype) {
  // The kernel reads 8 values at a time: widths in whole 16-byte pieces.
  if (groups.empty() || groups.size() > static_cast<size_t>(kLowRankMaxAdapters) || rows > kLowRankMaxJobs ||
      k % 8 != 0 || m % 8 != 0)
    return false;
  *jobs = LowRankJobs{};
  std::vector<char> taken(static_cast<size_t>(rows), 0);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const LowRankGroup& g = groups[gi];
    const Weight& a = *g.a;
    const Weight& bt = *g.bt;
    if (!dense_float(a, device) || !dense_float(bt, device) || a.dtype() != bt.dtype() || !aligned16(a.data.raw()) ||
        !aligned16(bt.data.raw()) ||
        (gi && a.dtype() != *dtype) || a.cols() != k || bt.cols() != m || bt.rows() != a.rows() || a.rows() < 1 ||
        a.rows() > kLowRankMaxRank)
      return false;
    *dtype = a.dtype();
    jobs->adapter[gi] = {a.data.raw(), bt.data.raw(), static_cast<int32_t>(a.rows())};
    const int64_t n = g.rows.empty() ? rows : static_cast<int64_t>(g.rows.size());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = g.rows.empty() ? i : g.rows[static_cast<size_t>(i)];
      if (r < 0 || r >= rows || taken[static_cast<size_t>(r)] || jobs->count == kLowRankMaxJobs) return false;
      taken[static_cast<size_t>(r)] = 1;
      jobs->row[jobs->count] = static_cast<int32_t>(r);
      jobs->adapter_of[jobs->count] = static_cast<int32_t>(gi);
      ++jobs->count;
    }
  }
  return true;
}

}  // namespace ingot::cuda
