// The paged stores on the GPU (ctest label "gpu"): CUDA pools against the
// CUDA contiguous store (bit for bit, gather and direct kernel), quantized
// rows against the CPU store's bytes, copy-on-write, and bad input.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <thread>
#include <unistd.h>

#include "backend/cuda/cuda_backend.h"
#include "kv/batched_rows.h"
#include "kv/contiguous.h"
#include "kv/paged.h"
#include "kv/paged_attention.h"
#include "kv/snapshot.h"
#include "test_util.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::kv;
using namespace ingot::kv::testing;

namespace {

LayerSpec spec(int64_t kvh, int64_t d, int64_t dv) {
  LayerSpec s;
  s.kv_heads = kvh;
  s.head_dim = d;
  s.v_head_dim = dv;
  return s;
}

Tensor cpu(const Tensor& t) { return t.to(Device::CPU); }
Tensor gpu(const Tensor& t) { return t.to(Device::CUDA); }

class PagedCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cuda::available()) << "no CUDA device";
    ASSERT_NE(paged_kernels(Device::CUDA), nullptr) << "CUDA paged kernels not installed";
  }
};

// Appends the same chunks to a and b (on the GPU) and compares attend() after each.
void drive(LayerCache& a, LayerCache& b, std::mt19937& rng, int64_t heads, const LayerSpec& s,
           const std::vector<int64_t>& chunks, const AttnParams& p, double tol, const std::string& what) {
  for (int64_t t : chunks) {
    Tensor k = gpu(random_tensor(rng, {t, s.kv_heads, s.head_dim}));
    Tensor v = gpu(random_tensor(rng, {t, s.kv_heads, s.v_head_dim}));
    Tensor q = gpu(random_tensor(rng, {t, heads, s.head_dim}));
    a.append(k, v);
    b.append(k, v);
    ASSERT_EQ(a.length(), b.length());
    Tensor oa = cpu(a.attend(q, p)), ob = cpu(b.attend(q, p));
    if (tol == 0) {
      ASSERT_TRUE(same_bytes(oa, ob)) << what << " after " << a.length() << " tokens (rel " << rel(oa, ob) << ")";
    } else {
      ASSERT_LE(rel(oa, ob), tol) << what << " after " << a.length() << " tokens";
    }
  }
}

}  // namespace

// The CUDA reference attention is an online softmax over tiles of keys; the
// direct kernel is the same kernel reading rows through the block table, so
// both paged paths equal the contiguous store bit for bit: decode and
// prefill chunks (the GQA-grouped kernel from 16 rows on), key splits,
// windows, soft-capping, block sizes that are not powers of two.
TEST_F(PagedCuda, PagedAndDirectEqualContiguousBitForBit) {
  for (DType dt : {DType::F32, DType::BF16}) {
    for (AttendPath path : {AttendPath::Gather, AttendPath::Direct}) {
      for (int bs : {16, 12}) {
        for (int64_t heads : {int64_t{2}, int64_t{4}, int64_t{16}}) {
          for (int64_t window : {int64_t{0}, int64_t{150}}) {
            std::mt19937 rng(5);
            const LayerSpec s = spec(2, 64, 64);
            PoolOptions o;
            o.block_size = bs;
            o.initial_blocks = 4;
            o.path = path;
            auto pool = Pool::create({s}, dt, Device::CUDA, o);
            auto paged = pool->new_sequence();
            ContiguousLayerCache ctg(s, dt, Device::CUDA);
            AttnParams p;
            p.scale = 0.125f;
            p.window = window;
            p.softcap = window ? 20.0f : 0.0f;
            const std::string what = std::string(dtype_name(dt)) + (path == AttendPath::Direct ? " direct" : " gather") +
                                     " bs" + std::to_string(bs) + " h" + std::to_string(heads) + " w" +
                                     std::to_string(window);
            drive(paged->layer(0), ctg, rng, heads, s, {300, 1, 1, 17, 1, 420, 1, 2, 1}, p, 0, what);
            int64_t f0 = 0, f1 = 0;
            auto [pk, pv] = paged->layer(0).fetch(&f0);
            auto [ck, cv] = ctg.fetch(&f1);
            EXPECT_TRUE(same_bytes(cpu(pk), cpu(ck))) << what;
            EXPECT_TRUE(same_bytes(cpu(pv), cpu(cv))) << what;
          }
        }
      }
    }
  }
}

