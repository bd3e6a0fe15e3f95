// `ingot cache ls | rm | gc`: the prompt cache's disk tier (docs/kv-cache.md):
// one folder per model and KV scheme under the cache folder, each with a
// model.json naming the model and the key its snapshots must carry.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/prompt_cache.h"
#include "cli/table.h"
#include "cli/verbs.h"
#include "kv/snapshot.h"
#include "registry/progress.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::cli {

namespace {

namespace fs = std::filesystem;
using Clock = fs::file_time_type::clock;

// A write in progress leaves a temp file; one this old was abandoned.
constexpr auto kStaleTemp = std::chrono::minutes(10);

struct SnapshotFile {
  fs::path path;
  int64_t bytes = 0;
  fs::file_time_type used;  // the store touches a file when it restores it
};

struct ModelFolder {
  fs::path dir;
  std::string model = "?";  // model.json's, "?" when it is missing or unreadable
  std::optional<kv::SnapshotKey> key;
  std::vector<SnapshotFile> files;
  int64_t bytes() const {
    int64_t n = 0;
    for (const auto& f : files) n += f.bytes;
    return n;
  }
  fs::file_time_type last_used() const {
    fs::file_time_type t{};
    for (const auto& f : files) t = std::max(t, f.used);
    return t;
  }
};

bool is_snapshot(const fs::path& p) { return p.extension() == ".ikv" && p.filename().string()[0] != '.'; }

ModelFolder read_folder(const fs::path& dir) {
  ModelFolder m;
  m.dir = dir;
  try {
    auto j = nlohmann::json::parse(read_text_file((dir / "model.json").string()));
    m.model = j.at("model").get<std::string>();
    const auto& k = j.at("key");
    m.key = kv::SnapshotKey{k.at("model").get<std::string>(), k.at("tokenizer").get<std::string>(),
                            k.at("scheme").get<std::string>()};
  } catch (const std::exception&) {
  }
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(dir, ec))
    if (de.is_regular_file() && is_snapshot(de.path()))
      m.files.push_back({de.path(), static_cast<int64_t>(de.file_size()), de.last_write_time()});
  return m;
}

std::vector<ModelFolder> read_cache(const fs::path& root) {
  std::vector<ModelFolder> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& de : fs::directory_iterator(root, ec))
    if (de.is_directory()) out.push_back(read_folder(de.path()));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.dir < b.dir; });
  return out;
}

std::string ago(fs::file_time_type t) {
  if (t == fs::file_time_type{}) return "-";
  const double s = std::chrono::duration<double>(Clock::now() - t).count();
  return registry::human_duration(std::max(0.0, s)) + " ago";
}

