#include "tensor/tensor.h"

#include <cstring>
#include <sstream>

#include "tensor/half.h"
#include "util/error.h"

namespace ingot {

Shape::Shape(std::initializer_list<int64_t> dims) {
  INGOT_CHECK(dims.size() <= kMaxDims);
  for (int64_t d : dims) dims_[static_cast<size_t>(ndim_++)] = d;
}

Shape::Shape(const std::vector<int64_t>& dims) {
  INGOT_CHECK(dims.size() <= kMaxDims);
  for (int64_t d : dims) dims_[static_cast<size_t>(ndim_++)] = d;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (ndim_ != o.ndim_) return false;
  for (int i = 0; i < ndim_; ++i)
    if (dims_[static_cast<size_t>(i)] != o.dims_[static_cast<size_t>(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < ndim_; ++i) os << (i ? ", " : "") << dims_[static_cast<size_t>(i)];
  os << "]";
  return os.str();
}

void Tensor::set_contiguous_strides() {
  int64_t s = 1;
  for (int i = ndim() - 1; i >= 0; --i) {
    strides_[static_cast<size_t>(i)] = s;
    s *= shape_[i];
  }
}

size_t Tensor::nbytes() const { return dtype_bytes(dtype_, numel()); }

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.set_contiguous_strides();
  size_t bytes = t.nbytes();
  t.storage_ = allocate_storage(bytes ? bytes : 1, device);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (device == Device::CPU) {
    std::memset(t.raw(), 0, t.nbytes());
  } else {
    std::vector<uint8_t> z(t.nbytes(), 0);
    device_copy(t.raw(), device, z.data(), Device::CPU, z.size());
  }
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> s, size_t offset, const Shape& shape,
                            DType dtype) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.set_contiguous_strides();
  INGOT_CHECK(offset + t.nbytes() <= s->bytes(), "view past the end of its storage");
  t.storage_ = std::move(s);
  t.offset_ = offset;
  return t;
}

Tensor Tensor::from_f32(const std::vector<float>& v, const Shape& shape) {
  INGOT_CHECK(static_cast<int64_t>(v.size()) == shape.numel());
  Tensor t = empty(shape, DType::F32);
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * 4);
  return t;
}

Tensor Tensor::from_i32(const std::vector<int32_t>& v, const Shape& shape) {
  INGOT_CHECK(static_cast<int64_t>(v.size()) == shape.numel());
  Tensor t = empty(shape, DType::I32);
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * 4);
  return t;
}

bool Tensor::is_contiguous() const {
  int64_t s = 1;
  for (int i = ndim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[static_cast<size_t>(i)] != s) return false;
    s *= shape_[i];
  }
  return true;
}

Tensor Tensor::reshape(const Shape& s) const {
  Shape ns = s;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < ns.ndim(); ++i) {
    if (ns[i] == -1) {
      INGOT_CHECK(infer < 0, "reshape: more than one -1");
      infer = i;
    } else {
      known *= ns[i];
    }
  }
  if (infer >= 0) ns[infer] = known ? numel() / known : 0;
  INGOT_CHECK(ns.numel() == numel(), "reshape ", shape_.str(), " to ", ns.str());
  Tensor src = is_contiguous() ? *this : contiguous();
  Tensor t = src;
  t.shape_ = ns;
  t.set_contiguous_strides();
  return t;
}

Tensor Tensor::slice(int dim, int64_t start, int64_t end) const {
  if (dim < 0) dim += ndim();
  INGOT_CHECK(dim >= 0 && dim < ndim() && 0 <= start && start <= end && end <= shape_[dim],
              "slice [", start, ", ", end, ") of dim ", dim, " of ", shape_.str());
  Tensor t = *this;
  INGOT_CHECK(!is_quantized(dtype_) || dim == 0, "quantized tensors slice by rows only");
  t.offset_ += dtype_bytes(dtype_, start * strides_[static_cast<size_t>(dim)]);
  t.shape_[dim] = end - start;
  return t;
}

