// A WeightSource that answers with one rank's slice of every parameter
// (ShardPlan decides which), read from a host-side source and placed on the
// rank's device. Row slices of mapped weights stay views into the file.
#pragma once
#include <memory>
#include <optional>

#include "models/weights.h"
#include "parallel/shard_plan.h"

namespace ingot::parallel {

class ShardedSource final : public WeightSource {
 public:
  // `host` answers in the file's dtypes; dense slices are converted to `dtype`
  // (when set) after slicing, so no rank converts more than its own share.
  ShardedSource(std::shared_ptr<const WeightSource> host, const ShardPlan& plan, int rank, Device device,
                std::optional<DType> dtype);

  bool has(const std::string& name) const override { return host_->has(name); }
  Weight matrix(const std::string& name) const override;
  Tensor vector(const std::string& name) const override;
  Tensor raw(const std::string& name) const override { return host_->raw(name); }
  size_t total_bytes() const override { return host_->total_bytes() / static_cast<size_t>(plan_.ranks()); }

 private:
  std::shared_ptr<const WeightSource> host_;
  const ShardPlan& plan_;
  int rank_;
  Device device_;
  std::optional<DType> dtype_;
};

}  // namespace ingot::parallel
