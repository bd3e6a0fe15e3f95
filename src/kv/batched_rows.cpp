#include "kv/batched_rows.h"

#include <map>
#include <mutex>

#include "kv/contiguous.h"
#include "kv/paged.h"
#include "kv/paged_attention.h"
#include "ops/ops.h"
#include "util/error.h"

namespace ingot::kv {

namespace {

std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::map<Device, RowsStepFn>& registry() {
  static std::map<Device, RowsStepFn> r;
  return r;
}
RowsStepFn rows_kernels(Device d) {
  std::lock_guard<std::mutex> lock(mu());
  auto it = registry().find(d);
  return it == registry().end() ? nullptr : it->second;
}

bool same_shape(const LayerSpec& a, const LayerSpec& b) {
  return a.kv_heads == b.kv_heads && a.head_dim == b.head_dim && a.v_head_dim == b.v_head_dim && a.window == b.window;
}

// Paged stores read in place, on a device whose kernels attend many rows in
// one job: each row appended to its own blocks, then one attention call.
Tensor append_attend_paged_rows(const std::vector<LayerCache*>& layers, const Tensor& q, const Tensor& k,
                                const Tensor& v, const AttnParams& p) {
  std::vector<PagedLayerCache*> ps;
  ps.reserve(layers.size());
  for (LayerCache* l : layers) {
    auto* c = dynamic_cast<PagedLayerCache*>(l);
    if (!c || c->layer_pool().options().path != AttendPath::Direct) return {};
    if (!ps.empty() && (c->layer_pool().device() != ps.front()->layer_pool().device() ||
                        !same_shape(c->layer_pool().spec(), ps.front()->layer_pool().spec())))
      return {};
    ps.push_back(c);
  }
  const PagedKernels* kern = paged_kernels(ps.front()->layer_pool().device());
  if (!kern || !kern->attend_rows) return {};
  // Unquantized rows of one pool: one write job for every row; else each
  // store appends its own (quantizing, keeping an open block).
  const LayerPool& lp = ps.front()->layer_pool();
  const LayerSpec& s = lp.spec();
  bool one_write = kern->write_rows && lp.options().quant == KvQuant::None && k.ndim() == 3 && v.ndim() == 3 &&
                   k.dim(1) == s.kv_heads && k.dim(2) == s.head_dim && v.dim(1) == s.kv_heads &&
                   v.dim(2) == s.v_head_dim && k.device() == lp.device() && v.device() == lp.device();
  for (const PagedLayerCache* c : ps) one_write = one_write && &c->layer_pool() == &lp;
  if (one_write) {
    std::vector<PagedRowSlot> slots;
    slots.reserve(ps.size());
    for (PagedLayerCache* c : ps) slots.push_back(c->claim_row());
    // Float32 rows go as they are: the write rounds them (no cast launches).
    const DType dt = k.dtype() == DType::F32 && v.dtype() == DType::F32 ? DType::F32 : lp.elem_dtype();
    kern->write_rows(lp, slots, ops::cast(k, dt).contiguous(), ops::cast(v, dt).contiguous());
    for (PagedLayerCache* c : ps) c->count_claimed_row();
  } else {
    for (size_t i = 0; i < ps.size(); ++i) {
      const auto r = static_cast<int64_t>(i);
      ps[i]->append(k.slice(0, r, r + 1), v.slice(0, r, r + 1));
    }
  }
  std::vector<PagedKV> views;
  views.reserve(ps.size());
  for (PagedLayerCache* c : ps) views.push_back(c->view());
  return kern->attend_rows(q, views, p);
}

// A replayed step over paged stores of one pool: the tables come from the
// step's device handles, so nothing of the sequences' host state is read
// (claim_row / count_claimed_row run around each replay, not here).
Tensor step_paged_rows(const std::vector<LayerCache*>& layers, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& positions, const StepRows& step, const AttnParams& p) {
  const auto* first = dynamic_cast<PagedLayerCache*>(layers.front());
  if (!first || !step.tables.defined()) return {};
  const LayerPool& lp = first->layer_pool();
  for (LayerCache* l : layers) {
    const auto* c = dynamic_cast<PagedLayerCache*>(l);
    if (!c || &c->layer_pool() != &lp) return {};
  }
  const PagedKernels* kern = paged_kernels(lp.device());
  if (!kern || !kern->step_rows || !step_rows_read(lp.options().quant) || lp.options().path != AttendPath::Direct)
    return {};
  return kern->step_rows(lp, q, k, v, positions, *step.kv_lens, step.tables, step.max_keys, p);
}

}  // namespace

void register_rows_kernels(Device d, RowsStepFn fn) {
  std::lock_guard<std::mutex> lock(mu());
  registry()[d] = fn;
}

Tensor append_attend_rows(const std::vector<LayerCache*>& layers, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& positions, const StepRows* step, const AttnParams& p) {
  const auto n = static_cast<int64_t>(layers.size());
  const Tensor* kv_lens = step ? step->kv_lens : nullptr;
  if (n < 1 || q.ndim() != 3 || q.dim(0) != n || k.dim(0) != n || v.dim(0) != n || positions.numel() != n ||
      (step && (!kv_lens || kv_lens->numel() != n)))
    return {};
  // Paged tables are read from the step's handles, even for one row: a
  // replayed step cannot read a sequence's host table.
  if (step && step->tables.defined()) return step_paged_rows(layers, q, k, v, positions, *step, p);
  // One sequence is one launch already.
  if (n < 2) return {};
  if (!kv_lens) {
    Tensor o = append_attend_paged_rows(layers, q, k, v, p);
    if (o.defined()) return o;
  }
  std::vector<ContiguousLayerCache*> cs;
  cs.reserve(layers.size());
  for (LayerCache* l : layers) {
    auto* c = dynamic_cast<ContiguousLayerCache*>(l);
    if (!c) return {};
    cs.push_back(c);
  }
  const ContiguousLayerCache& first = *cs[0];
  const RowsStepFn fn = rows_kernels(first.device());
  if (!fn) return {};
  for (const auto* c : cs)
    if (c->device() != first.device() || c->dtype() != first.dtype() || !same_shape(c->spec(), first.spec()) ||
        (kv_lens && !c->keys().defined()))
      return {};
  std::vector<RowsKV> rows(cs.size());
  for (size_t i = 0; i < cs.size(); ++i) {
    ContiguousLayerCache& c = *cs[i];
    // Plain steps grow the store as append() would; graph steps keep the reserved rows.
    if (!kv_lens) c.make_room(c.length() + 1);
    rows[i].k = c.keys().raw();
    rows[i].v = c.values().raw();
    rows[i].kv_len = kv_lens ? kv_lens->data<int32_t>() + i : nullptr;
    rows[i].keys = kv_lens ? c.keys().dim(0) : c.length() + 1;
  }
  Tensor out = fn(rows, first.dtype(), first.spec(), q, k, v, positions, p);
  if (out.defined() && !kv_lens)
    for (auto* c : cs) c->advance(1);
  return out;
}

Tensor append_attend_batch(const std::vector<LayerCache*>& layers, const std::vector<int64_t>& n_tokens,
                           const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& positions,
                           const AttnParams& p) {
  INGOT_CHECK(layers.size() == n_tokens.size(), "append_attend_batch: ", layers.size(), " layers for ",
              n_tokens.size(), " sequences");
  std::vector<Tensor> outs;
  auto alone = [&](size_t i, int64_t a) {
    const int64_t b = a + n_tokens[i];
    layers[i]->append(k.slice(0, a, b), v.slice(0, a, b));
    outs.push_back(layers[i]->attend(q.slice(0, a, b).contiguous(), p));
  };
  int64_t row = 0;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j < layers.size() && n_tokens[j] == 1) ++j;
    if (j - i >= 2) {
      const auto a = row, b = row + static_cast<int64_t>(j - i);
      const std::vector<LayerCache*> run(layers.begin() + static_cast<std::ptrdiff_t>(i),
                                         layers.begin() + static_cast<std::ptrdiff_t>(j));
      Tensor o = append_attend_rows(run, q.slice(0, a, b), k.slice(0, a, b), v.slice(0, a, b),
                                    positions.slice(0, a, b), nullptr, p);
      if (o.defined()) {
        outs.push_back(std::move(o));
      } else {
        for (size_t r = i; r < j; ++r) alone(r, a + static_cast<int64_t>(r - i));
      }
      row = b;
      i = j;
      continue;
    }
    alone(i, row);
    row += n_tokens[i];
    ++i;
  }
  return outs.size() == 1 ? outs[0] : ops::concat_rows(outs);
}

}  // namespace ingot::kv