Tensor Tensor::select(int dim, int64_t index) const {
  if (dim < 0) dim += ndim();
  Tensor t = slice(dim, index, index + 1);
  for (int i = dim; i + 1 < ndim(); ++i) {
    t.shape_[i] = t.shape_[i + 1];
    t.strides_[static_cast<size_t>(i)] = t.strides_[static_cast<size_t>(i + 1)];
  }
  std::vector<int64_t> dims = t.shape_.vec();
  dims.pop_back();
  auto strides = t.strides_;
  t.shape_ = Shape(dims);
  t.strides_ = strides;
  return t;
}

Tensor Tensor::transpose(int a, int b) const {
  if (a < 0) a += ndim();
  if (b < 0) b += ndim();
  Tensor t = *this;
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[static_cast<size_t>(a)], t.strides_[static_cast<size_t>(b)]);
  return t;
}

Tensor Tensor::unsqueeze(int dim) const {
  if (dim < 0) dim += ndim() + 1;
  std::vector<int64_t> dims = shape_.vec();
  std::vector<int64_t> strides(strides_.begin(), strides_.begin() + ndim());
  int64_t st = dim < ndim() ? strides[static_cast<size_t>(dim)] * shape_[dim] : 1;
  dims.insert(dims.begin() + dim, 1);
  strides.insert(strides.begin() + dim, st);
  Tensor t = *this;
  t.shape_ = Shape(dims);
  for (size_t i = 0; i < strides.size(); ++i) t.strides_[i] = strides[i];
  return t;
}

namespace {

// Strided element copy on the host, innermost dimension contiguous-fast.
void strided_copy_host(const Tensor& src, Tensor& dst) {
  const size_t es = dtype_size(src.dtype());
  const int nd = src.ndim();
  const int64_t n = src.numel();
  if (n == 0) return;
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  const auto* sbase = static_cast<const uint8_t*>(src.raw());
  auto* dbase = static_cast<uint8_t*>(dst.raw());
  int64_t inner = nd ? src.dim(nd - 1) : 1;
  bool inner_contig = nd == 0 || (src.stride(nd - 1) == 1 && dst.stride(nd - 1) == 1);
  int64_t outer = n / inner;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t soff = 0, doff = 0;
    for (int d = 0; d + 1 < nd; ++d) {
      soff += idx[static_cast<size_t>(d)] * src.stride(d);
      doff += idx[static_cast<size_t>(d)] * dst.stride(d);
    }
    if (inner_contig) {
      std::memcpy(dbase + doff * static_cast<int64_t>(es), sbase + soff * static_cast<int64_t>(es),
                  static_cast<size_t>(inner) * es);
    } else {
      for (int64_t i = 0; i < inner; ++i)
        std::memcpy(dbase + (doff + i * dst.stride(nd - 1)) * static_cast<int64_t>(es),
                    sbase + (soff + i * src.stride(nd - 1)) * static_cast<int64_t>(es), es);
    }
    for (int d = nd - 2; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < src.dim(d)) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

DeviceCopyFn g_device_copy = nullptr;
DeviceStridedCopyFn g_device_strided_copy = nullptr;
DeviceGatherFn g_device_gather = nullptr;

}  // namespace

void register_device_copy(DeviceCopyFn fn) { g_device_copy = fn; }
void register_device_strided_copy(DeviceStridedCopyFn fn) { g_device_strided_copy = fn; }
void register_device_gather(DeviceGatherFn fn) { g_device_gather = fn; }

void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (dst_dev == Device::CPU && src_dev == Device::CPU) {
    std::memcpy(dst, src, bytes);
    return;
  }
  if (!g_device_copy) fail(ErrorKind::Unsupported, "no device copy available in this build");
  g_device_copy(dst, dst_dev, src, src_dev, bytes);
}

