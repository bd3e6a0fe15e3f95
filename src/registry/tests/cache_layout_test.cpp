#include <gtest/gtest.h>

#include <cstdlib>

#include "registry/cache_layout.h"
#include "registry/hashing.h"
#include "registry/progress.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::registry;

TEST(CacheLayout, RepoFolderRoundTrip) {
  EXPECT_EQ(repo_folder_name("HuggingFaceTB/SmolLM2-135M"), "models--HuggingFaceTB--SmolLM2-135M");
  EXPECT_EQ(repo_id_from_folder("models--HuggingFaceTB--SmolLM2-135M"), "HuggingFaceTB/SmolLM2-135M");
  EXPECT_EQ(repo_id_from_folder("datasets--a--b"), std::nullopt);
  EXPECT_EQ(repo_id_from_folder("models--nohalf"), std::nullopt);
}

TEST(CacheLayout, ModelNameForPath) {
  const std::string commit(40, 'a');
  const std::string snap = "/h/hub/models--HuggingFaceTB--SmolLM2-135M-Instruct/snapshots/" + commit;
  EXPECT_EQ(repo_id_of_snapshot_path(snap), "HuggingFaceTB/SmolLM2-135M-Instruct");
  EXPECT_EQ(model_name_for_path(snap), "HuggingFaceTB/SmolLM2-135M-Instruct");
  EXPECT_EQ(model_name_for_path(snap + "/"), "HuggingFaceTB/SmolLM2-135M-Instruct");
  EXPECT_EQ(model_name_for_path("/h/hub/models--org--x-GGUF/snapshots/" + commit + "/sub/x.Q4_0.gguf"), "org/x-GGUF");
  // Outside a snapshot: the file name without .gguf, or the folder name (dots kept).
  EXPECT_EQ(model_name_for_path("/m/SmolLM2-135M-Instruct.Q4_1.gguf"), "SmolLM2-135M-Instruct.Q4_1");
  EXPECT_EQ(model_name_for_path("/m/Qwen3-0.6B"), "Qwen3-0.6B");
  EXPECT_EQ(model_name_for_path("/m/Qwen3-0.6B/"), "Qwen3-0.6B");
  EXPECT_EQ(model_name_for_path("rel/dir/../llama"), "llama");
  EXPECT_EQ(model_name_for_path("x.gguf"), "x");
  // Shapes that only look like the cache: no commit id, or not a models-- folder.
  EXPECT_EQ(repo_id_of_snapshot_path("/h/models--org--x/snapshots/main/m.gguf"), std::nullopt);
  EXPECT_EQ(model_name_for_path("/h/models--org--x/snapshots/main/m.gguf"), "m");
  EXPECT_EQ(repo_id_of_snapshot_path("/h/datasets--org--x/snapshots/" + commit), std::nullopt);
  EXPECT_EQ(model_name_for_path("/"), "model");
}

TEST(CacheLayout, Paths) {
  RepoPaths p = repo_paths("/c", "org/name");
  EXPECT_EQ(p.blob("abc").string(), "/c/models--org--name/blobs/abc");
  EXPECT_EQ(p.incomplete("abc").string(), "/c/models--org--name/blobs/abc.incomplete");
  EXPECT_EQ(p.snapshot_file("c0ffee", "sub/x.json").string(), "/c/models--org--name/snapshots/c0ffee/sub/x.json");
  EXPECT_EQ(p.ref("main").string(), "/c/models--org--name/refs/main");
}

TEST(CacheLayout, RelativeLinkTargetDepth) {
  EXPECT_EQ(blob_link_target("config.json", "e1"), "../../blobs/e1");
  EXPECT_EQ(blob_link_target("a/b/c.bin", "e1"), "../../../../blobs/e1");
}

TEST(CacheLayout, CacheDirFromEnvironment) {
  setenv("HF_HUB_CACHE", "/x/hub-cache", 1);
  setenv("HF_HOME", "/y", 1);
  EXPECT_EQ(hub_cache_dir().string(), "/x/hub-cache");
  unsetenv("HF_HUB_CACHE");
  EXPECT_EQ(hub_cache_dir().string(), "/y/hub");
  unsetenv("HF_HOME");
  setenv("XDG_CACHE_HOME", "/z", 1);
  EXPECT_EQ(hub_cache_dir().string(), "/z/huggingface/hub");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(hub_cache_dir().string(), "/home/u/.cache/huggingface/hub");
}

TEST(RepoRef, Parse) {
  auto r = parse_repo_ref("org/name@v1.0");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->repo_id, "org/name");
  EXPECT_EQ(r->revision, "v1.0");
  EXPECT_TRUE(r->revision_given);
  r = parse_repo_ref("org/name");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->revision, "main");
  EXPECT_FALSE(r->revision_given);
  EXPECT_TRUE(parse_repo_ref("org/name@refs/pr/1"));
  for (const char* bad : {"name", "a/b/c", "/b", "a/", "a/b@", "a/b@x y", "a/b@../x", "a--x/b", "a/.b", "a b/c"})
    EXPECT_FALSE(parse_repo_ref(bad)) << bad;
  try {
    parse_repo_ref_or_fail("org/name@bad rev");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad revision"), std::string::npos) << e.what();
  }
}

