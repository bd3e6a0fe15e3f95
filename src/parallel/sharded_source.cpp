#include "parallel/sharded_source.h"

#include "util/error.h"

namespace ingot::parallel {

namespace {

Weight to_device(Weight w, Device d) {
  w.data = w.data.to(d);
  if (w.scales.defined()) w.scales = w.scales.to(d);
  if (w.biases.defined()) w.biases = w.biases.to(d);
  return w;
}

Weight slice_rows(const Weight& w, Range r) {
  const int group = w.is_affine() ? 1 : dtype_info(w.dtype()).row_group;
  if (r.begin % group != 0 || r.end % group != 0)
    fail(ErrorKind::Unsupported, "rows ", r.begin, "..", r.end, " split a group of ", group, " interleaved ",
         dtype_name(w.dtype()), " rows; choose a smaller --tensor-parallel");
  Weight s = w;
  s.data = w.data.slice(0, r.begin, r.end).contiguous();
  if (w.scales.defined()) s.scales = w.scales.slice(0, r.begin, r.end).contiguous();
  if (w.biases.defined()) s.biases = w.biases.slice(0, r.begin, r.end).contiguous();
  return s;
}

Weight slice_cols(const Weight& w, Range r, const std::string& name) {
  Weight s = w;
  if (w.is_affine()) {
    // Whole quantization groups only: packed words and scale columns line up.
    if (r.begin % w.group_size != 0 || r.size() % w.group_size != 0)
      fail(ErrorKind::Unsupported, name, ": columns [", r.begin, ", ", r.end, ") do not fall on quantization groups of ",
           w.group_size, "; choose a smaller --tensor-parallel");
    const int64_t per_word = 32 / w.bits;
    s.data = w.data.slice(1, r.begin / per_word, r.end / per_word).contiguous();
    s.scales = w.scales.slice(1, r.begin / w.group_size, r.end / w.group_size).contiguous();
    if (w.biases.defined()) s.biases = w.biases.slice(1, r.begin / w.group_size, r.end / w.group_size).contiguous();
    return s;
  }
  if (is_quantized(w.dtype()))
    fail(ErrorKind::Unsupported, name, ": block-quantized (", dtype_name(w.dtype()),
         ") weights cannot be split by columns for tensor parallelism yet");
  s.data = w.data.slice(1, r.begin, r.end).contiguous();
  return s;
}

}  // namespace

ShardedSource::ShardedSource(std::shared_ptr<const WeightSource> host, const ShardPlan& plan, int rank,
                             Device device, std::optional<DType> dtype)
    : host_(std::move(host)), plan_(plan), rank_(rank), device_(device), dtype_(dtype) {}

Weight ShardedSource::matrix(const std::string& name) const {
  Weight w = host_->matrix(name);
  switch (plan_.split_of(name)) {
    case Split::Rows: w = slice_rows(w, plan_.range_of(name, rank_)); break;
    case Split::Cols: w = slice_cols(w, plan_.range_of(name, rank_), name); break;
    default: break;
  }
  // The same rule as the file sources: dense weights take the requested dtype, quantized ones stay.
  if (dtype_ && !w.is_affine() && !is_quantized(w.dtype()) && w.dtype() != *dtype_) w.data = w.data.to(*dtype_);
  return to_device(std::move(w), device_);
}

Tensor ShardedSource::vector(const std::string& name) const {
  Tensor t = host_->vector(name);
  switch (plan_.split_of(name)) {
    case Split::Rows: {
      Range r = plan_.range_of(name, rank_);
      return t.slice(0, r.begin, r.end).contiguous().to(device_);
    }
    case Split::FirstRankOnly:
      return rank_ == 0 ? t.to(device_) : Tensor::zeros(t.shape(), t.dtype(), device_);
    default: return t.to(device_);
  }
}

}  // namespace ingot::parallel
