#include "models/weights.h"

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "ops/ops.h"
#include "util/error.h"

namespace ingot {

namespace {

class SafetensorsSource final : public WeightSource {
 public:
  SafetensorsSource(std::unique_ptr<WeightStore> store, const ModelConfig& cfg, const LoadOptions& opt)
      : store_(std::move(store)), opt_(opt) {
    const auto& raw = *cfg.raw;
    auto q = raw.find("quantization");
    if (q == raw.end()) q = raw.find("quantization_config");
    if (q != raw.end() && q->is_object()) {
      bits_ = q->value("bits", 0);
      group_ = q->value("group_size", 64);
    }
  }

  bool has(const std::string& name) const override { return store_->has(name); }

  Weight matrix(const std::string& name) const override {
    Weight w;
    Tensor t = store_->get(name);
    std::string base = name.substr(0, name.size() - (name.size() > 7 && name.ends_with(".weight") ? 7 : 0));
    if (t.dtype() == DType::U32 && store_->has(base + ".scales")) {
      w.bits = bits_ ? bits_ : 4;
      w.group_size = group_;
      w.data = t.to(opt_.device);
      w.scales = store_->get(base + ".scales").to(DType::F32).to(opt_.device);
      if (store_->has(base + ".biases")) w.biases = store_->get(base + ".biases").to(DType::F32).to(opt_.device);
      if (w.cols() % w.group_size != 0)
        fail(ErrorKind::BadFormat, name, ": width ", w.cols(), " is not a multiple of group size ", w.group_size);
      return w;
    }
    if (t.ndim() != 2) fail(ErrorKind::BadFormat, name, ": expected a matrix, got ", t.describe());
    if (!dtype_info(t.dtype()).is_float) fail(ErrorKind::BadFormat, name, ": unsupported dtype ", dtype_name(t.dtype()));
    if (opt_.dtype && *opt_.dtype != t.dtype()) t = t.to(*opt_.dtype);
    w.data = t.to(opt_.device);
    return w;
  }

  Tensor vector(const std::string& name) const override {
    Tensor t = store_->get(name);
    if (!dtype_info(t.dtype()).is_float) fail(ErrorKind::BadFormat, name, ": unsupported dtype ", dtype_name(t.dtype()));
    return t.to(DType::F32).contiguous().to(opt_.device);
  }

  Tensor raw(const std::string& name) const override { return store_->get(name); }
  size_t total_bytes() const override { return store_->total_bytes(); }

 private:
  std::unique_ptr<WeightStore> store_;
  LoadOptions opt_;
  int bits_ = 0, group_ = 64;
};

}  // namespace

std::unique_ptr<WeightSource> open_safetensors_source(const std::string& dir, const ModelConfig& cfg,
                                                      const LoadOptions& opt) {
  return std::make_unique<SafetensorsSource>(WeightStore::open_dir(dir), cfg, opt);
}

}  // namespace ingot
