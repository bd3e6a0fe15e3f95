// Tensor: a typed, shaped, strided view over ref-counted Storage.
// Views (slice, transpose, reshape of contiguous data) share storage; copies
// are explicit (contiguous(), clone(), to()).
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/storage.h"

namespace ingot {

constexpr int kMaxDims = 6;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);
  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
  int64_t numel() const;
  std::vector<int64_t> vec() const { return {dims_.begin(), dims_.begin() + ndim_}; }
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised contiguous tensor.
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::CPU);
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::CPU);
  // Contiguous view over existing storage at byte `offset`.
  static Tensor from_storage(std::shared_ptr<Storage> s, size_t offset, const Shape& shape,
                             DType dtype);
  // Copies host values into a new contiguous CPU tensor.
  static Tensor from_f32(const std::vector<float>& v, const Shape& shape);
  static Tensor from_i32(const std::vector<int32_t>& v, const Shape& shape);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::CPU; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return shape_.ndim(); }
  int64_t dim(int i) const { return shape_[i < 0 ? i + ndim() : i]; }
  int64_t numel() const { return shape_.numel(); }
  int64_t stride(int i) const { return strides_[static_cast<size_t>(i < 0 ? i + ndim() : i)]; }
  size_t nbytes() const;  // bytes of the logical elements (contiguous size)
  size_t offset_bytes() const { return offset_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool is_contiguous() const;

  // Raw pointer to element 0 (host or device address).
  void* raw() const { return static_cast<uint8_t*>(storage_->data()) + offset_; }
  template <typename T>
  T* data() const { return static_cast<T*>(raw()); }

  // Views.
  Tensor reshape(const Shape& s) const;  // requires contiguous; one -1 allowed
  Tensor slice(int dim, int64_t start, int64_t end) const;
  Tensor select(int dim, int64_t index) const;  // drops `dim`
  Tensor transpose(int a, int b) const;
  Tensor unsqueeze(int dim) const;

  // Copies.
  Tensor contiguous() const;  // self if already contiguous
  Tensor clone() const;       // always a fresh contiguous copy (same device)
  Tensor to(Device d) const;  // self if already there
  Tensor to(DType t) const;   // converts (CPU); self if already that dtype

  // Host helpers (CPU tensors of scalar type).
  std::vector<float> to_f32_vector() const;
  std::vector<int32_t> to_i32_vector() const;
  float item_f32(const std::vector<int64_t>& idx) const;

  std::string describe() const;  // "bfloat16[2, 3]"

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  DType dtype_ = DType::F32;
  Shape shape_;
  std::array<int64_t, kMaxDims> strides_{};

  void set_contiguous_strides();
};

// Copies between tensors of equal shape and dtype (any strides, any devices
// that the registered copy hooks support).
void copy_into(const Tensor& src, Tensor& dst);

// Backend hook for copies that touch device memory.
using DeviceCopyFn = void (*)(void* dst, Device dst_dev, const void* src, Device src_dev,
                              size_t bytes);
void register_device_copy(DeviceCopyFn fn);
// Backend hook for strided copies inside one device (same shape and dtype).
using DeviceStridedCopyFn = void (*)(const Tensor& src, Tensor& dst);
void register_device_strided_copy(DeviceStridedCopyFn fn);
void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);

// Backend hook for bulk downloads beside the engine's work: copies `n`
// segments of device memory back to back into `host_dst` on a stream of the
// calling thread's own and returns once they have landed. It never joins the
// engine's stream or a graph another thread is capturing, so a background
// thread (the snapshot writer) can read blocks that finished steps wrote.
using DeviceGatherFn = void (*)(void* host_dst, const void* const* src, const size_t* bytes, size_t n);
void register_device_gather(DeviceGatherFn fn);
void device_gather_to_host(void* host_dst, const void* const* src, const size_t* bytes, size_t n, Device src_dev);

}  // namespace ingot