int run_ls(const fs::path& root, bool files) {
  auto folders = read_cache(root);
  if (folders.empty()) {
    std::printf("no cached prompts in %s\n", root.c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {{"ID", "MODEL", "SCHEME", "FILES", "SIZE", "LAST USED"}};
  int64_t total = 0;
  for (const auto& m : folders) {
    rows.push_back({m.dir.filename().string(), m.model, m.key ? m.key->scheme : "?", std::to_string(m.files.size()),
                    registry::human_bytes(m.bytes()), ago(m.last_used())});
    total += m.bytes();
    if (!files) continue;
    for (const auto& f : m.files) {
      std::string tokens = "?";
      try {
        tokens = std::to_string(kv::read_snapshot_info(f.path.string()).tokens.size()) + " tokens";
      } catch (const Error&) {
        tokens = "unreadable";
      }
      rows.push_back({"  " + f.path.filename().string(), tokens, "", "", registry::human_bytes(f.bytes), ago(f.used)});
    }
  }
  print_table(rows);
  std::printf("%s in %s\n", registry::human_bytes(total).c_str(), root.c_str());
  return 0;
}

int run_rm(const fs::path& root, const std::vector<std::string>& targets, bool all) {
  if (targets.empty() && !all) fail(ErrorKind::InvalidArgument, "name a model (its ID or part of its name) or pass --all");
  if (!targets.empty() && all) fail(ErrorKind::InvalidArgument, "pass model names or --all, not both");
  auto folders = read_cache(root);
  std::vector<const ModelFolder*> chosen;
  for (const auto& m : folders)
    if (all) chosen.push_back(&m);
  for (const auto& t : targets) {
    std::vector<const ModelFolder*> hits;
    for (const auto& m : folders)
      if (m.dir.filename() == t) hits = {&m};
    if (hits.empty())
      for (const auto& m : folders)
        if (m.model.find(t) != std::string::npos) hits.push_back(&m);
    if (hits.empty()) fail(ErrorKind::NotFound, "no cached prompts for '", t, "' in ", root.string(), " (see `ingot cache ls`)");
    if (hits.size() > 1) {
      std::string ids;
      for (const auto* h : hits) ids += " " + h->dir.filename().string();
      fail(ErrorKind::InvalidArgument, "'", t, "' matches ", hits.size(), " cached models; name one by ID:", ids);
    }
    chosen.push_back(hits[0]);
  }
  int64_t bytes = 0;
  for (const auto* m : chosen) {
    bytes += m->bytes();
    std::error_code ec;
    fs::remove_all(m->dir, ec);
    if (ec) fail(ErrorKind::Io, "cannot remove ", m->dir.string(), ": ", ec.message());
    std::printf("removed %s (%s, %zu files)\n", m->dir.filename().c_str(), m->model.c_str(), m->files.size());
  }
  std::printf("freed %s\n", registry::human_bytes(bytes).c_str());
  return 0;
}

int run_gc(const fs::path& root, double max_gb) {
  if (max_gb < 0) fail(ErrorKind::InvalidArgument, "--max-gb must be >= 0");
  int64_t unreadable = 0, foreign = 0, temps = 0, over = 0, freed = 0;
  std::vector<SnapshotFile> kept;
  auto drop = [&](const fs::path& p, int64_t bytes, int64_t& count) {
    std::error_code ec;
    if (fs::remove(p, ec)) {
      ++count;
      freed += bytes;
    }
  };
  std::error_code ec;
  if (fs::is_directory(root, ec))
    for (const auto& dir : fs::directory_iterator(root, ec)) {
      if (!dir.is_directory()) continue;
      for (const auto& de : fs::directory_iterator(dir.path(), ec)) {
        const std::string name = de.path().filename().string();
        // A running server's write in progress is young; an old one was cut off.
        if (name.find(".tmp.") != std::string::npos && de.last_write_time() < Clock::now() - kStaleTemp)
          drop(de.path(), static_cast<int64_t>(de.file_size()), temps);
      }
      ModelFolder m = read_folder(dir.path());
      for (const auto& f : m.files) {
        try {
          kv::SnapshotInfo info = kv::read_snapshot_info(f.path.string());
          if (m.key && !(info.key == *m.key)) {
            drop(f.path, f.bytes, foreign);
            continue;
          }
        } catch (const Error&) {
          drop(f.path, f.bytes, unreadable);
          continue;
        }
        kept.push_back(f);
      }
    }
  if (max_gb > 0) {  // least recently used first, across every model
    std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.used < b.used; });
    int64_t total = 0;
    for (const auto& f : kept) total += f.bytes;
    const auto bound = static_cast<int64_t>(max_gb * 1e9);
    size_t i = 0;
    for (; i < kept.size() && total > bound; ++i) {
      total -= kept[i].bytes;
      drop(kept[i].path, kept[i].bytes, over);
    }
    kept.erase(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(i));
  }
  int64_t left = 0;
  for (const auto& f : kept) left += f.bytes;
  std::printf("removed %lld unreadable, %lld foreign, %lld abandoned partial and %lld least recently used files (%s); "
              "%zu files (%s) remain in %s\n",
              static_cast<long long>(unreadable), static_cast<long long>(foreign), static_cast<long long>(temps),
              static_cast<long long>(over), registry::human_bytes(freed).c_str(), kept.size(),
              registry::human_bytes(left).c_str(), root.c_str());
  return 0;
}

}  // namespace

void register_cache(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto files = std::make_shared<bool>(false);
  auto all = std::make_shared<bool>(false);
  auto targets = std::make_shared<std::vector<std::string>>();
  auto max_gb = std::make_shared<double>(0);
  auto root = [dir] { return fs::path(dir->empty() ? default_prompt_cache_dir() : *dir); };
  CLI::App* cache = app.add_subcommand("cache", "the prompt cache on disk (`ingot serve`): ls, rm, gc");
  cache->require_subcommand(1);
  cache->fallthrough();  // --cache-dir after the sub-verb too
  cache->add_option("--cache-dir", *dir, "the cache folder (default: $XDG_CACHE_HOME/ingot/prompt-cache)");
  CLI::App* ls = add_verb(*cache, "ls", "cached prompts per model: files, size, last use", [=] { return run_ls(root(), *files); });
  ls->add_flag("--files", *files, "list every snapshot file too");
  CLI::App* rm = add_verb(*cache, "rm", "delete a model's cached prompts", [=] { return run_rm(root(), *targets, *all); });
  rm->add_option("models", *targets, "a model's ID (see `ingot cache ls`) or part of its name");
  rm->add_flag("--all", *all, "delete every model's cached prompts");
  CLI::App* gc = add_verb(*cache, "gc", "delete unreadable, foreign and abandoned files; bound the total size",
                          [=] { return run_gc(root(), *max_gb); });
  gc->add_option("--max-gb", *max_gb, "then delete least recently used files until all models' total fits (0: no bound)")
      ->capture_default_str();
}

}  // namespace ingot::cli
