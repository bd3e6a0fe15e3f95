// The cache scan, name resolution and garbage collection over a cache built
// by hand in a temporary folder.
#include <gtest/gtest.h>

#include <fstream>

#include "registry/download.h"
#include "registry/local_models.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::registry;

namespace {

struct TempCache {
  fs::path root;
  TempCache() {
    root = fs::temp_directory_path() / ("ingot-registry-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root);
    fs::create_directories(root);
  }
  ~TempCache() { fs::remove_all(root); }
};

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// A repo with the given files at one commit, each its own blob; ref `main` unless `ref` is empty.
void add_repo(const fs::path& cache, const std::string& repo, const std::string& commit,
              const std::vector<std::pair<std::string, std::string>>& files, const std::string& ref = "main") {
  RepoPaths p = repo_paths(cache, repo);
  int n = 0;
  for (const auto& [name, body] : files) {
    const std::string etag = commit.substr(0, 8) + std::to_string(n++);
    write(p.blob(etag), body);
    link_snapshot_file(p, commit, name, etag);
  }
  if (!ref.empty()) write_ref(p, ref, commit);
}

const std::string kC1(40, '1'), kC2(40, '2');

}  // namespace

TEST(LocalModels, ScanNamesAndAliases) {
  TempCache t;
  add_repo(t.root, "org/dense", kC1, {{"config.json", "{}"}, {"model.safetensors", "xx"}});
  add_repo(t.root, "org/quant-GGUF", kC1, {{"model-Q4_K_M.gguf", "gguf"}});
  add_repo(t.root, "org/tok-only", kC1, {{"tokenizer.json", "{}"}});
  auto ms = list_cached_models(t.root);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].name, "org/dense");
  EXPECT_TRUE(fs::is_directory(ms[0].path));
  EXPECT_EQ(ms[1].name, "org/quant-GGUF/model-Q4_K_M.gguf");
  EXPECT_EQ(ms[1].aliases, std::vector<std::string>{"org/quant-GGUF"});
  EXPECT_EQ(snapshot_bytes(ms[0].path), 4);
}

TEST(LocalModels, ResolveExactSubstringAndAmbiguity) {
  TempCache t;
  add_repo(t.root, "org/alpha-1b", kC1, {{"config.json", "{}"}, {"model.safetensors", "x"}});
  add_repo(t.root, "org/alpha-7b", kC1, {{"config.json", "{}"}, {"model.safetensors", "x"}});
  auto ms = list_cached_models(t.root);
  EXPECT_EQ(resolve_model("org/alpha-1b", ms), ms[0].path.string());
  EXPECT_EQ(resolve_model("7B", ms), ms[1].path.string());  // case-insensitive part of a name
  const std::string existing = t.root.string();
  EXPECT_EQ(resolve_model(existing, ms), existing);  // a path wins
  try {
    resolve_model("alpha", ms);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("org/alpha-1b, org/alpha-7b"), std::string::npos) << e.what();
  }
  try {
    resolve_model("org/missing", ms);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
    EXPECT_NE(std::string(e.what()).find("ingot get org/missing"), std::string::npos) << e.what();
  }
}

TEST(LocalModels, TwoRefsOneSnapshotAreOneModel) {
  TempCache t;
  add_repo(t.root, "org/m", kC1, {{"config.json", "{}"}, {"model.safetensors", "x"}});
  write_ref(repo_paths(t.root, "org/m"), "v1", kC1);
  auto ms = list_cached_models(t.root);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].aliases, std::vector<std::string>{"org/m@v1"});
  EXPECT_EQ(resolve_model("org/m@v1", ms), ms[0].path.string());
}

TEST(Gc, RemovesUnreferencedSnapshotsBlobsAndStaleIncomplete) {
  TempCache t;
  add_repo(t.root, "org/m", kC1, {{"config.json", "{}"}, {"model.safetensors", "old-weights"}});
  add_repo(t.root, "org/m", kC2, {{"config.json", "{}"}, {"model.safetensors", "new"}});  // main moves to kC2
  RepoPaths p = repo_paths(t.root, "org/m");
  write(p.incomplete("stale"), "12345");
  write(p.incomplete("fresh"), "123");
  fs::last_write_time(p.incomplete("stale"), fs::file_time_type::clock::now() - std::chrono::hours(2));
  Reclaimed r = collect_garbage(t.root, std::chrono::hours(1));
  EXPECT_EQ(r.snapshots, 1);
  EXPECT_EQ(r.blobs, 2);
  EXPECT_EQ(r.incomplete, 1);
  EXPECT_EQ(r.bytes, 2 + 11 + 5);
  EXPECT_FALSE(fs::exists(p.snapshot(kC1)));
  EXPECT_TRUE(fs::exists(p.incomplete("fresh")));
  EXPECT_EQ(list_cached_models(t.root).size(), 1u);
  // Nothing left to collect the second time.
  EXPECT_EQ(collect_garbage(t.root, std::chrono::hours(1)).bytes, 0);
}

TEST(Rm, WholeRepoAndOneRef) {
  TempCache t;
  add_repo(t.root, "org/m", kC1, {{"config.json", "{}"}, {"model.safetensors", "abc"}});
  add_repo(t.root, "org/m", kC2, {{"config.json", "{}"}, {"model.safetensors", "defg"}}, "v2");
  Reclaimed r = remove_model(t.root, "org/m@v2");
  EXPECT_EQ(r.bytes, 2 + 4);
  EXPECT_EQ(r.snapshots, 1);
  r = remove_model(t.root, "org/m");
  EXPECT_EQ(r.bytes, 2 + 3 + 40);  // blobs and refs/main
  EXPECT_EQ(r.blobs, 2);
  EXPECT_FALSE(fs::exists(repo_paths(t.root, "org/m").root));
  EXPECT_THROW(remove_model(t.root, "org/m"), Error);
  EXPECT_THROW(remove_model(t.root, "not a repo"), Error);
}
