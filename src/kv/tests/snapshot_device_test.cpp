// Snapshots of a device pool: the staging (pinned memory, downloads beside the
// engine's stream) and the chunked upload on restore. A plug-in stands in for
// Device::CUDA with host memory, so CI runs these paths without a GPU (its
// own process: nothing else sees the stand-in); the same round trips run on a
// real GPU in paged_cuda_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "backend/cpu/cpu_backend.h"
#include "kv/kinds.h"
#include "kv/paged.h"
#include "kv/snapshot.h"
#include "runtime/device_plugin.h"
#include "test_util.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::kv;
using namespace ingot::kv::testing;
namespace fs = std::filesystem;

namespace {

int g_pinned = 0, g_gathered = 0, g_uploads = 0;

std::shared_ptr<Storage> stand_in_alloc(size_t bytes) {
  void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  return Storage::adopt(p, bytes, Device::CUDA, [](void* q) { std::free(q); });
}

void stand_in_copy(void* dst, Device dd, const void* src, Device sd, size_t bytes) {
  if (dd == Device::CUDA && sd == Device::CPU) ++g_uploads;
  std::memcpy(dst, src, bytes);
}

std::shared_ptr<Storage> stand_in_pinned(size_t bytes) {
  ++g_pinned;
  return Storage::host(bytes);
}

void stand_in_gather(void* dst, const void* const* src, const size_t* bytes, size_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < n; ++i) {
    ++g_gathered;
    std::memcpy(d, src[i], bytes[i]);
    d += bytes[i];
  }
}

class DeviceSnapshot : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runtime::DevicePlugin p;
    p.device = Device::CUDA;
    p.backend = cpu::backend();
    p.allocate = &stand_in_alloc;
    p.copy = &stand_in_copy;
    p.pinned_host = &stand_in_pinned;
    p.gather = &stand_in_gather;
    p.paged = *paged_kernels(Device::CPU);
    runtime::register_device(p);
  }
  void SetUp() override {
    dir_ = fs::temp_directory_path() / str_cat("ingot-kv-devsnap-", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::vector<LayerSpec> layout() {
  LayerSpec s;
  s.kv_heads = 2;
  s.head_dim = s.v_head_dim = 32;
  return {s, s, s};
}

std::unique_ptr<SequenceCache> filled(Pool& pool, int64_t n, uint32_t seed) {
  // Rows in the dtype the pool stores (the stand-in has no device casts).
  const DType dt = pool.options().quant == KvQuant::None ? pool.dtype() : DType::F32;
  std::mt19937 rng(seed);
  auto seq = pool.new_sequence();
  for (int l = 0; l < seq->num_layers(); ++l)
    seq->layer(l).append(random_tensor(rng, {n, 2, 32}, dt).to(pool.device()),
                         random_tensor(rng, {n, 2, 32}, dt).to(pool.device()));
  return seq;
}

std::vector<int32_t> ids(int64_t n) {
  std::vector<int32_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<int32_t>(i * 3 + 1));
  return v;
}

void expect_same(SequenceCache& a, SequenceCache& b, int64_t n) {
  for (int l = 0; l < a.num_layers(); ++l) {
    int64_t f = 0;
    auto [ka, va] = a.layer(l).fetch(&f);
    auto [kb, vb] = b.layer(l).fetch(&f);
    EXPECT_TRUE(same_bytes(ka.to(Device::CPU).slice(0, 0, n), kb.to(Device::CPU).slice(0, 0, n))) << "layer " << l;
    EXPECT_TRUE(same_bytes(va.to(Device::CPU).slice(0, 0, n), vb.to(Device::CPU).slice(0, 0, n))) << "layer " << l;
  }
}

}  // namespace

TEST_F(DeviceSnapshot, ADevicePoolRoundTripsThroughStagingAndIsInterchangeableWithTheHost) {
  for (const char* kind : {"paged", "kv8", "kv4"}) {
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(str_cat(kind, " ", dtype_name(dt)));
      auto dev = Pool::create(layout(), dt, Device::CUDA, pool_options_for(kind));
      auto host = Pool::create(layout(), dt, Device::CPU, pool_options_for(kind));
      SnapshotKey key{"m1", "tok1", dev->scheme()};
      ASSERT_EQ(key.scheme, host->scheme()) << "a snapshot's scheme does not name the device";
      auto seq = filled(*dev, 53, 7);
      const std::string p = (dir_ / "dev.ikv").string();
      const int pinned = g_pinned, gathered = g_gathered;
      write_snapshot(p, *seq, ids(53), key);
      EXPECT_EQ(g_pinned, pinned + 1) << "one pinned staging buffer per write";
      EXPECT_GE(g_gathered, gathered + 3 * 4) << "every block downloaded through the gather hook";

      const int uploads = g_uploads;
      std::vector<int32_t> toks;
      auto back = restore_snapshot(p, *dev, key, &toks);
      EXPECT_GT(g_uploads, uploads) << "restored by uploading";
      EXPECT_EQ(toks, ids(53));
      EXPECT_EQ(back->offset(), 53);
      expect_same(*seq, *back, 53);
      if (std::string(kind) == "kv4") {
        EXPECT_EQ(dynamic_cast<PagedLayerCache&>(back->layer(0)).open_block(), 3) << "open rows restored";
        std::mt19937 r2(2);
        AttnParams ap;
        ap.scale = 0.2f;
        Tensor q = random_tensor(r2, {1, 4, 32}).to(Device::CUDA);
        EXPECT_TRUE(same_bytes(seq->layer(1).attend(q, ap).to(Device::CPU), back->layer(1).attend(q, ap).to(Device::CPU)));
      }
      // The file is the same whichever pool wrote it or reads it.
      auto on_host = restore_snapshot(p, *host, key);
      expect_same(*seq, *on_host, 53);
      const std::string hp = (dir_ / "host.ikv").string();
      write_snapshot(hp, *on_host, ids(53), key);
      auto back2 = restore_snapshot(hp, *dev, key);
      expect_same(*seq, *back2, 53);
      back.reset();
      back2.reset();
      seq.reset();
      EXPECT_EQ(dev->used_blocks(), 0);
    }
  }
}

TEST_F(DeviceSnapshot, ACorruptChunkIsRefusedBeforeTheDevicePoolAdoptsIt) {
  auto dev = Pool::create(layout(), DType::F32, Device::CUDA, pool_options_for("paged"));
  SnapshotKey key{"m1", "tok1", dev->scheme()};
  auto seq = filled(*dev, 9000, 9);  // ~13.5 MB: two hash chunks
  const std::string p = (dir_ / "a.ikv").string();
  const uint64_t bytes = write_snapshot(p, *seq, ids(9000), key);
  seq.reset();
  const int64_t total = dev->total_blocks();
  for (uint64_t at : {uint64_t{6000}, bytes - 6000}) {
    const std::string c = (dir_ / "c.ikv").string();
    damaged_copy(p, c, at, 0x10);
    try {
      restore_snapshot(c, *dev, key);
      ADD_FAILURE() << "a flipped byte at " << at << " was restored";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
    }
    EXPECT_EQ(dev->used_blocks(), 0);
    EXPECT_EQ(dev->total_blocks(), total) << "no slab adopted";
  }
  auto back = restore_snapshot(p, *dev, key);
  EXPECT_EQ(back->offset(), 9000);
}
