// Paged stores against the contiguous control: bytes, attention, quantized
// error, pool growth, and the rotating store for window layers.
#include <gtest/gtest.h>

#include "kv/batched_rows.h"
#include "kv/contiguous.h"
#include "kv/kinds.h"
#include "kv/paged.h"
#include "kv/rotating.h"
#include "ops/ops.h"
#include "test_util.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::kv;
using namespace ingot::kv::testing;

namespace {

LayerSpec spec(int64_t kvh = 2, int64_t d = 32, int64_t window = 0) {
  LayerSpec s;
  s.kv_heads = kvh;
  s.head_dim = d;
  s.v_head_dim = d;
  s.window = window;
  return s;
}

// Appends the same random chunks to both caches; after each, compares attend().
void drive(LayerCache& a, LayerCache& b, std::mt19937& rng, int64_t heads, const LayerSpec& s,
           const std::vector<int64_t>& chunks, const AttnParams& p, double tol, bool bitwise) {
  for (int64_t t : chunks) {
    Tensor k = random_tensor(rng, {t, s.kv_heads, s.head_dim});
    Tensor v = random_tensor(rng, {t, s.kv_heads, s.v_head_dim});
    Tensor q = random_tensor(rng, {t, heads, s.head_dim});
    a.append(k, v);
    b.append(k, v);
    ASSERT_EQ(a.length(), b.length());
    Tensor oa = a.attend(q, p), ob = b.attend(q, p);
    if (bitwise) {
      ASSERT_TRUE(same_bytes(oa, ob)) << "after " << a.length() << " tokens";
    } else {
      ASSERT_LE(rel(oa, ob), tol) << "after " << a.length() << " tokens";
    }
  }
}

AttnParams params(float scale = 0.2f) {
  AttnParams p;
  p.scale = scale;
  return p;
}

}  // namespace

TEST(Paged, GatherIsBitIdenticalToContiguous) {
  for (DType dt : {DType::F32, DType::BF16}) {
    for (int bs : {16, 32}) {
      std::mt19937 rng(7);
      LayerSpec s = spec();
      PoolOptions o;
      o.block_size = bs;
      o.initial_blocks = 2;
      auto pool = Pool::create({s}, dt, Device::CPU, o);
      auto paged = pool->new_sequence();
      ContiguousLayerCache ctg(s, dt, Device::CPU);
      drive(paged->layer(0), ctg, rng, 4, s, {37, 1, 1, 15, 1, 40, 1}, params(), 0, true);
      int64_t f0 = 0, f1 = 0;
      auto [pk, pv] = paged->layer(0).fetch(&f0);
      auto [ck, cv] = ctg.fetch(&f1);
      EXPECT_TRUE(same_bytes(pk, ck));
      EXPECT_TRUE(same_bytes(pv, cv));
      EXPECT_GT(pool->total_blocks(), 2) << "the pool grew past its initial blocks";
    }
  }
}

// The direct kernel reads the blocks in place; it cuts keys at the same tiles
// as the contiguous store's attention, so the two agree bit for bit, also
// with windows, soft-capping, GQA, chunked keys (> 256) and block sizes that
// are not a multiple of the tile (rows converted one at a time).
TEST(Paged, DirectIsBitIdenticalToContiguous) {
  const std::vector<std::pair<DType, int>> cases = {{DType::F32, 4},  {DType::F32, 16}, {DType::F32, 48},
                                                    {DType::BF16, 16}, {DType::BF16, 32}, {DType::F16, 16}};
  for (auto [dt, bs] : cases) {
    for (int64_t window : {int64_t{0}, int64_t{20}}) {
      std::mt19937 rng(11);
      LayerSpec s = spec(2, 64);
      PoolOptions d;
      d.block_size = bs;
      d.path = AttendPath::Direct;
      auto direct = Pool::create({s}, dt, Device::CPU, d)->new_sequence();
      ContiguousLayerCache ctg(s, dt, Device::CPU);
      AttnParams p = params(0.125f);
      p.window = window;
      p.softcap = window ? 30.0f : 0.0f;
      SCOPED_TRACE(std::string(dtype_name(dt)) + " bs " + std::to_string(bs) + " window " + std::to_string(window));
      // GQA: 8 query heads over 2 KV heads; prefill chunks, then decode past a key chunk.
      drive(direct->layer(0), ctg, rng, 8, s, {50, 1, 1, 17, 1, 233, 1, 1, 40, 1}, p, 0, true);
    }
  }
}