void device_gather_to_host(void* host_dst, const void* const* src, const size_t* bytes, size_t n, Device src_dev) {
  if (src_dev == Device::CPU) {
    auto* d = static_cast<uint8_t*>(host_dst);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(d, src[i], bytes[i]);
      d += bytes[i];
    }
    return;
  }
  if (!g_device_gather) fail(ErrorKind::Unsupported, "no device gather available in this build");
  g_device_gather(host_dst, src, bytes, n);
}

void copy_into(const Tensor& src, Tensor& dst) {
  INGOT_CHECK(src.shape() == dst.shape() && src.dtype() == dst.dtype(), "copy ", src.describe(),
              " into ", dst.describe());
  if (src.is_contiguous() && dst.is_contiguous()) {
    device_copy(dst.raw(), dst.device(), src.raw(), src.device(), src.nbytes());
    return;
  }
  if (src.device() != Device::CPU && src.device() == dst.device() && g_device_strided_copy) {
    g_device_strided_copy(src, dst);
    return;
  }
  INGOT_CHECK(src.device() == Device::CPU && dst.device() == Device::CPU,
              "strided copies across devices: make the source contiguous first");
  INGOT_CHECK(!is_quantized(src.dtype()));
  strided_copy_host(src, dst);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device());
  copy_into(*this, t);
  return t;
}

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  Tensor src = contiguous();
  if (src.device() != Device::CPU && d != Device::CPU) src = src.to(Device::CPU);
  Tensor t = empty(shape_, dtype_, d);
  device_copy(t.raw(), d, src.raw(), src.device(), src.nbytes());
  return t;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype_) return *this;
  INGOT_CHECK(device() == Device::CPU, "dtype conversion on the host only; use ops::cast");
  Tensor src = contiguous();
  Tensor out = empty(shape_, target, Device::CPU);
  const int64_t n = numel();
  auto load = [&](int64_t i) -> float {
    switch (src.dtype()) {
      case DType::F32: return src.data<float>()[i];
      case DType::BF16: return bf16_to_f32(src.data<uint16_t>()[i]);
      case DType::F16: return f16_to_f32(src.data<uint16_t>()[i]);
      case DType::I32: return static_cast<float>(src.data<int32_t>()[i]);
      case DType::I64: return static_cast<float>(src.data<int64_t>()[i]);
      default: fail(ErrorKind::Unsupported, "cannot convert from ", dtype_name(src.dtype()));
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    float v = load(i);
    switch (target) {
      case DType::F32: out.data<float>()[i] = v; break;
      case DType::BF16: out.data<uint16_t>()[i] = f32_to_bf16(v); break;
      case DType::F16: out.data<uint16_t>()[i] = f32_to_f16(v); break;
      case DType::I32: out.data<int32_t>()[i] = static_cast<int32_t>(v); break;
      default: fail(ErrorKind::Unsupported, "cannot convert to ", dtype_name(target));
    }
  }
  return out;
}

std::vector<float> Tensor::to_f32_vector() const {
  Tensor t = to(Device::CPU).to(DType::F32).contiguous();
  const float* p = t.data<float>();
  return {p, p + t.numel()};
}

std::vector<int32_t> Tensor::to_i32_vector() const {
  Tensor t = to(Device::CPU).contiguous();
  INGOT_CHECK(t.dtype() == DType::I32);
  const int32_t* p = t.data<int32_t>();
  return {p, p + t.numel()};
}

float Tensor::item_f32(const std::vector<int64_t>& idx) const {
  INGOT_CHECK(static_cast<int>(idx.size()) == ndim() && device() == Device::CPU);
  int64_t off = 0;
  for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * strides_[i];
  switch (dtype_) {
    case DType::F32: return data<float>()[off];
    case DType::BF16: return bf16_to_f32(data<uint16_t>()[off]);
    case DType::F16: return f16_to_f32(data<uint16_t>()[off]);
    case DType::I32: return static_cast<float>(data<int32_t>()[off]);
    default: fail(ErrorKind::Unsupported, "item of ", dtype_name(dtype_));
  }
}

std::string Tensor::describe() const { return str_cat(dtype_name(dtype_), shape_.str()); }

}  // namespace ingot
