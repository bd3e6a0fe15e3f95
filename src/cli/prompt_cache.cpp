#include "cli/prompt_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include <xxhash.h>

#include "util/error.h"
#include "util/strings.h"

namespace ingot::cli {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kHead = 4u << 20, kSample = 64u << 10;
constexpr int kSamples = 32;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool is_weight_file(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".safetensors" || ext == ".gguf" || ext == ".bin" || p.filename() == "config.json";
}

void hash_range(XXH3_state_t* st, int fd, uint64_t at, uint64_t n, const std::string& path) {
  std::vector<char> buf(static_cast<size_t>(std::min<uint64_t>(n, 1u << 20)));
  while (n) {
    const ssize_t r = ::pread(fd, buf.data(), static_cast<size_t>(std::min<uint64_t>(n, buf.size())),
                              static_cast<off_t>(at));
    if (r <= 0) fail(ErrorKind::Io, "cannot read ", path, " to fingerprint it");
    XXH3_64bits_update(st, buf.data(), static_cast<size_t>(r));
    at += static_cast<uint64_t>(r);
    n -= static_cast<uint64_t>(r);
  }
}

void hash_file(XXH3_state_t* st, const fs::path& p) {
  const std::string path = p.string();
  const uint64_t size = fs::file_size(p);
  const std::string name = p.filename().string();  // not the folder: a moved model keeps its cache
  XXH3_64bits_update(st, name.data(), name.size());
  XXH3_64bits_update(st, &size, sizeof size);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorKind::Io, "cannot open ", path, " to fingerprint it");
  try {
    hash_range(st, fd, 0, std::min(size, kHead), path);
    if (size > kHead + kSample)
      for (int i = 1; i <= kSamples; ++i) hash_range(st, fd, kHead + (size - kHead - kSample) * i / kSamples, kSample, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

std::string digest(XXH3_state_t* st) { return str_cat(std::hex, XXH3_64bits_digest(st)); }

}  // namespace

std::string default_prompt_cache_dir() {
  fs::path base;
  if (std::string x = env("XDG_CACHE_HOME"); !x.empty())
    base = x;
  else if (std::string h = env("HOME"); !h.empty())
    base = fs::path(h) / ".cache";
  else
    fail(ErrorKind::NotFound, "neither XDG_CACHE_HOME nor HOME is set: pass --cache-dir or --no-disk-cache");
  return (base / "ingot" / "prompt-cache").string();
}

std::string weights_fingerprint(const std::string& model_path) {
  std::vector<fs::path> files;
  if (fs::is_directory(model_path)) {
    for (const auto& de : fs::directory_iterator(model_path))
      if (de.is_regular_file() && is_weight_file(de.path())) files.push_back(de.path());
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(model_path);
  }
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> st(XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(st.get());
  for (const auto& f : files) hash_file(st.get(), f);
  return digest(st.get());
}

std::string tokenizer_fingerprint(const std::string& model_path, const std::string& chat_template) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> st(XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(st.get());
  if (fs::is_directory(model_path))
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
      const fs::path p = fs::path(model_path) / name;
      if (!fs::is_regular_file(p)) continue;
      const std::string text = read_text_file(p.string());
      XXH3_64bits_update(st.get(), text.data(), text.size());
    }
  XXH3_64bits_update(st.get(), chat_template.data(), chat_template.size());
  return digest(st.get());
}

}  // namespace ingot::cli