// Quantized pools: the direct kernel dequantizes the same codes the gather
// path does (KV8: the same bits; KV4: its rotated basis differs in rounding).
TEST(Paged, QuantizedDirectMatchesGather) {
  for (KvQuant q : {KvQuant::Q8, KvQuant::Q4}) {
    for (int64_t window : {int64_t{0}, int64_t{20}}) {
      std::mt19937 rng(11);
      LayerSpec s = spec(2, 64);
      PoolOptions g, d;
      g.quant = d.quant = q;
      d.path = AttendPath::Direct;
      auto gather = Pool::create({s}, DType::F32, Device::CPU, g)->new_sequence();
      auto direct = Pool::create({s}, DType::F32, Device::CPU, d)->new_sequence();
      AttnParams p = params(0.125f);
      p.window = window;
      p.softcap = window ? 30.0f : 0.0f;
      SCOPED_TRACE(std::string(kv_quant_name(q)) + " window " + std::to_string(window));
      drive(direct->layer(0), gather->layer(0), rng, 8, s, {50, 1, 1, 17, 1, 300, 1}, p, 1e-5, q == KvQuant::Q8);
    }
  }
}

TEST(Paged, QuantizedErrorIsBounded) {
  std::mt19937 rng(3);
  LayerSpec s = spec(2, 64);
  Tensor k = random_tensor(rng, {200, 2, 64}), v = random_tensor(rng, {200, 2, 64});
  for (auto [q, bound] : {std::pair{KvQuant::Q8, 0.01}, std::pair{KvQuant::Q4, 0.12}}) {
    PoolOptions o;
    o.quant = q;
    auto seq = Pool::create({s}, DType::F32, Device::CPU, o)->new_sequence();
    seq->layer(0).append(k, v);
    int64_t f = 0;
    auto [dk, dv] = seq->layer(0).fetch(&f);
    EXPECT_LE(rel(dk, k), bound) << kv_quant_name(q);
    EXPECT_LE(rel(dv, v), bound) << kv_quant_name(q);
    EXPECT_GT(rel(dk, k), 0.0) << "quantization should not be lossless on gaussian data";
  }
}

TEST(Paged, PoolGrowsAndKeepsData) {
  std::mt19937 rng(5);
  LayerSpec s = spec(1, 16);
  PoolOptions o;
  o.initial_blocks = 2;
  o.block_size = 16;
  auto pool = Pool::create({s}, DType::F32, Device::CPU, o);
  auto seq = pool->new_sequence();
  ContiguousLayerCache ctg(s, DType::F32, Device::CPU);
  for (int i = 0; i < 40; ++i) {
    Tensor k = random_tensor(rng, {25, 1, 16}), v = random_tensor(rng, {25, 1, 16});
    seq->layer(0).append(k, v);
    ctg.append(k, v);
  }
  EXPECT_EQ(pool->used_blocks(), (1000 + 15) / 16);
  EXPECT_EQ(pool->bytes_per_block(), size_t{2 * 16 * 16 * 4});  // K + V, 16 rows of 16 floats
  EXPECT_GT(pool->layer(0)->slab_count(), 3);
  int64_t f = 0;
  EXPECT_TRUE(same_bytes(seq->layer(0).fetch(&f).first, ctg.fetch(&f).first));
  seq.reset();
  EXPECT_EQ(pool->used_blocks(), 0);
  EXPECT_EQ(pool->total_refs(), 0);
}

TEST(Paged, BadShapesAndOptionsAreClearErrors) {
  LayerSpec s = spec(2, 16);
  auto seq = Pool::create({s}, DType::F32, Device::CPU)->new_sequence();
  std::mt19937 rng(1);
  EXPECT_THROW(seq->layer(0).append(random_tensor(rng, {3, 4, 16}), random_tensor(rng, {3, 4, 16})), Error);
  EXPECT_THROW(seq->layer(0).trim(1), Error);
  PoolOptions bad;
  bad.block_size = 0;
  EXPECT_THROW(Pool::create({s}, DType::F32, Device::CPU, bad), Error);
  bad = {};
  bad.quant = KvQuant::Q8;
  bad.group_size = 12;  // does not divide 16... 16 % 12 != 0 and 12 < 16
  EXPECT_THROW(Pool::create({s}, DType::F32, Device::CPU, bad), Error);
  EXPECT_THROW(pool_options_for("paged9"), Error);
}

