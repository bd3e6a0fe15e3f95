#include "kv/pool.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "kv/paged_attention.h"
#include "util/error.h"

namespace ingot::kv {

namespace {

std::atomic<int64_t> g_live_slab_bytes{0};

constexpr size_t kRegionAlign = 4096;  // slab regions start page-aligned (snapshot restore adopts them)

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace

PlaneGeometry plane_geometry(int64_t dim, int64_t kvh, const PoolOptions& opt, DType elem) {
  PlaneGeometry g;
  g.dim = dim;
  if (opt.quant == KvQuant::None) {
    g.row_code_bytes = static_cast<size_t>(dim) * dtype_size(elem);
  } else {
    // A head narrower than the configured group is split in four: one group per
    // narrow head loses too much to outlier channels (docs/kv-cache.md).
    g.group = opt.group_size <= dim ? opt.group_size : (dim % 8 == 0 ? dim / 4 : dim);
    if (g.group <= 0 || dim % g.group != 0 || (opt.quant == KvQuant::Q4 && g.group % 2 != 0))
      fail(ErrorKind::InvalidArgument, "KV group size ", opt.group_size, " does not divide head dim ", dim,
           opt.quant == KvQuant::Q4 ? " into even groups" : "");
    g.row_code_bytes = static_cast<size_t>(opt.quant == KvQuant::Q8 ? dim : dim / 2);
    g.row_param_floats = static_cast<size_t>(2 * (dim / g.group));
  }
  const auto rows = static_cast<size_t>(kvh * opt.block_size);
  g.block_code_bytes = rows * g.row_code_bytes;
  g.block_param_bytes = rows * g.row_param_floats * sizeof(float);
  return g;
}

const char* kv_quant_name(KvQuant q) {
  switch (q) {
    case KvQuant::None: return "none";
    case KvQuant::Q8: return "kv8";
    case KvQuant::Q4: return "kv4";
  }
  return "?";
}

LayerPool::LayerPool(const LayerSpec& spec, DType elem, Device device, const PoolOptions& opt)
    : spec_(spec), elem_(elem), device_(device), opt_(opt) {
  if (opt.block_size <= 0) fail(ErrorKind::InvalidArgument, "KV block size must be positive");
  if (opt.growth <= 1.0) fail(ErrorKind::InvalidArgument, "KV pool growth factor must exceed 1");
  if (!paged_kernels(device))
    fail(ErrorKind::Unsupported, "paged KV stores have no kernels for device ", device_name(device));
  if (elem != DType::F32 && elem != DType::BF16 && elem != DType::F16)
    fail(ErrorKind::InvalidArgument, "paged KV store dtype must be float32, bfloat16 or float16");
  kg_ = plane_geometry(spec.head_dim, spec.kv_heads, opt, elem);
  vg_ = plane_geometry(spec.v_head_dim, spec.kv_heads, opt, elem);
  std::lock_guard<std::mutex> lk(mu_);
  grow_locked(std::max<int64_t>(1, opt.initial_blocks));
}

LayerPool::~LayerPool() { g_live_slab_bytes -= grown_bytes_; }

int64_t live_pool_slab_bytes() { return g_live_slab_bytes.load(); }

size_t LayerPool::region_block_bytes(int r) const {
  switch (r) {
    case kKCodes: return kg_.block_code_bytes;
    case kKParams: return kg_.block_param_bytes;
    case kVCodes: return vg_.block_code_bytes;
    default: return vg_.block_param_bytes;
  }
}

int32_t LayerPool::add_slab_locked(Slab s) {
  s.base = static_cast<int32_t>(loc_.size());
  const auto si = static_cast<int32_t>(slabs_.size());
  for (int64_t i = 0; i < s.n; ++i) {
    loc_.push_back({si, static_cast<int32_t>(i)});
    refs_.push_back(0);
    frozen_.push_back(0);
  }
  slabs_.push_back(std::move(s));
  return slabs_.back().base;
}

void LayerPool::grow_locked(int64_t n) {
  Slab s;
  s.n = n;
  size_t at = 0;
  for (int r = 0; r < 4; ++r) {
    s.off[static_cast<size_t>(r)] = at;
    at = align_up(at + region_block_bytes(r) * static_cast<size_t>(n), kRegionAlign);
  }
  s.mem = allocate_storage(std::max<size_t>(at, 1), device_);
  grown_bytes_ += static_cast<int64_t>(at);
  g_live_slab_bytes += static_cast<int64_t>(at);
  const int32_t base = add_slab_locked(std::move(s));
  // Lowest ids first out of the free list (back of the vector).
  for (int64_t i = n - 1; i >= 0; --i) free_.push_back(base + static_cast<int32_t>(i));
}

int32_t LayerPool::alloc() {
  std::lock_guard<std::mutex> lk(mu_);
  if (free_.empty()) {
    const auto total = static_cast<double>(loc_.size());
    grow_locked(std::max<int64_t>(1, static_cast<int64_t>(std::ceil(total * (opt_.growth - 1.0)))));
  }
  int32_t id = free_.back();
  free_.pop_back();
  refs_[static_cast<size_t>(id)] = 1;
  frozen_[static_cast<size_t>(id)] = 0;
  return id;
}

void LayerPool::ref(int32_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  INGOT_CHECK(refs_.at(static_cast<size_t>(id)) > 0, "ref of a free KV block");
  ++refs_[static_cast<size_t>(id)];
}

void LayerPool::unref(int32_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  int32_t& r = refs_.at(static_cast<size_t>(id));
  INGOT_CHECK(r > 0, "unref of a free KV block");
  if (--r == 0) {
    frozen_[static_cast<size_t>(id)] = 0;
    free_.push_back(id);
  }
}

int LayerPool::refcount(int32_t id) const {
  std::lock_guard<std::mutex> lk(mu_);
  return refs_.at(static_cast<size_t>(id));
}

bool LayerPool::writable(int32_t id) const {
  std::lock_guard<std::mutex> lk(mu_);
  return refs_.at(static_cast<size_t>(id)) == 1 && !frozen_[static_cast<size_t>(id)];
}

void LayerPool::freeze(int32_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  frozen_.at(static_cast<size_t>(id)) = 1;
}

int32_t LayerPool::copy_on_write(int32_t src) {
  const int32_t dst = alloc();
  for (int r = 0; r < 4; ++r) {
    if (!region_block_bytes(r)) continue;
    Tensor to = region_view(r, dst);
    copy_into(region_view(r, src), to);  // a memcpy on the host, a device copy on a GPU
  }
  unref(src);
  return dst;
}

int64_t LayerPool::total_blocks() const {
  std::lock_guard<std::mutex> lk(mu_);
  return static_cast<int64_t>(loc_.size());
}

int64_t LayerPool::free_blocks() const {
  std::lock_guard<std::mutex> lk(mu_);
  return static_cast<int64_t>(free_.size());
}

int64_t LayerPool::slab_count() const {
  std::lock_guard<std::mutex> lk(mu_);
  return static_cast<int64_t>(slabs_.size());
}

int64_t LayerPool::total_refs() const {
  std::lock_guard<std::mutex> lk(mu_);
  int64_t s = 0;
  for (int32_t r : refs_) s += r;
  return s;
}

uint8_t* LayerPool::region(int r, int32_t id) const {
  const Loc& l = loc_[static_cast<size_t>(id)];
  const Slab& s = slabs_[static_cast<size_t>(l.slab)];
  return static_cast<uint8_t*>(s.mem->data()) + s.off[static_cast<size_t>(r)] +
         static_cast<size_t>(l.local) * region_block_bytes(r);
}

Tensor LayerPool::region_view(int r, int32_t id) const {
  std::shared_ptr<Storage> mem;
  size_t off = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    const Loc& l = loc_.at(static_cast<size_t>(id));
    const Slab& s = slabs_[static_cast<size_t>(l.slab)];
    mem = s.mem;
    off = s.off[static_cast<size_t>(r)] + static_cast<size_t>(l.local) * region_block_bytes(r);
  }
  return Tensor::from_storage(std::move(mem), off, {static_cast<int64_t>(region_block_bytes(r))}, DType::U8);
}

int32_t LayerPool::adopt_slab(std::shared_ptr<Storage> mem, const std::array<size_t, 4>& off, int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  Slab s;
  s.mem = std::move(mem);
  s.off = off;
  s.n = n;
  const int32_t base = add_slab_locked(std::move(s));
  for (int64_t i = 0; i < n; ++i) {
    refs_[static_cast<size_t>(base + i)] = 1;
    frozen_[static_cast<size_t>(base + i)] = 1;
  }
  return base;
}

std::shared_ptr<Pool> Pool::create(const std::vector<LayerSpec>& layers, DType dtype, Device device,
                                   const PoolOptions& opt) {
  return std::make_shared<Pool>(layers, dtype, device, opt);
}

Pool::Pool(const std::vector<LayerSpec>& layers, DType dtype, Device device, const PoolOptions& opt)
    : layout_(layers), dtype_(dtype), device_(device), opt_(opt) {
  for (const auto& s : layers)
    // Sliding-window and recurrent layers keep their own per-sequence stores.
    layers_.push_back(s.window > 0 || s.kind == LayerKind::LinearState ? nullptr
                                                                       : std::make_unique<LayerPool>(s, dtype, device, opt));
}

int64_t Pool::used_blocks() const {
  int64_t n = 0;
  for (const auto& l : layers_)
    if (l) n += l->used_blocks();
  return n;
}

int64_t Pool::total_blocks() const {
  int64_t n = 0;
  for (const auto& l : layers_)
    if (l) n += l->total_blocks();
  return n;
}

int64_t Pool::total_refs() const {
  int64_t n = 0;
  for (const auto& l : layers_)
    if (l) n += l->total_refs();
  return n;
}

size_t Pool::bytes_per_block() const {
  size_t n = 0;
  for (const auto& l : layers_)
    if (l)
      for (int r = 0; r < 4; ++r) n += l->region_block_bytes(r);
  return n;
}

int64_t Pool::used_bytes() const {
  int64_t n = 0;
  for (const auto& l : layers_)
    if (l)
      for (int r = 0; r < 4; ++r) n += l->used_blocks() * static_cast<int64_t>(l->region_block_bytes(r));
  return n;
}

int64_t Pool::allocated_bytes() const {
  int64_t n = 0;
  for (const auto& l : layers_)
    if (l)
      for (int r = 0; r < 4; ++r) n += l->total_blocks() * static_cast<int64_t>(l->region_block_bytes(r));
  return n;
}

std::string Pool::scheme() const {
  std::string s = opt_.quant == KvQuant::None ? std::string("paged/") + dtype_name(dtype_)
                                              : str_cat(kv_quant_name(opt_.quant), "/g", opt_.group_size);
  return str_cat(s, "/bs", opt_.block_size);
}

}  // namespace ingot::kv