// KV8 and KV4 written on the GPU hold the CPU store's codes and parameters
// bit for bit (KV4 rows rotated alike, and its open block's exact rows the
// same: the gather reads both back alike); the direct kernel agrees with the
// CPU direct kernel to float32 rounding, so both are as far from the
// unquantized attention.
TEST_F(PagedCuda, QuantizedRowsEqualCpuStore) {
  for (KvQuant qk : {KvQuant::Q8, KvQuant::Q4}) {
    for (int64_t d : {int64_t{64}, int64_t{16}, int64_t{128}}) {  // head dim 16: groups of 4
      std::mt19937 rng(9);
      const LayerSpec s = spec(2, d, d);
      PoolOptions o;
      o.quant = qk;
      o.path = AttendPath::Direct;
      auto gpool = Pool::create({s}, DType::F32, Device::CUDA, o);
      auto cpool = Pool::create({s}, DType::F32, Device::CPU, o);
      auto g = gpool->new_sequence(), c = cpool->new_sequence();
      ContiguousLayerCache ref(s, DType::F32, Device::CUDA);
      AttnParams p;
      p.scale = 1.0f / std::sqrt(static_cast<float>(d));
      const std::string what = std::string(kv_quant_name(qk)) + " d" + std::to_string(d);
      for (int64_t t : {200, 1, 1, 30, 1}) {
        Tensor k = random_tensor(rng, {t, 2, d}), v = random_tensor(rng, {t, 2, d});
        Tensor q = random_tensor(rng, {t, 8, d});
        g->layer(0).append(gpu(k), gpu(v));
        c->layer(0).append(k, v);
        ref.append(gpu(k), gpu(v));
        int64_t f = 0;
        auto [gk, gv] = g->layer(0).fetch(&f);
        auto [ck, cv] = c->layer(0).fetch(&f);
        ASSERT_TRUE(same_bytes(cpu(gk), ck)) << what << " K after " << g->layer(0).length();
        ASSERT_TRUE(same_bytes(cpu(gv), cv)) << what << " V after " << g->layer(0).length();
        Tensor og = cpu(g->layer(0).attend(gpu(q), p)), oc = c->layer(0).attend(q, p);
        // The CPU's KV8 VNNI path splits the query into two int8 parts (docs/kv-cache.md): 1e-4 there.
        EXPECT_LE(rel(og, oc), 1e-4) << what;
        // Against unquantized attention, on these Gaussian rows: the codes' own error (KV4 measured
        // 0.11-0.13 on the H200; PARITY.md's 8e-2 bounds model logits, not raw attention rows),
        // the same on both devices since the codes are the same.
        Tensor exact = cpu(ref.attend(gpu(q), p));
        const double eg = rel(og, exact), ec = rel(oc, exact);
        EXPECT_LE(eg, qk == KvQuant::Q8 ? 2e-2 : 0.2) << what;
        EXPECT_NEAR(eg, ec, 1e-3) << what;
      }
    }
  }
}

// Forks share blocks; the first write into a shared block copies it on the
// device. Each branch keeps matching its own contiguous mirror, trims give
// blocks back, and every reference is gone at the end.
TEST_F(PagedCuda, CopyOnWriteForksAndTrims) {
  std::mt19937 rng(3);
  const LayerSpec s = spec(2, 32, 32);
  PoolOptions o;
  o.initial_blocks = 2;
  o.path = AttendPath::Direct;
  auto pool = Pool::create({s}, DType::BF16, Device::CUDA, o);
  {
    auto a = pool->new_sequence();
    ContiguousLayerCache ma(s, DType::BF16, Device::CUDA);
    AttnParams p;
    p.scale = 0.2f;
    drive(a->layer(0), ma, rng, 4, s, {40}, p, 0, "prefix");
    auto b = a->clone();
    auto mb = ma.clone();
    drive(a->layer(0), ma, rng, 4, s, {1, 9, 30}, p, 0, "branch a");
    drive(b->layer(0), *mb, rng, 4, s, {3, 1, 50}, p, 0, "branch b");
    a->layer(0).trim(45);
    ma.trim(45);
    drive(a->layer(0), ma, rng, 4, s, {2, 20}, p, 0, "a after trim");
    publish(*b);
    auto c = b->clone();
    auto mc = mb->clone();
    drive(c->layer(0), *mc, rng, 4, s, {5}, p, 0, "fork of a published prefix");
    drive(b->layer(0), *mb, rng, 4, s, {1}, p, 0, "published branch");
  }
  EXPECT_EQ(pool->total_refs(), 0);
  EXPECT_EQ(pool->used_blocks(), 0);
}

