#include "registry/local_models.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "registry/progress.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::registry {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string read_ref(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return std::string(trim(ss.str()));
}

// refs/<name> -> commit, names relative to refs/ ("main", "refs/pr/1").
std::map<std::string, std::string> read_refs(const fs::path& refs_dir) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  if (!fs::is_directory(refs_dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(refs_dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    const std::string name = it->path().lexically_relative(refs_dir).string();
    if (name.ends_with(".tmp") || name.find(".tmp.") != std::string::npos) continue;  // a ref being written
    out[name] = read_ref(it->path());
  }
  return out;
}

bool has_safetensors(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (is_safetensors_file(e.path().filename().string())) return true;
  return false;
}

std::vector<std::string> gguf_files_under(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (is_gguf_file(it->path().filename().string()) && fs::is_regular_file(it->path()))
      out.push_back(it->path().lexically_relative(dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

void add_or_alias(std::vector<LocalModel>& out, LocalModel m) {
  for (auto& have : out)
    if (have.path == m.path) {
      have.aliases.push_back(m.name);
      for (auto& a : m.aliases) have.aliases.push_back(a);
      return;
    }
  out.push_back(std::move(m));
}

int64_t regular_bytes_under(const fs::path& root, int* files = nullptr) {
  int64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_symlink() || !it->is_regular_file()) continue;
    total += static_cast<int64_t>(it->file_size());
    if (files) ++*files;
  }
  return total;
}

std::vector<std::string> names_of(const std::vector<const LocalModel*>& ms) {
  std::vector<std::string> v;
  for (auto* m : ms) v.push_back(m->name);
  return v;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// One entry per distinct path.
std::vector<const LocalModel*> unique_paths(const std::vector<const LocalModel*>& ms) {
  std::vector<const LocalModel*> out;
  for (auto* m : ms)
    if (std::none_of(out.begin(), out.end(), [&](const LocalModel* o) { return o->path == m->path; })) out.push_back(m);
  return out;
}

std::string resolve_in(const std::string& arg, const std::vector<LocalModel>& models, const std::string& where) {
  if (arg.empty()) return arg;
  std::error_code ec;
  if (fs::exists(arg, ec)) return arg;
  std::vector<const LocalModel*> exact, partial;
  const std::string needle = lower(arg);
  for (const auto& m : models) {
    bool is_exact = m.name == arg, is_partial = lower(m.name).find(needle) != std::string::npos;
    for (const auto& a : m.aliases) {
      is_exact = is_exact || a == arg;
      is_partial = is_partial || lower(a).find(needle) != std::string::npos;
    }
    if (is_exact) exact.push_back(&m);
    if (is_partial) partial.push_back(&m);
  }
  exact = unique_paths(exact);
  partial = unique_paths(partial);
  for (const auto* set : {&exact, &partial}) {
    if (set->size() == 1) return (*set)[0]->path.string();
    if (set->size() > 1)
      fail(ErrorKind::InvalidArgument, "'", arg, "' matches ", set->size(), " local models: ", join(names_of(*set)),
           "; give a longer part of the name or a path");
  }
  if (auto ref = parse_repo_ref(arg))
    fail(ErrorKind::NotFound, "model '", arg, "' is not a path and not in the hub cache (", where,
         "); download it with `ingot get ", arg, "`");
  fail(ErrorKind::NotFound, "model not found: '", arg, "' is not a path, and no local model name contains it (",
       models.size(), " local models; see `ingot ls`)");
}

}  // namespace

std::vector<fs::path> env_models_dirs() {
  std::vector<fs::path> out;
  if (const char* v = std::getenv("INGOT_MODELS_DIR"))
    for (const auto& p : split(v, ':'))
      if (!p.empty()) out.emplace_back(p);
  return out;
}

std::vector<LocalModel> list_cached_models(const fs::path& cache_dir) {
  std::vector<LocalModel> out;
  std::error_code ec;
  if (!fs::is_directory(cache_dir, ec)) return out;
  std::vector<fs::path> repos;
  for (const auto& e : fs::directory_iterator(cache_dir, ec))
    if (e.is_directory() && repo_id_from_folder(e.path().filename().string())) repos.push_back(e.path());
  std::sort(repos.begin(), repos.end());
  for (const auto& root : repos) {
    const std::string repo_id = *repo_id_from_folder(root.filename().string());
    auto refs = read_refs(root / "refs");
    std::vector<std::pair<std::string, std::string>> ordered(refs.begin(), refs.end());
    std::stable_partition(ordered.begin(), ordered.end(), [](const auto& r) { return r.first == "main"; });
    for (const auto& [ref, commit] : ordered) {
      const fs::path snap = root / "snapshots" / commit;
      if (commit.empty() || !fs::is_directory(snap, ec)) continue;
      const std::string base = repo_id + (ref == "main" ? "" : "@" + ref);
      const bool st = has_safetensors(snap) && fs::exists(snap / "config.json", ec);
      if (st) add_or_alias(out, LocalModel{base, {}, snap, repo_id, commit, false});
      auto ggufs = gguf_files_under(snap);
      for (const auto& g : ggufs) {
        LocalModel m{base + "/" + g, {}, snap / g, repo_id, commit, true};
        if (!st && ggufs.size() == 1) m.aliases.push_back(base);
        add_or_alias(out, std::move(m));
      }
    }
  }
  return out;
}

std::vector<LocalModel> list_dir_models(const fs::path& dir) {
  std::vector<LocalModel> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(ErrorKind::NotFound, "models directory not found: ", dir.string());
  auto consider = [&](const fs::path& p, const std::string& name) {
    if (fs::is_directory(p, ec) && fs::exists(p / "config.json", ec) && has_safetensors(p))
      out.push_back(LocalModel{name, {}, p, "", "", false});
    else if (is_gguf_file(p.filename().string()) && fs::is_regular_file(p, ec))
      out.push_back(LocalModel{name, {}, p, "", "", true});
  };
  consider(dir, dir.filename().string());
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() >= 1) it.disable_recursion_pending();  // two levels: DIR/x and DIR/x/y
    consider(it->path(), it->path().lexically_relative(dir).string());
  }
  std::sort(out.begin(), out.end(), [](const LocalModel& a, const LocalModel& b) { return a.name < b.name; });
  return out;
}

