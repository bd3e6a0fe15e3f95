// Copy-on-write: forks share blocks, writes never leak between branches, and
// after a long random walk every reference is gone and every block is free.
#include <gtest/gtest.h>

#include <map>

#include "kv/contiguous.h"
#include "kv/paged.h"
#include "test_util.h"

using namespace ingot;
using namespace ingot::kv;
using namespace ingot::kv::testing;

namespace {

LayerSpec small_spec() {
  LayerSpec s;
  s.kv_heads = 2;
  s.head_dim = 8;
  s.v_head_dim = 8;
  return s;
}

Tensor keys_of(SequenceCache& c) {
  int64_t f = 0;
  return c.layer(0).fetch(&f).first;
}

}  // namespace

TEST(CopyOnWrite, ForkedBranchesDivergeIndependently) {
  std::mt19937 rng(21);
  LayerSpec s = small_spec();
  PoolOptions o;
  o.block_size = 4;
  auto pool = Pool::create({s, s}, DType::F32, Device::CPU, o);
  auto a = pool->new_sequence();
  Tensor k = random_tensor(rng, {10, 2, 8}), v = random_tensor(rng, {10, 2, 8});
  for (int l = 0; l < 2; ++l) a->layer(l).append(k, v);
  const int64_t used = pool->used_blocks();
  auto b = a->clone();
  EXPECT_EQ(pool->used_blocks(), used) << "clone shares every block";
  Tensor before = keys_of(*a).clone();
  Tensor ka = random_tensor(rng, {3, 2, 8}), kb = random_tensor(rng, {3, 2, 8});
  a->layer(0).append(ka, ka);
  b->layer(0).append(kb, kb);
  // The partially filled third block was shared: both branches copied it.
  auto& pa = dynamic_cast<PagedLayerCache&>(a->layer(0));
  auto& pb = dynamic_cast<PagedLayerCache&>(b->layer(0));
  EXPECT_EQ(pa.block_table()[0], pb.block_table()[0]);
  EXPECT_NE(pa.block_table()[2], pb.block_table()[2]);
  Tensor ta = keys_of(*a), tb = keys_of(*b);
  EXPECT_TRUE(same_bytes(ta.slice(0, 0, 10), before));
  EXPECT_TRUE(same_bytes(tb.slice(0, 0, 10), before));
  EXPECT_TRUE(same_bytes(ta.slice(0, 10, 13), ka));
  EXPECT_TRUE(same_bytes(tb.slice(0, 10, 13), kb));
  // Trim one branch below the fork point and rewrite: the other is untouched.
  b->layer(0).trim(6);
  Tensor kc = random_tensor(rng, {2, 2, 8});
  b->layer(0).append(kc, kc);
  EXPECT_TRUE(same_bytes(keys_of(*a).slice(0, 0, 10), before));
  a.reset();
  b.reset();
  EXPECT_EQ(pool->used_blocks(), 0);
  EXPECT_EQ(pool->total_refs(), 0);
}

TEST(CopyOnWrite, PublishedPrefixIsImmutable) {
  std::mt19937 rng(22);
  PoolOptions o;
  o.block_size = 4;
  auto pool = Pool::create({small_spec()}, DType::F32, Device::CPU, o);
  auto a = pool->new_sequence();
  Tensor k = random_tensor(rng, {6, 2, 8});
  a->layer(0).append(k, k);
  publish(*a);
  auto& pa = dynamic_cast<PagedLayerCache&>(a->layer(0));
  const int32_t shared_block = pa.block_table()[1];
  a->layer(0).trim(1);  // the sole owner still may not write into the published block
  Tensor k2 = random_tensor(rng, {1, 2, 8});
  a->layer(0).append(k2, k2);
  EXPECT_NE(pa.block_table()[1], shared_block);
  EXPECT_EQ(pool->layer(0)->refcount(shared_block), 0) << "the old block went back to the free list";
}

TEST(CopyOnWrite, RandomWalkRestoresThePool) {
  std::mt19937 rng(23);
  LayerSpec s = small_spec();
  PoolOptions o;
  o.block_size = 4;
  o.initial_blocks = 8;
  auto pool = Pool::create({s}, DType::F32, Device::CPU, o);
  const int64_t initial_free = pool->free_blocks();
  // Each live sequence is mirrored by a contiguous control holding the same tokens.
  std::vector<std::pair<std::unique_ptr<SequenceCache>, std::unique_ptr<ContiguousLayerCache>>> live;
  std::uniform_int_distribution<int> op(0, 9);
  for (int step = 0; step < 4000; ++step) {
    const int o2 = live.empty() ? 0 : op(rng);
    if (o2 <= 1 && live.size() < 24) {  // new
      live.emplace_back(pool->new_sequence(), std::make_unique<ContiguousLayerCache>(s, DType::F32, Device::CPU));
    } else if (o2 <= 3 && live.size() < 24) {  // fork
      auto& src = live[rng() % live.size()];
      if (!src.second->length()) continue;
      std::unique_ptr<LayerCache> cc = src.second->clone();
      live.emplace_back(src.first->clone(),
                        std::unique_ptr<ContiguousLayerCache>(static_cast<ContiguousLayerCache*>(cc.release())));
    } else if (o2 <= 6) {  // append
      auto& e = live[rng() % live.size()];
      const int64_t t = 1 + static_cast<int64_t>(rng() % 6);
      Tensor k = random_tensor(rng, {t, 2, 8});
      e.first->layer(0).append(k, k);
      e.second->append(k, k);
    } else if (o2 == 7) {  // trim
      auto& e = live[rng() % live.size()];
      const int64_t n = e.second->length() ? static_cast<int64_t>(rng() % (e.second->length() + 1)) : 0;
      e.first->layer(0).trim(n);
      e.second->trim(n);
    } else if (o2 == 8) {  // publish
      publish(*live[rng() % live.size()].first);
    } else {  // free
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(rng() % live.size()));
    }
    if (step % 97 == 0) {
      for (auto& e : live) {
        if (!e.second->length()) continue;  // the contiguous control cannot fetch empty
        int64_t f = 0;
        ASSERT_TRUE(same_bytes(e.first->layer(0).fetch(&f).first, e.second->fetch(&f).first)) << "step " << step;
      }
    }
  }
  EXPECT_GT(pool->total_blocks(), 8) << "the walk should have grown the pool";
  live.clear();
  EXPECT_EQ(pool->total_refs(), 0);
  EXPECT_EQ(pool->used_blocks(), 0);
  EXPECT_GE(pool->free_blocks(), initial_free);
  EXPECT_EQ(pool->free_blocks(), pool->total_blocks());
}
