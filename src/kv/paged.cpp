#include "kv/paged.h"

#include <algorithm>
#include <cstring>

#include "kv/paged_attention.h"
#include "kv/quant.h"
#include "ops/ops.h"
#include "util/error.h"

namespace ingot::kv {

// The host versions of the write and gather kernels (kv/paged_attention.h).
// Rows of one plane for `tokens` positions starting at `pos` written into the
// pool: src is [T, KVH, dim] contiguous (cache dtype, or f32 when quantized).
// KV4 rows are rotated first; rows of block `open_block` are also kept exact
// in `open` ([KVH, bs, dim] float32, rotated).
namespace {

void write_plane(const LayerPool& lp, bool is_v, const int32_t* table, int64_t pos, const Tensor& src,
                 int64_t open_block, float* open) {
  const PlaneGeometry& g = lp.plane(is_v);
  const int64_t t = src.dim(0), kvh = src.dim(1), bs = lp.block_size();
  const KvQuant q = lp.options().quant;
  const bool rotate = quant_rotates(q);
  const int rc = is_v ? kVCodes : kKCodes, rp = is_v ? kVParams : kKParams;
  const auto* base = static_cast<const uint8_t*>(src.raw());
  const size_t src_row = q == KvQuant::None ? g.row_code_bytes : static_cast<size_t>(g.dim) * sizeof(float);
  std::vector<float> rot(rotate ? static_cast<size_t>(g.dim) : 0);
  for (int64_t i = 0; i < t; ++i) {
    const int64_t p = pos + i;
    const int32_t id = table[p / bs];
    const int64_t slot = p % bs;
    uint8_t* codes = lp.region(rc, id);
    for (int64_t h = 0; h < kvh; ++h) {
      const uint8_t* row = base + static_cast<size_t>(i * kvh + h) * src_row;
      const auto r = static_cast<size_t>(h * bs + slot);
      if (q == KvQuant::None) {
        std::memcpy(codes + r * g.row_code_bytes, row, g.row_code_bytes);
        continue;
      }
      const auto* x = reinterpret_cast<const float*>(row);
      if (rotate) {
        std::memcpy(rot.data(), x, rot.size() * sizeof(float));
        hadamard_row(rot.data(), g.dim);
        x = rot.data();
      }
      auto* params = reinterpret_cast<float*>(lp.region(rp, id)) + r * g.row_param_floats;
      quantize_row(q, x, g.dim, g.group, codes + r * g.row_code_bytes, params);
      if (open && p / bs == open_block) std::memcpy(open + r * static_cast<size_t>(g.dim), x, sizeof(float) * static_cast<size_t>(g.dim));
    }
  }
}

}  // namespace

void paged_write_cpu(const LayerPool& lp, const int32_t* table, int64_t pos, const Tensor& k, const Tensor& v,
                     const OpenBlock& open, TableMirrorSlot*) {
  write_plane(lp, false, table, pos, k, open.block, open.k);
  write_plane(lp, true, table, pos, v, open.block, open.v);
}

// [len, KVH, dim]: cache dtype rows copied, or dequantized float32 (the open
// block's exact rows where held; KV4 rotated back).
Tensor paged_gather_cpu(const LayerPool& lp, bool is_v, const int32_t* table, int64_t len, int64_t open_block,
                        const float* open, TableMirrorSlot*) {
  const PlaneGeometry& g = lp.plane(is_v);
  const int64_t kvh = lp.spec().kv_heads, bs = lp.block_size();
  const KvQuant q = lp.options().quant;
  const int rc = is_v ? kVCodes : kKCodes, rp = is_v ? kVParams : kKParams;
  Tensor out = Tensor::empty({len, kvh, g.dim}, q == KvQuant::None ? lp.elem_dtype() : DType::F32);
  auto* dst = static_cast<uint8_t*>(out.raw());
  const size_t out_row = q == KvQuant::None ? g.row_code_bytes : static_cast<size_t>(g.dim) * sizeof(float);
  for (int64_t p = 0; p < len; ++p) {
    const int32_t id = table[p / bs];
    const int64_t slot = p % bs;
    const uint8_t* codes = lp.region(rc, id);
    for (int64_t h = 0; h < kvh; ++h) {
      const auto r = static_cast<size_t>(h * bs + slot);
      uint8_t* o = dst + static_cast<size_t>(p * kvh + h) * out_row;
      if (q == KvQuant::None) {
        std::memcpy(o, codes + r * g.row_code_bytes, g.row_code_bytes);
        continue;
      }
      auto* of = reinterpret_cast<float*>(o);
      if (open && p / bs == open_block) {
        std::memcpy(of, open + r * static_cast<size_t>(g.dim), out_row);
      } else {
        const auto* params = reinterpret_cast<const float*>(lp.region(rp, id)) + r * g.row_param_floats;
        dequantize_row(q, codes + r * g.row_code_bytes, params, g.dim, g.group, of);
      }
      if (quant_rotates(q)) hadamard_row(of, g.dim);
    }
  }
  return out;
}

namespace {

const PagedKernels& kernels_of(const LayerPool& lp) {
  const PagedKernels* k = paged_kernels(lp.device());
  INGOT_CHECK(k != nullptr, "no paged KV kernels for ", device_name(lp.device()));
  return *k;
}

}  // namespace

PagedLayerCache::PagedLayerCache(std::shared_ptr<Pool> pool, LayerPool* layer)
    : pool_(std::move(pool)), lp_(layer) {
  INGOT_CHECK(lp_ != nullptr);
  if (keeps_open_block()) {
    const LayerSpec& s = lp_->spec();
    open_k_ = Tensor::zeros({s.kv_heads * lp_->block_size() * s.head_dim}, DType::F32, lp_->device());
    open_v_ = Tensor::zeros({s.kv_heads * lp_->block_size() * s.v_head_dim}, DType::F32, lp_->device());
  }
}

bool PagedLayerCache::keeps_open_block() const { return lp_->options().quant == KvQuant::Q4; }

PagedLayerCache::~PagedLayerCache() { release_from(0); }

void PagedLayerCache::release_from(size_t first_block) {
  for (size_t i = first_block; i < table_.size(); ++i) lp_->unref(table_[i]);
  table_.resize(std::min(first_block, table_.size()));
}

void PagedLayerCache::append(const Tensor& k, const Tensor& v) {
  const LayerSpec& s = lp_->spec();
  const int64_t t = k.dim(0), bs = lp_->block_size();
  if (k.ndim() != 3 || v.ndim() != 3 || k.dim(1) != s.kv_heads || k.dim(2) != s.head_dim || v.dim(0) != t ||
      v.dim(1) != s.kv_heads || v.dim(2) != s.v_head_dim)
    fail(ErrorKind::InvalidArgument, "paged KV append: k ", k.describe(), " v ", v.describe(),
         " do not match the layer (", s.kv_heads, " heads, dims ", s.head_dim, "/", s.v_head_dim, ")");
  if (t == 0) return;
  // Own every block that the new rows land in: fresh, or a private copy of a shared one.
  const auto first = static_cast<size_t>(len_ / bs), last = static_cast<size_t>((len_ + t - 1) / bs);
  for (size_t b = first; b <= last; ++b) {
    if (b == table_.size()) {
      table_.push_back(lp_->alloc());
    } else if (!lp_->writable(table_[b])) {
      table_[b] = lp_->copy_on_write(table_[b]);
    }
  }
  // The block left open after this append keeps exact rows when it was open
  // before or starts here (a block trimmed back into stays codes only).
  const int64_t end = len_ + t, last_blk = (end - 1) / bs;
  int64_t open = -1;
  if (keeps_open_block() && end % bs != 0 && (last_blk == open_block_ || last_blk * bs >= len_)) open = last_blk;
  const DType dt = lp_->options().quant == KvQuant::None ? lp_->elem_dtype() : DType::F32;
  if (k.device() != lp_->device() || v.device() != lp_->device())
    fail(ErrorKind::InvalidArgument, "paged KV append: k/v on ", device_name(k.device()), ", pool on ",
         device_name(lp_->device()));
  Tensor kc = ops::cast(k, dt).contiguous(), vc = ops::cast(v, dt).contiguous();
  const PagedKernels& kern = kernels_of(*lp_);
  OpenBlock ob;
  if (open >= 0) ob = OpenBlock{open, open_k_.data<float>(), open_v_.data<float>()};
  kern.write(*lp_, table_.data(), len_, kc, vc, ob, &mirror_);
  open_block_ = open;
  len_ = end;
}

PagedRowSlot PagedLayerCache::claim_row() {
  INGOT_CHECK(!keeps_open_block(), "paged KV: a claimed row in a store that keeps its open block");
  const auto b = static_cast<size_t>(len_ / lp_->block_size());
  if (b == table_.size())
    table_.push_back(lp_->alloc());
  else if (!lp_->writable(table_[b]))
    table_[b] = lp_->copy_on_write(table_[b]);
  return PagedRowSlot{table_.data(), len_, &mirror_};
}

int64_t PagedLayerCache::claim_step_row() {
  const PagedKernels& kern = kernels_of(*lp_);
  INGOT_CHECK(kern.table_handle != nullptr, "paged KV: no step kernels for this pool's device");
  const PagedRowSlot slot = claim_row();
  return kern.table_handle(*lp_, slot.table, static_cast<int64_t>(table_.size()), &mirror_);
}

void PagedLayerCache::count_claimed_row() {
  open_block_ = -1;
  ++len_;
}

std::pair<Tensor, Tensor> PagedLayerCache::fetch(int64_t* first_pos) const {
  *first_pos = 0;
  const PagedKernels& kern = kernels_of(*lp_);
  const bool open = open_block_ >= 0;
  return {kern.gather(*lp_, false, table_.data(), len_, open_block_, open ? open_rows(false) : nullptr, &mirror_),
          kern.gather(*lp_, true, table_.data(), len_, open_block_, open ? open_rows(true) : nullptr, &mirror_)};
}

PagedKV PagedLayerCache::view() const {
  PagedKV kv{lp_, table_.data(), static_cast<int64_t>(table_.size()), len_};
  kv.mirror = &mirror_;
  if (open_block_ >= 0) {
    kv.open_block = open_block_;
    kv.open_k = open_rows(false);
    kv.open_v = open_rows(true);
  }
  return kv;
}

Tensor PagedLayerCache::attend(const Tensor& q, AttnParams p) const {
  if (lp_->options().path == AttendPath::Gather) return LayerCache::attend(q, p);
  p.q_offset = len_ - q.dim(0);
  return paged_attention(q, view(), p);
}

void PagedLayerCache::trim(int64_t n) {
  if (n < 0 || n > len_) fail(ErrorKind::InvalidArgument, "cannot trim ", n, " of ", len_, " cached tokens");
  len_ -= n;
  const int64_t bs = lp_->block_size();
  // Trimmed back into a closed block: its rows are codes only from here on.
  if (len_ % bs == 0 || len_ / bs != open_block_) open_block_ = -1;
  release_from(static_cast<size_t>((len_ + bs - 1) / bs));
}

std::unique_ptr<LayerCache> PagedLayerCache::clone() const {
  auto c = std::make_unique<PagedLayerCache>(pool_, lp_);
  for (int32_t id : table_) lp_->ref(id);
  c->table_ = table_;
  c->len_ = len_;
  c->open_block_ = open_block_;
  if (open_block_ >= 0) {
    c->open_k_ = open_k_.clone();
    c->open_v_ = open_v_.clone();
  }
  return c;
}

void PagedLayerCache::publish() {
  for (int32_t id : table_) lp_->freeze(id);
}

void PagedLayerCache::adopt(std::vector<int32_t> table, int64_t tokens, const float* open_k, const float* open_v) {
  INGOT_CHECK(table_.empty() && len_ == 0, "adopt into a non-empty paged cache");
  INGOT_CHECK(static_cast<int64_t>(table.size()) * lp_->block_size() >= tokens);
  table_ = std::move(table);
  len_ = tokens;
  if (open_k && open_v) {
    const int64_t bs = lp_->block_size();
    INGOT_CHECK(keeps_open_block() && tokens % bs != 0, "exact open-block rows for a store that keeps none");
    const Device d = lp_->device();
    device_copy(open_k_.raw(), d, open_k, d, open_floats(false) * sizeof(float));
    device_copy(open_v_.raw(), d, open_v, d, open_floats(true) * sizeof(float));
    open_block_ = tokens / bs;
  }
}

void publish(SequenceCache& seq) {
  for (int i = 0; i < seq.num_layers(); ++i)
    if (auto* p = dynamic_cast<PagedLayerCache*>(&seq.layer(i))) p->publish();
}

}  // namespace ingot::kv