TEST(Rotating, MatchesContiguousWithWindowAndStaysBounded) {
  for (DType dt : {DType::F32, DType::BF16}) {
    std::mt19937 rng(9);
    LayerSpec s = spec(2, 16, 24);
    RotatingLayerCache rot(s, dt, Device::CPU, 8);
    ContiguousLayerCache ctg(s, dt, Device::CPU);
    AttnParams p = params();
    p.window = 24;
    std::vector<int64_t> chunks = {30, 1, 1, 5};
    for (int i = 0; i < 120; ++i) chunks.push_back(1);
    drive(rot, ctg, rng, 4, s, chunks, p, 0, true);
    EXPECT_LE(rot.kept(), 23 + 8 + 1);
    EXPECT_LE(rot.capacity(), 2 * (30 + 23 + 8));
    // Trim within the slack, then continue identically.
    rot.trim(3);
    ctg.trim(3);
    drive(rot, ctg, rng, 4, s, {1, 2, 1}, p, 0, true);
    auto c = rot.clone();
    drive(*c, ctg, rng, 4, s, {1, 1}, p, 0, true);
    EXPECT_THROW(rot.trim(20), Error) << "beyond the slack the window is gone";
  }
}

TEST(Kinds, NamesParseAndBadNamesAreRefused) {
  for (StoreKind k : {StoreKind::Contiguous, StoreKind::Paged, StoreKind::PagedGather, StoreKind::Kv8, StoreKind::Kv4})
    EXPECT_EQ(parse_store_kind(store_kind_name(k)), k);
  EXPECT_EQ(parse_store_kind("paged-direct"), StoreKind::Paged);
  EXPECT_EQ(pool_options(StoreKind::Paged).path, AttendPath::Direct) << "the default reads blocks in place";
  EXPECT_EQ(pool_options(StoreKind::PagedGather).path, AttendPath::Gather);
  try {
    parse_store_kind("pagd");
    FAIL() << "an unknown kind must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("paged-gather"), std::string::npos) << "the error names the choices";
  }
  EXPECT_THROW(pool_options(StoreKind::Contiguous), Error);
}

TEST(Kinds, WindowLayersGetARotatingStore) {
  auto seq = make_store({spec(2, 16, 0), spec(2, 16, 8)}, DType::F32, Device::CPU, StoreKind::Paged);
  EXPECT_NE(dynamic_cast<PagedLayerCache*>(&seq->layer(0)), nullptr);
  EXPECT_NE(dynamic_cast<RotatingLayerCache*>(&seq->layer(1)), nullptr);
}

// A decode step over many sequences of a pool (different lengths, shared
// prefix blocks, every quantization) in one job equals each sequence's own
// append + attend, bit for bit.
TEST(PagedRows, OneJobEqualsEachSequenceAlone) {
  for (KvQuant quant : {KvQuant::None, KvQuant::Q8, KvQuant::Q4}) {
    std::mt19937 rng(21);
    LayerSpec s = spec(2, 64);
    PoolOptions o;
    o.quant = quant;
    o.path = AttendPath::Direct;
    auto pool = Pool::create({s}, DType::BF16, Device::CPU, o);
    std::vector<std::unique_ptr<SequenceCache>> batched, alone;
    auto base = pool->new_sequence();
    base->layer(0).append(random_tensor(rng, {40, 2, 64}), random_tensor(rng, {40, 2, 64}));
    for (int64_t len : {1, 17, 0, 290}) {
      auto a = len == 0 ? base->clone() : pool->new_sequence();  // a fork shares base's blocks
      if (len > 0) a->layer(0).append(random_tensor(rng, {len, 2, 64}), random_tensor(rng, {len, 2, 64}));
      alone.push_back(a->clone());
      batched.push_back(std::move(a));
    }
    const auto n = static_cast<int64_t>(batched.size());
    Tensor q = random_tensor(rng, {n, 8, 64}), k = random_tensor(rng, {n, 2, 64}), v = random_tensor(rng, {n, 2, 64});
    std::vector<LayerCache*> layers;
    for (auto& c : batched) layers.push_back(&c->layer(0));
    AttnParams p = params(0.125f);
    Tensor pos = Tensor::zeros({n}, DType::I32);
    Tensor got = append_attend_rows(layers, q, k, v, pos, nullptr, p);
    ASSERT_TRUE(got.defined()) << "paged rows on the CPU take one job";
    for (int64_t i = 0; i < n; ++i) {
      LayerCache& l = alone[static_cast<size_t>(i)]->layer(0);
      l.append(k.slice(0, i, i + 1), v.slice(0, i, i + 1));
      Tensor want = l.attend(q.slice(0, i, i + 1).contiguous(), p);
      EXPECT_TRUE(same_bytes(got.slice(0, i, i + 1).contiguous(), want)) << kv_quant_name(quant) << " row " << i;
      EXPECT_EQ(batched[static_cast<size_t>(i)]->layer(0).length(), l.length());
    }
  }
}
