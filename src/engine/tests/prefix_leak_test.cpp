// Streams abandoned mid-way with the prefix cache on: what they publish must
// stay bounded and be all that their blocks pin.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "ingot/engine.h"
#include "kv/pool.h"
#include "models/model.h"
#include "test_models.h"

using namespace ingot;
using namespace ingot::engine;

namespace {

std::unique_ptr<Model> leak_model() {
  std::string dir = std::string(INGOT_BINARY_DIR) + "/test_data/engine_leak_llama";
  ingot::testing::write_random_llama(dir, {});
  return load_model(dir);
}

// Opens a stream with a prompt of its own, reads one chunk and hangs up.
void abandon_one(Engine& e, uint32_t seed, int32_t vocab) {
  std::mt19937 g(seed);
  Request r;
  r.prompt.resize(40 + seed % 30);
  for (auto& t : r.prompt) t = static_cast<int32_t>(g() % static_cast<uint32_t>(vocab));
  r.stop.max_tokens = 200;
  r.stop.ignore_eos = true;
  auto h = e.submit(std::move(r));
  Chunk c;
  ASSERT_TRUE(h->next(&c, std::chrono::seconds(60)));
  h->cancel();
}

Stats settled(Engine& e) {
  for (int i = 0; i < 2000; ++i) {
    Stats s = e.stats();
    if (s.running == 0 && s.waiting == 0) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ADD_FAILURE() << "the engine never went idle";
  return e.stats();
}

}  // namespace

TEST(PrefixCacheLeak, AbandonedStreamsPinOnlyWhatTheCacheAccounts) {
  auto m = leak_model();
  const int32_t V = static_cast<int32_t>(m->vocab_size());
  EngineOptions opt;
  opt.kv = "paged";
  opt.max_concurrency = 4;
  opt.prefix_cache_entries = 4;
  const int64_t before = kv::live_pool_slab_bytes();
  auto e = start_engine(*m, opt, nullptr, {});
  const int64_t at_start = kv::live_pool_slab_bytes();
  for (uint32_t i = 0; i < 8; ++i) abandon_one(*e, i, V);
  const Stats warm = settled(*e);
  for (uint32_t i = 8; i < 48; ++i) abandon_one(*e, i, V);
  const Stats after = settled(*e);
  // Every prompt was distinct and at least a block long: each published.
  EXPECT_EQ(warm.prefix_entries, 4);
  EXPECT_EQ(after.prefix_entries, 4);
  // With nothing running, the pool's blocks in use are exactly the entries' KV.
  EXPECT_GT(after.kv_pool_used_bytes, 0);
  EXPECT_EQ(after.kv_pool_used_bytes, after.kv_bytes_used);
  // Freed blocks are reused: 40 more streams allocate nothing new, and no KV
  // storage lives outside the engine's one pool.
  EXPECT_EQ(after.kv_pool_allocated_bytes, warm.kv_pool_allocated_bytes);
  EXPECT_EQ(kv::live_pool_slab_bytes(), at_start);
  e->shutdown();
  const Stats down = e->stats();
  EXPECT_EQ(down.prefix_entries, 0);
  EXPECT_EQ(down.kv_pool_used_bytes, 0);
  e.reset();
  EXPECT_EQ(kv::live_pool_slab_bytes(), before);
}

TEST(PrefixCacheLeak, EntryCountZeroBoundsOnlyByBytes) {
  auto m = leak_model();
  const int32_t V = static_cast<int32_t>(m->vocab_size());
  EngineOptions opt;
  opt.kv = "paged";
  opt.prefix_cache_entries = 0;
  opt.prefix_cache_blocks = 6;  // 2 layers: a 40..69-token prompt publishes 2-4 blocks
  auto e = start_engine(*m, opt, nullptr, {});
  const int64_t at_start = kv::live_pool_slab_bytes();
  for (uint32_t i = 0; i < 12; ++i) abandon_one(*e, i, V);
  const Stats s = settled(*e);
  EXPECT_GE(s.prefix_entries, 1);
  EXPECT_EQ(s.kv_pool_used_bytes, s.kv_bytes_used);
  // prefix_cache_blocks counts prefix blocks of 16 tokens over every layer.
  EXPECT_LE(s.kv_bytes_used, 6 * 16 * 2 * 2 * 16 * 4);
  EXPECT_EQ(kv::live_pool_slab_bytes(), at_start);
}
