#include "stepgraph/decode_steps.h"

#include <algorithm>

#include "kv/paged.h"
#include "ops/backend.h"
#include "util/error.h"

namespace ingot {

struct DecodeSteps::Entry {
  int64_t n = 0, max_keys = 0;
  StepInputs in;     // fixed device buffers the graph reads
  BatchInput batch;  // n one-token sequences reading `in`
  Tensor logits;     // what the graph writes
  std::unique_ptr<StepGraph> graph;  // declared last: destroyed before the buffers it reads
};

std::unique_ptr<DecodeSteps> DecodeSteps::create(Model& model, size_t max_graphs) {
  if (!model.supports_step_inputs()) return nullptr;
  // Probe with an empty step: does this backend capture?
  const bool captures = backend(model.device()).capture_step([] {}) != nullptr;
  return std::unique_ptr<DecodeSteps>(new DecodeSteps(model, captures, std::max<size_t>(1, max_graphs)));
}

DecodeSteps::DecodeSteps(Model& model, bool captures, size_t max_graphs)
    : model_(model), captures_(captures), max_graphs_(max_graphs) {}

DecodeSteps::~DecodeSteps() = default;

int64_t DecodeSteps::key_bucket(int64_t keys) {
  int64_t b = 512;
  while (b < keys) b *= 2;
  return b;
}

int64_t DecodeSteps::batch_bucket(int64_t n) {
  if (n <= 2) return n;
  if (n <= 4) return 4;
  return (n + 7) / 8 * 8;
}

bool DecodeSteps::takes(const std::vector<kv::SequenceCache*>& caches) const {
  if (caches.empty()) return false;
  const int layers = caches.front()->num_layers();
  if (layers == 0) return false;
  std::vector<const kv::LayerPool*> pools(static_cast<size_t>(layers), nullptr);
  for (kv::SequenceCache* c : caches) {
    if (c->num_layers() != layers) return false;
    for (int li = 0; li < layers; ++li) {
      const auto* p = dynamic_cast<const kv::PagedLayerCache*>(&c->layer(li));
      if (!p || p->keeps_open_block()) return false;
      const kv::LayerPool& lp = p->layer_pool();
      auto& first = pools[static_cast<size_t>(li)];
      if (!first) {
        const kv::PagedKernels* k = kv::paged_kernels(lp.device());
        if (!kv::step_rows_read(lp.options().quant) || lp.options().path != kv::AttendPath::Direct ||
            lp.device() != model_.device() || !k || !k->step_rows || !k->table_handle)
          return false;
        first = &lp;
      } else if (first != &lp) {
        return false;
      }
    }
  }
  return true;
}

DecodeSteps::Entry& DecodeSteps::entry_for(int64_t n, int64_t max_keys) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if ((*it)->n == n && (*it)->max_keys == max_keys) {
      entries_.splice(entries_.begin(), entries_, it);
      return *entries_.front();
    }
  while (entries_.size() >= max_graphs_) entries_.pop_back();
  auto e = std::make_unique<Entry>();
  e->n = n;
  e->max_keys = max_keys;
  const Device d = model_.device();
  e->in.ids = Tensor::zeros({n}, DType::I32, d);
  e->in.positions = Tensor::zeros({n}, DType::I32, d);
  e->in.kv_lens = Tensor::zeros({n}, DType::I32, d);
  e->in.max_keys = max_keys;
  e->batch.step = &e->in;
  entries_.push_front(std::move(e));
  return *entries_.front();
}

Tensor DecodeSteps::forward(const std::vector<kv::SequenceCache*>& caches, const std::vector<int32_t>& tokens) {
  const auto n = static_cast<int64_t>(caches.size());
  INGOT_CHECK(n > 0 && tokens.size() == caches.size(), "decode step: ", tokens.size(), " tokens for ", n,
              " sequences");
  if (!takes(caches)) return {};
  const int layers = caches.front()->num_layers();
  std::vector<int32_t> pos(caches.size()), lens(caches.size());
  int64_t most = 0;
  for (size_t i = 0; i < caches.size(); ++i) {
    pos[i] = static_cast<int32_t>(caches[i]->offset());
    lens[i] = pos[i] + 1;
    most = std::max<int64_t>(most, lens[i]);
  }
  const int64_t rows = batch_bucket(n);
  auto paged = [](kv::SequenceCache* c, int li) -> kv::PagedLayerCache& {
    return static_cast<kv::PagedLayerCache&>(c->layer(li));
  };
  if (rows > n && (!pad_ || paged(pad_.get(), 0).pool() != paged(caches.front(), 0).pool()))
    pad_ = paged(caches.front(), 0).pool()->new_sequence();
  Entry& e = entry_for(rows, key_bucket(most));
  if (!e.in.tables.defined()) e.in.tables = Tensor::zeros({layers, rows}, DType::I64, model_.device());
  INGOT_CHECK(e.in.tables.dim(0) == layers, "decode step: ", layers, " layers for a graph of ", e.in.tables.dim(0));
  // Claim each row (its block private, the table's device copy current), then upload.
  Tensor handles = Tensor::empty({layers, rows}, DType::I64);
  auto* h = handles.data<int64_t>();
  for (int li = 0; li < layers; ++li) {
    for (int64_t i = 0; i < n; ++i) h[li * rows + i] = paged(caches[static_cast<size_t>(i)], li).claim_step_row();
    if (rows > n) std::fill(h + li * rows + n, h + (li + 1) * rows, paged(pad_.get(), li).claim_step_row());
  }
  std::vector<int32_t> ids(tokens);
  ids.resize(static_cast<size_t>(rows), 0);
  pos.resize(static_cast<size_t>(rows), 0);
  lens.resize(static_cast<size_t>(rows), 1);
  copy_into(Tensor::from_i32(ids, {rows}), e.in.ids);
  copy_into(Tensor::from_i32(pos, {rows}), e.in.positions);
  copy_into(Tensor::from_i32(lens, {rows}), e.in.kv_lens);
  copy_into(handles, e.in.tables);
  // The forward pass reads the caches' stores only to choose kernels (their
  // kind and pool, the same for every step this entry takes).
  e.batch.seqs.clear();
  for (kv::SequenceCache* c : caches) e.batch.seqs.push_back({c, 1, false});
  while (static_cast<int64_t>(e.batch.seqs.size()) < rows) e.batch.seqs.push_back({pad_.get(), 1, false});
  if (!captures_) {
    e.logits = model_.forward(e.batch);
  } else {
    if (!e.graph) {
      e.graph = backend(model_.device()).capture_step([&] { e.logits = model_.forward(e.batch); });
      INGOT_CHECK(e.graph != nullptr, "decode step: the backend stopped capturing");
      ++captured_;
    }
    e.graph->replay();
  }
  for (kv::SequenceCache* c : caches)
    for (int li = 0; li < layers; ++li) paged(c, li).count_claimed_row();
  return rows > n ? e.logits.slice(0, 0, n) : e.logits;
}

}  // namespace ingot
