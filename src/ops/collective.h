// The one collective a tensor-parallel model needs: every rank of a group
// contributes a same-shaped tensor and gets back the element-wise sum. Model
// code calls it after its row-parallel linears; with no group (one rank) it is
// never called. Implementations live in parallel/ (threads on the host, NCCL).
#pragma once

#include "tensor/tensor.h"

namespace ingot {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sum over ranks; every rank gets identical bytes back (summed in rank order).
  virtual Tensor all_reduce_sum(const Tensor& t) = 0;
};

}  // namespace ingot
