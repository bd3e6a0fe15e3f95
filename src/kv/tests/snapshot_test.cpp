// SSD snapshots: bit-exact round trips, refusal of foreign / corrupt /
// truncated files with nothing loaded, a writer killed mid-write, and the
// directory store (index at start-up, LRU bound, write-behind).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>

#include "kv/kinds.h"
#include "kv/paged.h"
#include "kv/snapshot_store.h"
#include "test_util.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::kv;
using namespace ingot::kv::testing;
namespace fs = std::filesystem;

namespace {

std::vector<LayerSpec> layout() {
  LayerSpec s;
  s.kv_heads = 2;
  s.head_dim = s.v_head_dim = 32;
  return {s, s, s};
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / str_cat("ingot-kv-", name, "-", ::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::unique_ptr<SequenceCache> filled(Pool& pool, int64_t n, std::mt19937& rng) {
  auto seq = pool.new_sequence();
  for (int l = 0; l < seq->num_layers(); ++l)
    seq->layer(l).append(random_tensor(rng, {n, 2, 32}), random_tensor(rng, {n, 2, 32}));
  return seq;
}

std::vector<int32_t> ids(int64_t n, int32_t salt = 0) {
  std::vector<int32_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<int32_t>(i * 7 + salt));
  return v;
}

void expect_same(SequenceCache& a, SequenceCache& b, int64_t n) {
  for (int l = 0; l < a.num_layers(); ++l) {
    int64_t f = 0;
    auto [ka, va] = a.layer(l).fetch(&f);
    auto [kb, vb] = b.layer(l).fetch(&f);
    EXPECT_TRUE(same_bytes(ka.slice(0, 0, n), kb.slice(0, 0, n))) << "layer " << l;
    EXPECT_TRUE(same_bytes(va.slice(0, 0, n), vb.slice(0, 0, n))) << "layer " << l;
  }
}

}  // namespace

TEST(Snapshot, RoundTripIsBitExactForEveryScheme) {
  for (const char* kind : {"paged", "kv8", "kv4"}) {
    for (DType dt : {DType::F32, DType::BF16}) {
      std::mt19937 rng(31);
      auto pool = Pool::create(layout(), dt, Device::CPU, pool_options_for(kind));
      SnapshotKey key{"m1", "tok1", pool->scheme()};
      auto seq = filled(*pool, 53, rng);
      fs::path d = temp_dir("rt");
      const std::string p = (d / "a.ikv").string();
      write_snapshot(p, *seq, ids(53), key);
      auto pool2 = Pool::create(layout(), dt, Device::CPU, pool_options_for(kind));
      std::vector<int32_t> toks;
      auto back = restore_snapshot(p, *pool2, key, &toks);
      EXPECT_EQ(toks, ids(53));
      EXPECT_EQ(back->offset(), 53);
      expect_same(*seq, *back, 53);
      // The restored blocks were adopted, not copied into the initial slab.
      EXPECT_EQ(pool2->layer(0)->slab_count(), 2);
      // The restored prefix is published: appending copies its last block.
      std::mt19937 r2(1);
      for (int l = 0; l < 3; ++l) back->layer(l).append(random_tensor(r2, {2, 2, 32}), random_tensor(r2, {2, 2, 32}));
      auto again = restore_snapshot(p, *pool2, key);
      expect_same(*seq, *again, 53);
      if (std::string(kind) == "kv4") {  // the open block's exact rows came back too
        EXPECT_EQ(dynamic_cast<PagedLayerCache&>(again->layer(0)).open_block(), 3);
        AttnParams ap;
        ap.scale = 0.2f;
        Tensor q = random_tensor(r2, {1, 4, 32});
        EXPECT_TRUE(same_bytes(seq->layer(1).attend(q, ap), again->layer(1).attend(q, ap)));
      }
      back.reset();
      again.reset();
      EXPECT_EQ(pool2->used_blocks(), 0);
      fs::remove_all(d);
    }
  }
}

TEST(Snapshot, SlidingWindowLayersRoundTripAndKeepDecoding) {
  std::mt19937 rng(35);
  std::vector<LayerSpec> lay = layout();
  lay[1].window = 16;  // a rotating layer between two paged ones
  PoolOptions o = pool_options_for("paged");
  o.window_slack = 4;
  auto pool = Pool::create(lay, DType::BF16, Device::CPU, o);
  SnapshotKey key{"m1", "tok1", pool->scheme()};
  auto seq = filled(*pool, 45, rng);
  fs::path d = temp_dir("win");
  const std::string p = (d / "w.ikv").string();
  write_snapshot(p, *seq, ids(45), key);
  EXPECT_THROW(write_snapshot((d / "x.ikv").string(), *seq, ids(40), key), Error)
      << "a window layer cannot be cut to a shorter prefix";
  auto back = restore_snapshot(p, *pool, key);
  AttnParams ap;
  ap.scale = 0.2f;
  for (int step = 0; step < 30; ++step) {
    Tensor k = random_tensor(rng, {1, 2, 32}), v = random_tensor(rng, {1, 2, 32}), q = random_tensor(rng, {1, 4, 32});
    for (int l = 0; l < 3; ++l) {
      ap.window = lay[static_cast<size_t>(l)].window;
      seq->layer(l).append(k, v);
      back->layer(l).append(k, v);
      ASSERT_TRUE(same_bytes(seq->layer(l).attend(q, ap), back->layer(l).attend(q, ap))) << "layer " << l;
    }
  }
  fs::remove_all(d);
}

TEST(Snapshot, ForeignCorruptAndTruncatedFilesAreRefused) {
  std::mt19937 rng(32);
  auto pool = Pool::create(layout(), DType::F32, Device::CPU, pool_options_for("paged"));
  SnapshotKey key{"m1", "tok1", pool->scheme()};
  auto seq = filled(*pool, 40, rng);
  fs::path d = temp_dir("bad");
  const std::string p = (d / "a.ikv").string();
  write_snapshot(p, *seq, ids(40), key);
  auto target = Pool::create(layout(), DType::F32, Device::CPU, pool_options_for("paged"));
  const int64_t total = target->total_blocks();
  auto refused = [&](Pool& pl, const SnapshotKey& k, const std::string& path) {
    EXPECT_THROW(restore_snapshot(path, pl, k), Error) << path;
    EXPECT_EQ(pl.used_blocks(), 0) << "nothing loaded";
  };
  refused(*target, {"other-model", "tok1", key.scheme}, p);
  refused(*target, {"m1", "tok2", key.scheme}, p);
  PoolOptions bs32 = pool_options_for("paged");
  bs32.block_size = 32;
  auto p32 = Pool::create(layout(), DType::F32, Device::CPU, bs32);
  refused(*p32, key, p);
  auto pq = Pool::create(layout(), DType::F32, Device::CPU, pool_options_for("kv8"));
  refused(*pq, key, p);
  // Flip one payload byte, one header byte; truncate.
  const auto size = fs::file_size(p);
  for (uint64_t at : {size - 100, uint64_t{40}}) {
    const std::string c = (d / "c.ikv").string();
    damaged_copy(p, c, at, 0x5a);
    refused(*target, key, c);
  }
  const std::string t = (d / "t.ikv").string();
  fs::copy_file(p, t);
  fs::resize_file(t, size - 4096);
  refused(*target, key, t);
  // A file of the previous format version (before KV4 rows were rotated) is
  // refused by its version, not mistaken for data.
  const std::string old = (d / "v1.ikv").string();
  fs::copy_file(p, old);
  {
    std::fstream f(old, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(7);
    f.put('1');
  }
  refused(*target, key, old);
  try {
    restore_snapshot(old, *target, key);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("format version 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_snapshot_info(old), Error);
  EXPECT_EQ(target->total_blocks(), total) << "no slab adopted by a refused restore";
  fs::remove_all(d);
}

TEST(Snapshot, EveryChunkOfALargePayloadIsChecked) {
  // 3 layers x 2 planes x 2 heads x 32 float32 = 1.5 KiB a token: 12 000
  // tokens are ~18 MB, three 8 MiB hash chunks checked in parallel.
  std::mt19937 rng(35);
  auto pool = Pool::create(layout(), DType::F32, Device::CPU, pool_options_for("paged"));
  SnapshotKey key{"m1", "tok1", pool->scheme()};
  auto seq = filled(*pool, 12000, rng);
  fs::path d = temp_dir("chunks");
  const std::string p = (d / "a.ikv").string();
  const uint64_t bytes = write_snapshot(p, *seq, ids(12000), key);
  EXPECT_EQ(bytes, fs::file_size(p));
  ASSERT_GT(bytes, uint64_t{16} << 20);
  auto target = Pool::create(layout(), DType::F32, Device::CPU, pool_options_for("paged"));
  {
    auto back = restore_snapshot(p, *target, key);
    expect_same(*seq, *back, 12000);
  }
  // One flipped byte in the first, a middle and the last chunk: each refused.
  for (uint64_t at : {uint64_t{5000}, uint64_t{12} << 20, bytes - 5000}) {
    const std::string c = (d / "c.ikv").string();
    damaged_copy(p, c, at, 0x01);
    try {
      restore_snapshot(c, *target, key);
      ADD_FAILURE() << "a flipped byte at " << at << " was restored";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(target->used_blocks(), 0);
  fs::remove_all(d);
}

TEST(Snapshot, WriterKilledMidWriteLeavesNothingThatRestores) {
  std::mt19937 rng(33);
  auto pool = Pool::create(layout(), DType::F32, Device::CPU, pool_options_for("paged"));
  SnapshotKey key{"m1", "tok1", pool->scheme()};
  auto seq = filled(*pool, 700, rng);  // 44 blocks x 3 layers x 2 planes: many write batches
  fs::path d = temp_dir("kill");
  const std::string p = (d / "a.ikv").string();
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SnapshotWriteHooks h;
    h.progress = [](uint64_t bytes) {
      if (bytes > 64 * 1024) ::kill(::getpid(), SIGKILL);
    };
    try {
      write_snapshot(p, *seq, ids(700), key, h);
    } catch (...) {
    }
    ::_exit(0);  // not reached when the kill lands
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child should have died mid-write";
  EXPECT_FALSE(fs::exists(p)) << "no final file from an unfinished write";
  int leftovers = 0;
  for (const auto& de : fs::directory_iterator(d)) {
    ++leftovers;
    EXPECT_THROW(restore_snapshot(de.path().string(), *pool, key), Error);
  }
  EXPECT_EQ(leftovers, 1) << "the temp file of the dead writer";
  SnapshotStore store(d.string(), key, 1 << 30);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_TRUE(fs::is_empty(d)) << "the index removes dead temp files";
  fs::remove_all(d);
}

TEST(SnapshotStore, WriteBehindIndexAtStartupAndLruBound) {
  std::mt19937 rng(34);
  auto pool = Pool::create(layout(), DType::F32, Device::CPU, pool_options_for("paged"));
  SnapshotKey key{"m1", "tok1", pool->scheme()};
  fs::path d = temp_dir("store");
  uint64_t one = 0;
  {
    SnapshotStore store(d.string(), key, 1 << 30, 8);
    auto a = filled(*pool, 32, rng);
    ASSERT_TRUE(store.submit(a->clone(), ids(32)));
    // The source keeps decoding; its writes never reach the queued snapshot.
    Tensor before = [&] { int64_t f; return a->layer(0).fetch(&f).first.clone(); }();
    a->layer(0).trim(5);
    a->layer(0).append(random_tensor(rng, {5, 2, 32}), random_tensor(rng, {5, 2, 32}));
    store.flush();
    ASSERT_EQ(store.size(), 1u);
    one = store.disk_bytes();
    auto e = store.longest_prefix(ids(40));
    ASSERT_TRUE(e.has_value());
    auto r = store.restore(*e, *pool);
    int64_t f = 0;
    EXPECT_TRUE(same_bytes(r->layer(0).fetch(&f).first, before));
    EXPECT_FALSE(store.longest_prefix(ids(40, 1)).has_value());
  }
  {
    // A new process sees the same snapshot; another model's key does not.
    SnapshotStore again(d.string(), key, 1 << 30);
    EXPECT_EQ(again.size(), 1u);
    SnapshotStore other(d.string(), {"m2", "tok1", key.scheme}, 1 << 30);
    EXPECT_EQ(other.size(), 0u);
  }
  {
    // Bound of 2.5 snapshots: a third one evicts the least recently used.
    SnapshotStore store(d.string(), key, one * 5 / 2, 8);
    auto first = store.longest_prefix(ids(32));
    ASSERT_TRUE(first.has_value());
    ASSERT_TRUE(store.submit(filled(*pool, 32, rng), ids(32, 1)));
    store.flush();
    ASSERT_EQ(store.size(), 2u);
    store.restore(*first, *pool);  // the oldest becomes the most recent
    ASSERT_TRUE(store.submit(filled(*pool, 32, rng), ids(32, 2)));
    store.flush();
    EXPECT_EQ(store.size(), 2u);
    EXPECT_LE(store.disk_bytes(), one * 5 / 2);
    EXPECT_TRUE(store.longest_prefix(ids(32)).has_value()) << "recently restored survives";
    EXPECT_FALSE(store.longest_prefix(ids(32, 1)).has_value()) << "least recently used evicted";
    EXPECT_EQ(store.stats().evicted, 1);
  }
  EXPECT_EQ(pool->used_blocks(), 0);
  fs::remove_all(d);
}

namespace {

// Runs `body` in a child process (so it may drop privileges or lower its
// limits) and returns its exit code; the child prints why it failed.
int in_child(const std::function<int()>& body) {
  pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    int rc = 99;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: unexpected exception: %s\n", e.what());
    }
    std::fflush(stderr);
    ::_exit(rc);
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// 0 when `write` throws an Io error whose message contains `why`.
int expect_io_error(const std::function<void()>& write, const std::string& why) {
  try {
    write();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Io && std::string(e.what()).find(why) != std::string::npos) return 0;
    std::fprintf(stderr, "child: wrong error: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr, "child: the write succeeded\n");
  return 1;
}

std::vector<std::string> entries_of(const fs::path& d) {
  std::vector<std::string> out;
  for (const auto& de : fs::directory_iterator(d)) out.push_back(de.path().filename().string());
  return out;
}

}  // namespace

TEST(SnapshotFaults, ReadOnlyDirectoryIsAClearErrorAndLeavesNothing) {
  std::mt19937 rng(35);
  auto pool = Pool::create(layout(), DType::F32, Device::CPU, pool_options_for("paged"));
  SnapshotKey key{"m1", "tok1", pool->scheme()};
  auto seq = filled(*pool, 40, rng);
  fs::path d = temp_dir("readonly");
  fs::permissions(d, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                         fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  int rc = in_child([&] {
    // Root ignores directory permissions: become an unprivileged user first.
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) return 3;
    int r = expect_io_error([&] { write_snapshot((d / "a.ikv").string(), *seq, ids(40), key); },
                            "cannot create snapshot");
    if (r != 0) return r;
    // The write-behind store counts the failure and indexes nothing.
    SnapshotStore store(d.string(), key, 1 << 30);
    if (!store.submit(seq->clone(), ids(40))) return 4;
    store.flush();
    return store.stats().failed == 1 && store.size() == 0 ? 0 : 5;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(entries_of(d).empty());
  fs::permissions(d, fs::perms::owner_all);
  fs::remove_all(d);
}

TEST(SnapshotFaults, DiskFullIsAClearErrorAndLeavesNothing) {
  std::mt19937 rng(36);
  auto pool = Pool::create(layout(), DType::F32, Device::CPU, pool_options_for("paged"));
  SnapshotKey key{"m1", "tok1", pool->scheme()};
  auto big = filled(*pool, 700, rng);
  auto small = filled(*pool, 8, rng);
  fs::path d = temp_dir("full");
  const uint64_t limit = 96 * 1024;
  int rc = in_child([&] {
    // A file-size limit stands in for a full disk: writes past it fail with EFBIG
    // (once SIGXFSZ, which would kill the process, is ignored).
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{limit, limit};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 3;
    int r = expect_io_error([&] { write_snapshot((d / "big.ikv").string(), *big, ids(700), key); },
                            "snapshot write to");
    if (r != 0) return r;
    if (!entries_of(d).empty()) return 6;  // not even the temp file
    SnapshotStore store(d.string(), key, 1 << 30);
    if (!store.submit(big->clone(), ids(700))) return 4;
    // A snapshot that fits still goes through after the failure.
    if (!store.submit(small->clone(), ids(8, 3))) return 4;
    store.flush();
    return store.stats().failed == 1 && store.stats().written == 1 && store.size() == 1 ? 0 : 5;
  });
  EXPECT_EQ(rc, 0);
  // Only the small, complete snapshot is left, and it restores; a new index sees just it.
  auto left = entries_of(d);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].rfind(".", 0), std::string::npos) << "no temp file: " << left[0];
  EXPECT_LT(fs::file_size(d / left[0]), limit);
  SnapshotStore again(d.string(), key, 1 << 30);
  ASSERT_EQ(again.size(), 1u);
  auto e = again.longest_prefix(ids(8, 3));
  ASSERT_TRUE(e.has_value());
  auto r = again.restore(*e, *pool);
  expect_same(*r, *small, 8);
  fs::remove_all(d);
}

TEST(SnapshotStore, WritersKilledAtRandomPointsLeaveOnlyWholeSnapshots) {
  // A child writes snapshots through the store and is SIGKILLed after a random
  // delay: before, inside or between writes, fsyncs and renames. After every
  // kill a new index restores exactly what was complete, refuses nothing and
  // leaves no temp file behind.
  fs::path d = temp_dir("killstore");
  auto pool = Pool::create(layout(), DType::F32, Device::CPU, pool_options_for("paged"));
  SnapshotKey key{"m1", "tok1", pool->scheme()};
  constexpr int kRuns = 24, kPerRun = 4;
  constexpr int64_t kTokens = 300;
  // Snapshot k of every run holds the same data, made again here to compare.
  auto make = [&](int k) {
    std::mt19937 rng(static_cast<uint32_t>(100 + k));
    return filled(*pool, kTokens, rng);
  };
  std::mt19937 delays(37);
  int killed = 0;
  for (int run = 0; run < kRuns; ++run) {
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      // Writes until killed, so every kill lands in the middle of the work
      // however fast the machine is.
      SnapshotStore store(d.string(), key, 1 << 30, kPerRun, true);
      for (int k = 0;; k = (k + 1) % kPerRun) store.submit(make(k), ids(kTokens, k));
    }
    ::usleep(std::uniform_int_distribution<useconds_t>(0, 40'000)(delays));
    ::kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    killed += WIFSIGNALED(status) ? 1 : 0;
    SnapshotStore store(d.string(), key, 1 << 30, 4, true);
    EXPECT_EQ(store.stats().refused, 0) << "run " << run << ": a renamed snapshot is always whole";
    for (const auto& name : entries_of(d)) EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
    for (int k = 0; k < kPerRun; ++k) {
      auto e = store.longest_prefix(ids(kTokens, k));
      if (!e) continue;
      auto r = store.restore(*e, *pool);
      ASSERT_TRUE(r) << "run " << run << " snapshot " << k;
      auto want = make(k);
      expect_same(*r, *want, kTokens);
    }
  }
  EXPECT_EQ(killed, kRuns) << "every child is killed while it writes";
  EXPECT_EQ(pool->used_blocks(), 0);
  fs::remove_all(d);
}

TEST(SnapshotStore, BoundHoldsUnderManyDistinctPrompts) {
  std::mt19937 rng(38);
  auto pool = Pool::create(layout(), DType::F32, Device::CPU, pool_options_for("paged"));
  SnapshotKey key{"m1", "tok1", pool->scheme()};
  fs::path d = temp_dir("bound");
  auto one = filled(*pool, 16, rng);
  uint64_t file_bytes = 0;
  {
    SnapshotStore probe(d.string(), key, 1 << 30);
    probe.submit(one->clone(), ids(16, -1));
    probe.flush();
    file_bytes = probe.disk_bytes();
  }
  const uint64_t bound = file_bytes * 20 + file_bytes / 2;
  constexpr int kPrompts = 500;
  SnapshotStore store(d.string(), key, bound, 8, true);
  for (int i = 0; i < kPrompts; ++i) {
    while (!store.submit(one->clone(), ids(16, i))) store.flush();  // never drop: every prompt is written
    auto on_disk = [&] {
      uint64_t n = 0;
      for (const auto& de : fs::directory_iterator(d))
        if (de.path().extension() == ".ikv") n += de.file_size();
      return n;
    };
    if (i % 50 == 49) {
      store.flush();
      EXPECT_LE(store.disk_bytes(), bound);
      EXPECT_LE(on_disk(), bound) << "after " << i + 1 << " prompts";
    }
  }
  store.flush();
  EXPECT_EQ(store.size(), 20u);
  EXPECT_EQ(store.stats().written, kPrompts);
  EXPECT_EQ(store.stats().evicted, kPrompts + 1 - 20);  // the probe's file too
  // The most recent prompts are the ones kept.
  EXPECT_TRUE(store.has(ids(16, kPrompts - 1)));
  EXPECT_FALSE(store.has(ids(16, 0)));
  fs::remove_all(d);
}

TEST(SnapshotStore, ExclusiveFolderRefusesForeignAndCorruptFiles) {
  std::mt19937 rng(39);
  auto pool = Pool::create(layout(), DType::F32, Device::CPU, pool_options_for("paged"));
  SnapshotKey key{"m1", "tok1", pool->scheme()};
  fs::path d = temp_dir("exclusive");
  auto seq = filled(*pool, 40, rng);
  write_snapshot((d / "foreign.ikv").string(), *seq, ids(40, 1), {"m2", "tok1", key.scheme});
  write_snapshot((d / "good.ikv").string(), *seq, ids(40, 2), key);
  write_snapshot((d / "late.ikv").string(), *seq, ids(40, 3), key);
  {
    std::ofstream((d / "junk.ikv").string()) << "not a snapshot";
  }
  SnapshotStore store(d.string(), key, 1 << 30, 4, true);
  EXPECT_EQ(store.stats().refused, 2);
  EXPECT_FALSE(fs::exists(d / "foreign.ikv"));
  EXPECT_FALSE(fs::exists(d / "junk.ikv"));
  EXPECT_EQ(store.size(), 2u);
  // Corrupted after it was indexed: the restore refuses it (null, deleted, counted).
  {
    std::fstream f((d / "late.ikv").string(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(d / "late.ikv") - 10));
    f.put('\x7f');
  }
  const int64_t held = pool->used_blocks();
  auto late = store.longest_prefix(ids(40, 3));
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(store.restore(*late, *pool), nullptr);
  EXPECT_EQ(store.stats().refused, 3);
  EXPECT_FALSE(fs::exists(d / "late.ikv"));
  EXPECT_FALSE(store.longest_prefix(ids(40, 3)).has_value());
  // Removed behind the store's back: a miss, not a refusal.
  auto good = store.longest_prefix(ids(40, 2));
  ASSERT_TRUE(good.has_value());
  fs::remove(d / "good.ikv");
  EXPECT_EQ(store.restore(*good, *pool), nullptr);
  EXPECT_EQ(store.stats().refused, 3);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(pool->used_blocks(), held) << "nothing loaded by a refused restore";
  fs::remove_all(d);
}

TEST(SnapshotStore, PinnedSnapshotsAreEvictedLastAndStayPinnedAfterARestart) {
  std::mt19937 rng(40);
  auto pool = Pool::create(layout(), DType::F32, Device::CPU, pool_options_for("paged"));
  SnapshotKey key{"m1", "tok1", pool->scheme()};
  fs::path d = temp_dir("pin");
  auto one = filled(*pool, 16, rng);
  uint64_t size = 0;
  const auto later = SnapshotStore::Clock::now() + std::chrono::hours(1);
  {
    SnapshotStore store(d.string(), key, 1 << 30, 8, true);
    store.submit(one->clone(), ids(16, 0), later);  // pinned while written
    store.submit(one->clone(), ids(16, 1));
    store.flush();
    EXPECT_TRUE(store.pin(ids(16, 1), SnapshotStore::Clock::now() - std::chrono::seconds(1)));  // expired at once
    EXPECT_FALSE(store.pin(ids(16, 9), later));
    size = store.disk_bytes() / 2;
  }
  // A new index, bound to two files, takes two more: the pinned first one stays.
  SnapshotStore store(d.string(), key, size * 2, 8, true);
  ASSERT_EQ(store.size(), 2u);
  store.submit(one->clone(), ids(16, 2));
  store.submit(one->clone(), ids(16, 3));
  store.flush();
  EXPECT_EQ(store.size(), 2u);
  EXPECT_TRUE(store.has(ids(16, 0))) << "pinned across the restart";
  EXPECT_TRUE(store.has(ids(16, 3)));
  EXPECT_FALSE(store.has(ids(16, 1)));
  EXPECT_FALSE(store.has(ids(16, 2)));
  fs::remove_all(d);
}