std::vector<LocalModel> list_local_models(const fs::path& cache_dir, const std::vector<fs::path>& models_dirs) {
  std::vector<LocalModel> out = list_cached_models(cache_dir);
  for (const auto& d : models_dirs)
    for (auto& m : list_dir_models(d)) out.push_back(std::move(m));
  return out;
}

std::string resolve_model(const std::string& arg, const std::vector<LocalModel>& models) {
  return resolve_in(arg, models, hub_cache_dir().string());
}

bool is_explicit_path(const std::string& arg) {
  return arg.starts_with("/") || arg.starts_with("./") || arg.starts_with("../") || arg == "." || arg == "..";
}

std::string resolve_model(const std::string& arg) {
  std::error_code ec;
  // A path (existing, or spelled as one: the loader says what is missing): no scan.
  if (arg.empty() || is_explicit_path(arg) || fs::exists(arg, ec)) return arg;
  return resolve_in(arg, list_local_models(hub_cache_dir(), env_models_dirs()), hub_cache_dir().string());
}

Reclaimed collect_repo_garbage(const fs::path& root, std::chrono::seconds incomplete_age) {
  Reclaimed r;
  std::error_code ec;
  std::set<std::string> commits;
  for (const auto& [name, commit] : read_refs(root / "refs")) commits.insert(commit);
  std::set<std::string> linked;
  if (fs::is_directory(root / "snapshots", ec)) {
    for (const auto& snap : fs::directory_iterator(root / "snapshots", ec)) {
      if (!commits.count(snap.path().filename().string())) {
        fs::remove_all(snap.path(), ec);
        ++r.snapshots;
        continue;
      }
      for (auto it = fs::recursive_directory_iterator(snap.path(), ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_symlink()) linked.insert(fs::read_symlink(it->path(), ec).filename().string());
    }
  }
  const auto now = fs::file_time_type::clock::now();
  if (fs::is_directory(root / "blobs", ec)) {
    for (const auto& b : fs::directory_iterator(root / "blobs", ec)) {
      if (!b.is_regular_file()) continue;
      const std::string name = b.path().filename().string();
      const int64_t size = static_cast<int64_t>(b.file_size());
      if (name.ends_with(".incomplete")) {
        if (now - b.last_write_time() < incomplete_age) continue;
        ++r.incomplete;
      } else if (linked.count(name)) {
        continue;
      } else {
        ++r.blobs;
      }
      if (fs::remove(b.path(), ec)) r.bytes += size;
    }
  }
  const bool no_refs = commits.empty(), no_blobs = fs::is_empty(root / "blobs", ec) || !fs::exists(root / "blobs");
  const bool no_snaps = !fs::exists(root / "snapshots") || fs::is_empty(root / "snapshots", ec);
  if (no_refs && no_blobs && no_snaps) {
    fs::remove_all(root, ec);
    ++r.repos;
  }
  return r;
}

Reclaimed collect_garbage(const fs::path& cache_dir, std::chrono::seconds incomplete_age) {
  Reclaimed total;
  std::error_code ec;
  if (!fs::is_directory(cache_dir, ec)) return total;
  for (const auto& e : fs::directory_iterator(cache_dir, ec)) {
    if (!e.is_directory() || !repo_id_from_folder(e.path().filename().string())) continue;
    Reclaimed r = collect_repo_garbage(e.path(), incomplete_age);
    if (r.repos) fs::remove_all(cache_dir / ".locks" / e.path().filename(), ec);
    total.bytes += r.bytes;
    total.blobs += r.blobs;
    total.incomplete += r.incomplete;
    total.snapshots += r.snapshots;
    total.repos += r.repos;
  }
  return total;
}

Reclaimed remove_model(const fs::path& cache_dir, const std::string& arg) {
  RepoRef ref = parse_repo_ref_or_fail(arg);
  const RepoPaths paths = repo_paths(cache_dir, ref.repo_id);
  std::error_code ec;
  if (!fs::is_directory(paths.root, ec))
    fail(ErrorKind::NotFound, ref.repo_id, " is not in the hub cache (", cache_dir.string(), ")");
  if (ref.revision_given) {
    auto refs = read_refs(paths.refs());
    if (!refs.count(ref.revision)) {
      std::vector<std::string> names;
      for (const auto& [n, c] : refs) names.push_back(n);
      fail(ErrorKind::NotFound, ref.repo_id, " has no ref '", ref.revision, "' (refs: ",
           names.empty() ? std::string("none") : join(names), ")");
    }
    fs::remove(paths.ref(ref.revision), ec);
    return collect_repo_garbage(paths.root, std::chrono::hours(1));
  }
  Reclaimed r;
  r.bytes = regular_bytes_under(paths.root);
  regular_bytes_under(paths.blobs(), &r.blobs);
  fs::remove_all(paths.root, ec);
  if (ec) fail(ErrorKind::Io, "cannot remove ", paths.root.string(), ": ", ec.message());
  fs::remove_all(cache_dir / ".locks" / paths.root.filename(), ec);
  r.repos = 1;
  return r;
}

std::string describe(const Reclaimed& r) {
  auto n = [](int k, const char* what) { return str_cat(k, " ", what, k == 1 ? "" : "s"); };
  return str_cat("freed ", human_bytes(r.bytes), " (", r.bytes, " bytes): ", n(r.blobs, "blob"), ", ",
                 n(r.incomplete, "partial download"), ", ", n(r.snapshots, "snapshot"), ", ", n(r.repos, "repo"));
}

int64_t snapshot_bytes(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_directory(p, ec)) {
    auto s = fs::file_size(p, ec);
    return ec ? 0 : static_cast<int64_t>(s);
  }
  std::set<fs::path> seen;
  int64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!fs::is_regular_file(it->path(), ec)) continue;
    fs::path real = fs::weakly_canonical(it->path(), ec);
    if (!seen.insert(real).second) continue;
    total += static_cast<int64_t>(fs::file_size(real, ec));
  }
  return total;
}

}  // namespace ingot::registry
