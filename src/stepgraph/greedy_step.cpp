#include "stepgraph/greedy_step.h"

#include "ops/ops.h"
#include "util/error.h"

namespace ingot {

std::unique_ptr<GreedyStepGraph> GreedyStepGraph::create(Model& model, std::vector<kv::SequenceCache*> caches,
                                                         int64_t max_tokens) {
  if (caches.empty() || !model.supports_step_inputs()) return nullptr;
  // The backend must capture: probe with an empty step.
  if (!backend(model.device()).capture_step([] {})) return nullptr;
  for (auto* c : caches) {
    INGOT_CHECK(c != nullptr, "GreedyStepGraph: null cache");
    if (c->offset() >= max_tokens)
      fail(ErrorKind::InvalidArgument, "GreedyStepGraph: a cache already holds ", c->offset(), " of ", max_tokens,
           " tokens");
    if (!c->reserve_fixed(max_tokens)) return nullptr;
  }
  return std::unique_ptr<GreedyStepGraph>(new GreedyStepGraph(model, std::move(caches), max_tokens));
}

GreedyStepGraph::GreedyStepGraph(Model& model, std::vector<kv::SequenceCache*> caches, int64_t max_tokens)
    : model_(model), caches_(std::move(caches)), max_tokens_(max_tokens) {
  const int64_t b = batch();
  in_.ids = Tensor::zeros({b}, DType::I32, model_.device());
  in_.positions = Tensor::zeros({b}, DType::I32, model_.device());
  in_.kv_lens = Tensor::zeros({b}, DType::I32, model_.device());
  history_ = Tensor::zeros({b * max_tokens, 1}, DType::I32, model_.device());
  hist_rows_ = Tensor::zeros({b}, DType::I32, model_.device());
  for (auto* c : caches_) batch_.seqs.push_back({c, 1, false});
  batch_.step = &in_;
}

GreedyStepGraph::~GreedyStepGraph() = default;

// Positions and key counts from the host lengths (after a plain forward or at the start).
void GreedyStepGraph::upload_positions() {
  std::vector<int32_t> pos, lens;
  for (auto* c : caches_) {
    pos.push_back(static_cast<int32_t>(c->offset()));
    lens.push_back(static_cast<int32_t>(c->offset() + 1));
  }
  const int64_t b = batch();
  copy_into(Tensor::from_i32(pos, {b}), in_.positions);
  copy_into(Tensor::from_i32(lens, {b}), in_.kv_lens);
  std::vector<int32_t> slots;
  for (int64_t i = 0; i < b; ++i) slots.push_back(static_cast<int32_t>(i * max_tokens_ + pos[static_cast<size_t>(i)]));
  copy_into(Tensor::from_i32(slots, {b}), hist_rows_);
}

std::vector<int32_t> GreedyStepGraph::step(const std::vector<int32_t>& tokens) {
  INGOT_CHECK(static_cast<int64_t>(tokens.size()) == batch(), "GreedyStepGraph: ", tokens.size(),
              " tokens for a batch of ", batch());
  copy_into(Tensor::from_i32(tokens, {batch()}), in_.ids);
  upload_positions();
  return run();
}

std::vector<int32_t> GreedyStepGraph::next() {
  INGOT_CHECK(graph_ != nullptr, "GreedyStepGraph: next() before step()");
  return run();
}

std::vector<std::vector<int32_t>> GreedyStepGraph::next_n(int64_t n) {
  INGOT_CHECK(graph_ != nullptr, "GreedyStepGraph: next_n() before step()");
  INGOT_CHECK(n >= 1, "GreedyStepGraph: next_n needs n >= 1");
  std::vector<int64_t> first;
  for (auto* c : caches_) {
    if (c->offset() + n > max_tokens_)
      fail(ErrorKind::ResourceExhausted, "GreedyStepGraph: ", n, " more tokens pass the ", max_tokens_, " reserved");
    first.push_back(c->offset());
  }
  for (int64_t s = 0; s < n; ++s) {
    graph_->replay();
    for (auto* c : caches_) c->advance(1);
  }
  const std::vector<int32_t> all = history_.to(Device::CPU).to_i32_vector();  // the one wait
  std::vector<std::vector<int32_t>> out(caches_.size());
  for (size_t i = 0; i < caches_.size(); ++i) {
    const auto at = all.begin() + static_cast<int64_t>(i) * max_tokens_ + first[i];
    out[i].assign(at, at + n);
  }
  return out;
}

void GreedyStepGraph::replay_once() {
  for (auto* c : caches_)
    if (c->offset() + 1 > max_tokens_)
      fail(ErrorKind::ResourceExhausted, "GreedyStepGraph: a sequence reached its ", max_tokens_, " reserved tokens");
  if (!graph_) {
    graph_ = backend(model_.device()).capture_step([&] {
      logits_ = model_.forward(batch_);
      next_ids_ = ops::argmax(logits_);
      // The step's outputs become the next step's inputs, on the device.
      copy_into(next_ids_, in_.ids);
      ops::write_rows_at(history_, next_ids_.reshape({batch(), 1}), hist_rows_);
      ops::add_i32_inplace(in_.positions, 1);
      ops::add_i32_inplace(in_.kv_lens, 1);
      ops::add_i32_inplace(hist_rows_, 1);
    });
    INGOT_CHECK(graph_ != nullptr, "GreedyStepGraph: the backend stopped capturing");
  }
  graph_->replay();
  for (auto* c : caches_) c->advance(1);
}

std::vector<int32_t> GreedyStepGraph::run() {
  replay_once();
  return in_.ids.to(Device::CPU).to_i32_vector();
}

}  // namespace ingot