TEST_F(PagedCuda, BadInputIsAClearError) {
  const LayerSpec s = spec(2, 32, 32);
  PoolOptions o;
  o.path = AttendPath::Direct;
  auto pool = Pool::create({s}, DType::F32, Device::CUDA, o);
  auto seq = pool->new_sequence();
  std::mt19937 rng(1);
  // Wrong head count, and rows on the wrong device.
  EXPECT_THROW(seq->layer(0).append(gpu(random_tensor(rng, {3, 3, 32})), gpu(random_tensor(rng, {3, 3, 32}))), Error);
  EXPECT_THROW(seq->layer(0).append(random_tensor(rng, {3, 2, 32}), random_tensor(rng, {3, 2, 32})), Error);
  EXPECT_EQ(seq->layer(0).length(), 0);
  seq->layer(0).append(gpu(random_tensor(rng, {3, 2, 32})), gpu(random_tensor(rng, {3, 2, 32})));
  AttnParams p;
  // Queries of the wrong head dim, on the wrong device, or more queries than tokens.
  EXPECT_THROW(seq->layer(0).attend(gpu(random_tensor(rng, {1, 4, 16})), p), Error);
  EXPECT_THROW(seq->layer(0).attend(random_tensor(rng, {1, 4, 32}), p), Error);
  EXPECT_THROW(seq->layer(0).attend(gpu(random_tensor(rng, {4, 4, 32})), p), Error);
  EXPECT_THROW(seq->layer(0).trim(4), Error);
  // float16 rows store fine but the CUDA kernels take float32 / bf16 only, like the contiguous store.
  auto f16 = Pool::create({s}, DType::F16, Device::CUDA, o)->new_sequence();
  f16->layer(0).append(gpu(random_tensor(rng, {2, 2, 32})), gpu(random_tensor(rng, {2, 2, 32})));
  EXPECT_THROW(f16->layer(0).attend(gpu(random_tensor(rng, {1, 4, 32})), p), Error);
  // KV4: rows of the wrong device or dims are refused before anything is written.
  PoolOptions q4 = o;
  q4.quant = KvQuant::Q4;
  auto k4 = Pool::create({s}, DType::F32, Device::CUDA, q4)->new_sequence();
  EXPECT_THROW(k4->layer(0).append(random_tensor(rng, {3, 2, 32}), random_tensor(rng, {3, 2, 32})), Error);
  EXPECT_THROW(k4->layer(0).append(gpu(random_tensor(rng, {3, 2, 16})), gpu(random_tensor(rng, {3, 2, 16}))), Error);
  EXPECT_EQ(k4->layer(0).length(), 0);
}

// Snapshots of a CUDA pool: written from another thread (downloads beside the
// stream that keeps appending), restored into a CUDA pool and a host pool,
// both equal to what was written, bit for bit, for every scheme.
TEST_F(PagedCuda, SnapshotsRoundTripBitForBitFromAWriterThread) {
  const LayerSpec s = spec(2, 64, 64);
  for (KvQuant q : {KvQuant::None, KvQuant::Q8, KvQuant::Q4}) {
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(str_cat(kv_quant_name(q), " ", dtype_name(dt)));
      PoolOptions o;
      o.path = AttendPath::Direct;
      o.quant = q;
      auto dev = Pool::create({s, s}, dt, Device::CUDA, o);
      auto host = Pool::create({s, s}, dt, Device::CPU, o);
      std::mt19937 rng(11);
      auto seq = dev->new_sequence();
      for (int l = 0; l < 2; ++l)
        seq->layer(l).append(gpu(random_tensor(rng, {301, 2, 64})), gpu(random_tensor(rng, {301, 2, 64})));
      std::vector<int32_t> toks(301);
      for (int i = 0; i < 301; ++i) toks[static_cast<size_t>(i)] = i + 5;
      const SnapshotKey key{"m", "t", dev->scheme()};
      const std::string path = "/tmp/ingot_paged_cuda_" + std::to_string(::getpid()) + ".ikv";
      std::unique_ptr<SequenceCache> entry = seq->clone();
      publish(*entry);
      std::exception_ptr err;
      std::thread writer([&] {
        try {
          write_snapshot(path, *entry, toks, key);
        } catch (...) {
          err = std::current_exception();
        }
      });
      auto other = dev->new_sequence();  // the engine's stream keeps working meanwhile
      for (int i = 0; i < 20; ++i)
        for (int l = 0; l < 2; ++l)
          other->layer(l).append(gpu(random_tensor(rng, {7, 2, 64})), gpu(random_tensor(rng, {7, 2, 64})));
      writer.join();
      ASSERT_FALSE(err) << "the writer thread failed";
      auto on_dev = restore_snapshot(path, *dev, key);
      auto on_host = restore_snapshot(path, *host, key);
      std::remove(path.c_str());
      AttnParams p;
      p.scale = 0.125f;
      Tensor qy = random_tensor(rng, {1, 4, 64});
      for (int l = 0; l < 2; ++l) {
        int64_t f = 0;
        auto [ka, va] = seq->layer(l).fetch(&f);
        auto [kb, vb] = on_dev->layer(l).fetch(&f);
        auto [kc, vc] = on_host->layer(l).fetch(&f);
        EXPECT_TRUE(same_bytes(cpu(ka), cpu(kb)) && same_bytes(cpu(va), cpu(vb))) << "layer " << l << " on the GPU";
        EXPECT_TRUE(same_bytes(cpu(ka), cpu(kc)) && same_bytes(cpu(va), cpu(vc))) << "layer " << l << " on the host";
        EXPECT_TRUE(same_bytes(cpu(seq->layer(l).attend(gpu(qy), p)), cpu(on_dev->layer(l).attend(gpu(qy), p))))
            << "layer " << l << " attends alike";
      }
    }
  }
}

