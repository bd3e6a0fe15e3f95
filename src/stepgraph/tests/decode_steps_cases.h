// Cases of the replayed decode step (stepgraph/decode_steps.h), run on the
// CPU (its forward pass called directly) and on CUDA (captured and replayed).
#pragma once
#include <gtest/gtest.h>

#include <span>

#include "kv/kinds.h"
#include "kv/pool.h"
#include "ops/ops.h"
#include "stepgraph/decode_steps.h"
#include "stepgraph/tests/random_llama.h"

namespace ingot::stepgraph_testing {

inline std::vector<int32_t> tokens_of(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(g() % kVocab);
  return t;
}

// Sequences on one pool: three prompts, and a fork of the first that shares
// its blocks (the open one too: the first replayed row copies it).
struct Batch {
  std::shared_ptr<kv::Pool> pool;
  std::vector<std::unique_ptr<kv::SequenceCache>> seqs;
  std::vector<kv::SequenceCache*> ptrs() const {
    std::vector<kv::SequenceCache*> p;
    for (const auto& s : seqs) p.push_back(s.get());
    return p;
  }
};

inline Batch prefilled(Model& m, Device d, kv::StoreKind kind = kv::StoreKind::Paged) {
  Batch b;
  b.pool = kv::Pool::create(m.cache_layout(), m.kv_dtype(), d, kv::pool_options(kind));
  const int64_t lens[] = {20, 37, 5};
  for (int i = 0; i < 3; ++i) {
    b.seqs.push_back(b.pool->new_sequence());
    BatchInput in;
    in.add(b.seqs.back().get(), tokens_of(lens[i], 7 + i));
    m.forward(in);
  }
  b.seqs.push_back(b.seqs[0]->clone());
  return b;
}

inline std::vector<float> host_rows(const Tensor& logits) {
  return logits.to(Device::CPU).contiguous().to_f32_vector();
}

// Replayed steps give the logits of plain batched steps, bit for bit, over
// shared and private blocks and across block boundaries (KV8: the rows
// quantized on the device as the plain write quantizes them); a batch of
// three runs padded to four in the graph of four, a batch of two in its own;
// every block returns to the pool at the end.
inline void expect_replayed_steps_equal_plain(Device d, bool captures, kv::StoreKind kind = kv::StoreKind::Paged) {
  auto m = make_model(d);
  auto steps = DecodeSteps::create(*m);
  ASSERT_NE(steps, nullptr);
  EXPECT_EQ(steps->captures(), captures);
  Batch rep = prefilled(*m, d, kind), ref = prefilled(*m, d, kind);
  std::vector<int32_t> tok = {3, 9, 27, 81};
  for (int s = 0; s < 20; ++s) {
    // The fork leaves after 8 steps (three rows run padded to four, in the
    // same graph), the third sequence after 14 (two rows: another graph).
    const size_t n = s < 8 ? 4 : s < 14 ? 3 : 2;
    std::vector<kv::SequenceCache*> rc = rep.ptrs(), fc = ref.ptrs();
    rc.resize(n);
    fc.resize(n);
    tok.resize(n);
    ASSERT_TRUE(steps->takes(rc));
    const std::vector<float> got = host_rows(steps->forward(rc, tok));
    BatchInput in;
    for (size_t i = 0; i < n; ++i) in.add(fc[i], std::span(tok).subspan(i, 1));
    const Tensor want_t = m->forward(in);
    ASSERT_EQ(got, host_rows(want_t)) << "step " << s;
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(rc[i]->offset(), fc[i]->offset()) << "sequence " << i;
    tok = ops::argmax(want_t).to(Device::CPU).to_i32_vector();
  }
  EXPECT_EQ(steps->graphs(), 2);  // batch buckets 4 and 2 (the keys stay in one bucket)
  EXPECT_EQ(steps->captured(), captures ? 2 : 0);
  rep.seqs.clear();
  steps.reset();  // its padding rows' blocks too
  EXPECT_EQ(rep.pool->used_blocks(), 0);
  EXPECT_EQ(rep.pool->total_refs(), 0);
}

// Stores the step cannot read through table handles are refused (no
// logits), bad inputs throw, and nothing is claimed or written either way.
inline void expect_refused_stores(Device d) {
  auto m = make_model(d);
  auto steps = DecodeSteps::create(*m);
  ASSERT_NE(steps, nullptr);
  EXPECT_FALSE(steps->takes({}));
  auto contiguous = new_cache(*m, CacheOptions{"contiguous", {}});
  EXPECT_FALSE(steps->takes({contiguous.get()}));
  auto kv4 = kv::Pool::create(m->cache_layout(), m->kv_dtype(), d, kv::pool_options(kv::StoreKind::Kv4));
  auto q = kv4->new_sequence();
  EXPECT_FALSE(steps->takes({q.get()}));  // its open block is planned on the host
  auto gather = kv::Pool::create(m->cache_layout(), m->kv_dtype(), d, kv::pool_options(kv::StoreKind::PagedGather));
  auto g = gather->new_sequence();
  EXPECT_FALSE(steps->takes({g.get()}));
  Batch a = prefilled(*m, d), b = prefilled(*m, d);
  EXPECT_TRUE(steps->takes({a.seqs[0].get(), a.seqs[1].get()}));
  EXPECT_FALSE(steps->takes({a.seqs[0].get(), b.seqs[1].get()}));  // two pools
  const int64_t used = a.pool->used_blocks(), at = a.seqs[0]->offset();
  EXPECT_FALSE(steps->forward({a.seqs[0].get(), b.seqs[1].get()}, {1, 2}).defined());
  EXPECT_THROW(steps->forward({a.seqs[0].get()}, {1, 2}), Error);
  EXPECT_THROW(steps->forward({}, {}), Error);
  EXPECT_EQ(a.pool->used_blocks(), used);
  EXPECT_EQ(a.seqs[0]->offset(), at);
}

}  // namespace ingot::stepgraph_testing