TEST(RepoFiles, SafeNames) {
  EXPECT_TRUE(is_safe_repo_file("a/b.json"));
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../../x", "a//b", "a/", "./a", "a\\b"})
    EXPECT_FALSE(is_safe_repo_file(bad)) << bad;
}

TEST(Etags, NormalizeAndClassify) {
  EXPECT_EQ(normalize_etag("W/\"abc\""), "abc");
  EXPECT_EQ(normalize_etag(" \"abc\" "), "abc");
  EXPECT_EQ(classify_etag(std::string(64, 'a')), EtagKind::Sha256);
  EXPECT_EQ(classify_etag(std::string(40, 'F')), EtagKind::GitSha1);
  EXPECT_EQ(classify_etag(std::string(63, 'a')), EtagKind::Opaque);
  EXPECT_EQ(classify_etag(std::string(64, 'g')), EtagKind::Opaque);
  EXPECT_TRUE(is_commit_hash(std::string(40, '0')));
  EXPECT_FALSE(is_commit_hash("main"));
}

TEST(Etags, KnownHashes) {
  // `printf hello | sha256sum` and `printf hello | git hash-object --stdin`.
  EXPECT_EQ(sha256_hex("hello"), "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
  EXPECT_EQ(git_blob_sha1_hex("hello"), "b6fc4c620b67d95f953a5c1c1230aaab5db5a1b0");
  EXPECT_EQ(git_blob_sha1_hex(""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
}

TEST(Patterns, GlobLikeHuggingFaceHub) {
  EXPECT_TRUE(matches_pattern("model.safetensors", "*.safetensors"));
  EXPECT_TRUE(matches_pattern("sub/model.safetensors", "*.safetensors"));  // '*' crosses '/'
  EXPECT_TRUE(matches_pattern("onnx/model.onnx", "onnx/"));               // folder pattern
  EXPECT_FALSE(matches_pattern("model.onnx", "onnx/"));
  EXPECT_TRUE(matches_pattern("model-Q4_K_M.gguf", "*Q4_K_?.gguf"));
  EXPECT_TRUE(matches_pattern("a1.json", "a[0-9].json"));
  EXPECT_FALSE(matches_pattern("config.json", "*.safetensors"));
  EXPECT_TRUE(matches_any("x.md", {"*.json", "*.md"}));
  EXPECT_FALSE(matches_any("x.md", {}));
}

namespace {
std::vector<std::string> sel(const std::vector<std::string>& files, Selection s) { return select_files("o/r", files, s); }
}  // namespace

TEST(Selection, DefaultsSkipOtherFormats) {
  std::vector<std::string> files = {"config.json", "model.safetensors", "pytorch_model.bin", "model-q4.gguf",
                                    "README.md"};
  EXPECT_EQ(sel(files, {}), (std::vector<std::string>{"config.json", "model.safetensors", "README.md"}));
  Selection inc;
  inc.include = {"*.json"};
  EXPECT_EQ(sel(files, inc), (std::vector<std::string>{"config.json"}));
  Selection exc;
  exc.exclude = {"*.md"};
  EXPECT_EQ(sel(files, exc), (std::vector<std::string>{"config.json", "model.safetensors"}));
  Selection one;
  one.gguf_file = "model-q4.gguf";
  EXPECT_EQ(sel(files, one), (std::vector<std::string>{"model-q4.gguf"}));
}

TEST(Selection, Errors) {
  auto kind_of = [](const std::vector<std::string>& files, Selection s) {
    try {
      select_files("o/r", files, s);
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::Internal;
  };
  EXPECT_EQ(kind_of({"config.json", "pytorch_model.bin"}, {}), ErrorKind::Unsupported);
  EXPECT_EQ(kind_of({"a.gguf", "b.gguf"}, {}), ErrorKind::InvalidArgument);  // several GGUF files: choose one
  Selection missing;
  missing.gguf_file = "c.gguf";
  EXPECT_EQ(kind_of({"a.gguf"}, missing), ErrorKind::NotFound);
  Selection none;
  none.include = {"*.txt"};
  EXPECT_EQ(kind_of({"model.safetensors"}, none), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of({"model.safetensors", "../evil"}, {}), ErrorKind::BadFormat);
}

TEST(ProgressLine, BytesRateEta) {
  std::string line = Progress::format_line(50'000'000, 100'000'000, 10'000'000, true);
  EXPECT_NE(line.find("50.0 MB / 100.0 MB (50%)"), std::string::npos) << line;
  EXPECT_NE(line.find("10.0 MB/s"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 0:05"), std::string::npos) << line;
  EXPECT_EQ(line.front(), '[');
  EXPECT_EQ(Progress::format_line(1, 0, 0, false).find('['), std::string::npos);
}