// KV4 through forks, copy-on-write and trims (the open block moves, closes,
// and is trimmed back into): the GPU store keeps the CPU store's bytes and
// exact rows at every step, and attends like it.
TEST_F(PagedCuda, Kv4ForksAndTrimsMatchCpuStore) {
  std::mt19937 rng(21);
  const LayerSpec s = spec(2, 64, 64);
  PoolOptions o;
  o.quant = KvQuant::Q4;
  o.path = AttendPath::Direct;
  o.initial_blocks = 2;
  auto gpool = Pool::create({s}, DType::F32, Device::CUDA, o);
  auto cpool = Pool::create({s}, DType::F32, Device::CPU, o);
  AttnParams p;
  p.scale = 0.125f;
  auto step = [&](SequenceCache& g, SequenceCache& c, int64_t t, const std::string& what) {
    Tensor k = random_tensor(rng, {t, 2, 64}), v = random_tensor(rng, {t, 2, 64});
    Tensor q = random_tensor(rng, {t, 4, 64});
    g.layer(0).append(gpu(k), gpu(v));
    c.layer(0).append(k, v);
    int64_t f = 0;
    auto [gk, gv] = g.layer(0).fetch(&f);
    auto [ck, cv] = c.layer(0).fetch(&f);
    ASSERT_TRUE(same_bytes(cpu(gk), ck)) << what << " K at " << g.layer(0).length();
    ASSERT_TRUE(same_bytes(cpu(gv), cv)) << what << " V at " << g.layer(0).length();
    EXPECT_LE(rel(cpu(g.layer(0).attend(gpu(q), p)), c.layer(0).attend(q, p)), 1e-4) << what;
  };
  {
    auto ga = gpool->new_sequence(), ca = cpool->new_sequence();
    for (int64_t t : {5, 1, 12, 1}) step(*ga, *ca, t, "a");
    auto gb = ga->clone(), cb = ca->clone();
    for (int64_t t : {1, 3, 20}) step(*ga, *ca, t, "a after fork");
    for (int64_t t : {2, 1}) step(*gb, *cb, t, "b");
    ga->layer(0).trim(9);  // back into a closed block: codes only from there
    ca->layer(0).trim(9);
    for (int64_t t : {1, 4}) step(*ga, *ca, t, "a after trim");
    publish(*gb);
    publish(*cb);
    auto gc = gb->clone(), cc = cb->clone();
    for (int64_t t : {1, 1, 16}) step(*gc, *cc, t, "fork of a published prefix");
  }
  EXPECT_EQ(gpool->total_refs(), 0);
  EXPECT_EQ(gpool->used_blocks(), 0);
}

