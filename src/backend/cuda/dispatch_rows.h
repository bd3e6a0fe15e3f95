// The decode kernels are instantiated per activation row count (1..8, so
// their accumulators stay in registers); dispatch_rows maps a runtime count
// to that compile-time one.
#pragma once
#include <cstdint>
#include <type_traits>

#include "backend/cuda/kernels.h"
#include "util/error.h"

namespace ingot::cuda {

// f(std::integral_constant<int, n>{}) for 1 <= n <= kGemvMaxRows; `what`
// names the launch in the error for any other n.
template <class F>
void dispatch_rows(int64_t n, const char* what, F&& f) {
  static_assert(kGemvMaxRows == 8, "one case per row count");
  switch (n) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    case 8: return f(std::integral_constant<int, 8>{});
    default: fail(ErrorKind::Internal, what, ": ", n, " rows");
  }
}

}  // namespace ingot::cuda