// A few hundred rows of every store kind, small enough for compute-sanitizer's
// racecheck and memcheck to finish: bf16 gather and direct, KV8 and KV4 direct,
// a block size that is not a power of two, decode and grouped prefill rows.
TEST_F(PagedCuda, SanitizerSized) {
  for (KvQuant qk : {KvQuant::None, KvQuant::Q8, KvQuant::Q4}) {
    for (AttendPath path : {AttendPath::Gather, AttendPath::Direct}) {
      for (int64_t heads : {int64_t{2}, int64_t{16}}) {
        std::mt19937 rng(7);
        const LayerSpec s = spec(2, 64, 64);
        PoolOptions o;
        o.block_size = 12;
        o.initial_blocks = 2;
        o.path = path;
        o.quant = qk;
        const DType dt = qk == KvQuant::None ? DType::BF16 : DType::F32;
        auto seq = Pool::create({s}, dt, Device::CUDA, o)->new_sequence();
        ContiguousLayerCache ctg(s, dt, Device::CUDA);
        AttnParams p;
        p.scale = 0.125f;
        const std::string what = std::string(kv_quant_name(qk)) + (path == AttendPath::Direct ? " direct" : " gather") +
                                 " h" + std::to_string(heads);
        // Quantized rows are compared with unquantized attention at their codes' error.
        drive(seq->layer(0), ctg, rng, heads, s, {20, 1, 17, 1}, p, qk == KvQuant::None ? 0.0 : qk == KvQuant::Q8 ? 2e-2 : 0.25,
              what);
      }
    }
  }
}

// Decode rows of many sequences over one pool in one launch
// (kv/batched_rows.h through PagedKernels::attend_rows, and write_rows for
// unquantized pools): each row equals the per-sequence append + attend bit
// for bit, and the stores hold the same bytes, for float32 / bf16 rows and
// KV8 / KV4 codes, lengths on both sides of block edges and key splits.
TEST_F(PagedCuda, DecodeRowsInOneLaunchEqualPerSequenceAttend) {
  const std::vector<int64_t> lens = {1, 15, 16, 17, 130, 700};
  for (KvQuant qk : {KvQuant::None, KvQuant::Q8, KvQuant::Q4}) {
    for (DType dt : {DType::F32, DType::BF16}) {
      if (qk != KvQuant::None && dt == DType::BF16) continue;  // quantized pools take float32 rows
      std::mt19937 rng(11);
      const LayerSpec s = spec(2, 64, 64);
      PoolOptions o;
      o.path = AttendPath::Direct;
      o.quant = qk;
      o.block_size = 16;
      auto pool = Pool::create({s}, dt, Device::CUDA, o);
      std::vector<std::unique_ptr<SequenceCache>> alone, rows;
      std::vector<LayerCache*> rows_p;
      for (int64_t len : lens) {
        alone.push_back(pool->new_sequence());
        rows.push_back(pool->new_sequence());
        Tensor k = gpu(random_tensor(rng, {len, 2, 64})), v = gpu(random_tensor(rng, {len, 2, 64}));
        alone.back()->layer(0).append(k, v);
        rows.back()->layer(0).append(k, v);
        rows_p.push_back(&rows.back()->layer(0));
      }
      const auto n = static_cast<int64_t>(lens.size());
      AttnParams p;
      p.scale = 0.125f;
      for (int step = 0; step < 3; ++step) {
        Tensor q = gpu(random_tensor(rng, {n, 8, 64}));
        Tensor k = gpu(random_tensor(rng, {n, 2, 64})), v = gpu(random_tensor(rng, {n, 2, 64}));
        std::vector<int32_t> pos;
        for (auto* c : rows_p) pos.push_back(static_cast<int32_t>(c->length()));
        Tensor got = append_attend_rows(rows_p, q, k, v, gpu(Tensor::from_i32(pos, {n})), nullptr, p);
        ASSERT_TRUE(got.defined()) << "the batch was declined";
        got = cpu(got);
        for (int64_t i = 0; i < n; ++i) {
          LayerCache& a = alone[static_cast<size_t>(i)]->layer(0);
          a.append(k.slice(0, i, i + 1).contiguous(), v.slice(0, i, i + 1).contiguous());
          Tensor want = cpu(a.attend(q.slice(0, i, i + 1).contiguous(), p));
          ASSERT_TRUE(same_bytes(want, got.slice(0, i, i + 1).contiguous()))
              << kv_quant_name(qk) << " " << dtype_name(dt) << " row " << i << " step " << step << " (rel "
              << rel(got.slice(0, i, i + 1).contiguous(), want) << ")";
        }
      }
      // The rows written in one job hold the bytes the per-sequence appends hold.
      for (size_t i = 0; i < lens.size(); ++i) {
        int64_t fa = 0, fb = 0;
        auto [ka, va] = alone[i]->layer(0).fetch(&fa);
        auto [kb, vb] = rows[i]->layer(0).fetch(&fb);
        ASSERT_EQ(rows[i]->layer(0).length(), alone[i]->layer(0).length());
        ASSERT_TRUE(same_bytes(cpu(ka), cpu(kb)) && same_bytes(cpu(va), cpu(vb)))
            << kv_quant_name(qk) << " " << dtype_name(dt) << " sequence " << i;
      }
    }
  }
}
