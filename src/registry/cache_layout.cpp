#include "registry/cache_layout.h"

#include <fnmatch.h>

#include <cstdlib>

#include "util/error.h"

namespace ingot::registry {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool is_hex(const std::string& s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
  return true;
}

// The hub's rule for each half of a repo id: letters, digits, '-', '_', '.';
// no leading '-'/'.', no "--" or "..".
bool valid_name_part(const std::string& s) {
  if (s.empty() || s.size() > 96) return false;
  if (s.front() == '-' || s.front() == '.' || s.back() == '-' || s.back() == '.') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return s.find("--") == std::string::npos && s.find("..") == std::string::npos;
}

bool valid_revision(const std::string& r) {
  if (r.empty() || r.size() > 255 || r.front() == '/' || r.back() == '/') return false;
  if (r.find("..") != std::string::npos || r.find("//") != std::string::npos) return false;
  for (char c : r)
    if (std::isspace(static_cast<unsigned char>(c)) || c == '\\' || c == '~' || c == '^' || c == ':' || c == '?' ||
        c == '*' || c == '[')
      return false;
  return true;
}

}  // namespace

fs::path hub_cache_dir() {
  if (std::string v = env("HF_HUB_CACHE"); !v.empty()) return v;
  if (std::string v = env("HF_HOME"); !v.empty()) return fs::path(v) / "hub";
  if (std::string v = env("XDG_CACHE_HOME"); !v.empty()) return fs::path(v) / "huggingface" / "hub";
  std::string home = env("HOME");
  return fs::path(home.empty() ? "/" : home) / ".cache" / "huggingface" / "hub";
}

std::optional<RepoRef> parse_repo_ref(const std::string& text) {
  RepoRef r;
  std::string id = text;
  if (size_t at = text.find('@'); at != std::string::npos) {
    id = text.substr(0, at);
    r.revision = text.substr(at + 1);
    r.revision_given = true;
    if (!valid_revision(r.revision)) return std::nullopt;
  } else {
    r.revision = "main";
  }
  size_t slash = id.find('/');
  if (slash == std::string::npos || id.find('/', slash + 1) != std::string::npos) return std::nullopt;
  if (!valid_name_part(id.substr(0, slash)) || !valid_name_part(id.substr(slash + 1))) return std::nullopt;
  r.repo_id = id;
  return r;
}

RepoRef parse_repo_ref_or_fail(const std::string& text) {
  auto r = parse_repo_ref(text);
  if (!r) {
    if (size_t at = text.find('@'); at != std::string::npos && parse_repo_ref(text.substr(0, at)))
      fail(ErrorKind::InvalidArgument, "bad revision '", text.substr(at + 1), "' in '", text,
           "' (a branch, tag or commit id)");
    fail(ErrorKind::InvalidArgument, "'", text, "' is not a repository id; expected ORG/NAME or ORG/NAME@REVISION");
  }
  return *r;
}

std::string repo_folder_name(const std::string& repo_id) {
  std::string out = "models";
  for (const std::string& part : {repo_id.substr(0, repo_id.find('/')), repo_id.substr(repo_id.find('/') + 1)})
    out += "--" + part;
  return out;
}

std::optional<std::string> repo_id_from_folder(const std::string& folder) {
  const std::string prefix = "models--";
  if (folder.rfind(prefix, 0) != 0) return std::nullopt;
  std::string rest = folder.substr(prefix.size());
  size_t sep = rest.find("--");
  if (sep == std::string::npos) return std::nullopt;
  std::string id = rest.substr(0, sep) + "/" + rest.substr(sep + 2);
  if (!parse_repo_ref(id)) return std::nullopt;
  return id;
}

std::optional<std::string> repo_id_of_snapshot_path(const fs::path& path) {
  // Lexical only: the path as given, whether or not its links resolve.
  std::vector<std::string> parts;
  for (const auto& part : path.lexically_normal()) parts.push_back(part.string());
  for (size_t i = 0; i + 2 < parts.size(); ++i)
    if (parts[i + 1] == "snapshots" && is_commit_hash(parts[i + 2]))
      if (auto id = repo_id_from_folder(parts[i])) return id;
  return std::nullopt;
}

std::string model_name_for_path(const fs::path& path) {
  if (auto id = repo_id_of_snapshot_path(path)) return *id;
  fs::path p = path.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "dir/" names the folder
  std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..") name = fs::absolute(path).lexically_normal().filename().string();
  if (is_gguf_file(name)) name.resize(name.size() - 5);
  return name.empty() ? "model" : name;
}

RepoPaths repo_paths(const fs::path& cache_dir, const std::string& repo_id) {
  return RepoPaths{cache_dir / repo_folder_name(repo_id)};
}

std::string blob_link_target(const std::string& file, const std::string& etag) {
  std::string up = "../../";
  for (char c : file)
    if (c == '/') up += "../";
  return up + "blobs/" + etag;
}

bool is_safe_repo_file(const std::string& file) {
  if (file.empty() || file.front() == '/' || file.back() == '/') return false;
  size_t start = 0;
  while (start <= file.size()) {
    size_t end = file.find('/', start);
    if (end == std::string::npos) end = file.size();
    std::string part = file.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return file.find('\0') == std::string::npos && file.find('\\') == std::string::npos;
}

bool is_commit_hash(const std::string& s) { return is_hex(s, 40); }

std::string normalize_etag(const std::string& v) {
  std::string s = v;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(0, 1);
  if (s.rfind("W/", 0) == 0) s = s.substr(2);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

EtagKind classify_etag(const std::string& etag) {
  if (is_hex(etag, 64)) return EtagKind::Sha256;
  if (is_hex(etag, 40)) return EtagKind::GitSha1;
  return EtagKind::Opaque;
}

bool matches_pattern(const std::string& file, const std::string& pattern) {
  std::string p = pattern;
  if (!p.empty() && p.back() == '/') p += "*";
  return fnmatch(p.c_str(), file.c_str(), 0) == 0;
}

bool matches_any(const std::string& file, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns)
    if (matches_pattern(file, p)) return true;
  return false;
}

bool is_safetensors_file(const std::string& file) { return file.ends_with(".safetensors"); }
bool is_gguf_file(const std::string& file) { return file.ends_with(".gguf"); }

bool is_foreign_weight_file(const std::string& file) {
  for (const char* ext : {".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx", ".onnx_data", ".ot", ".tflite",
                          ".mlmodel", ".npz"})
    if (file.ends_with(ext)) return true;
  return false;
}

std::vector<std::string> select_files(const std::string& repo_id, const std::vector<std::string>& siblings,
                                      const Selection& sel) {
  std::vector<std::string> gguf;
  bool has_safetensors = false;
  for (const auto& f : siblings) {
    if (is_gguf_file(f)) gguf.push_back(f);
    if (is_safetensors_file(f)) has_safetensors = true;
  }
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 12; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > 12) s += ", ...";
    return s;
  };
  if (!has_safetensors && gguf.empty())
    fail(ErrorKind::Unsupported, repo_id, " has no weights ingot can load (safetensors or GGUF); its files: ",
         siblings.empty() ? std::string("none") : list(siblings));
  std::vector<std::string> out;
  if (!sel.gguf_file.empty()) {
    if (!is_gguf_file(sel.gguf_file)) fail(ErrorKind::InvalidArgument, "--file must name a .gguf file, got '", sel.gguf_file, "'");
    bool found = false;
    for (const auto& g : gguf) found = found || g == sel.gguf_file;
    if (!found)
      fail(ErrorKind::NotFound, repo_id, " has no file '", sel.gguf_file, "'",
           gguf.empty() ? std::string(" (it has no GGUF files)") : ("; its GGUF files: " + list(gguf)));
    out.push_back(sel.gguf_file);
  }
  for (const auto& f : siblings) {
    bool take;
    if (!sel.include.empty()) take = matches_any(f, sel.include);
    else if (!sel.gguf_file.empty()) take = false;  // --file alone: just that file
    else if (is_foreign_weight_file(f)) take = false;
    else if (is_gguf_file(f)) take = !has_safetensors;
    else take = true;
    if (take && !matches_any(f, sel.exclude) && f != sel.gguf_file) out.push_back(f);
  }
  if (sel.include.empty() && sel.gguf_file.empty() && !has_safetensors && gguf.size() > 1)
    fail(ErrorKind::InvalidArgument, repo_id, " has ", gguf.size(), " GGUF files; choose one with --file: ", list(gguf));
  if (out.empty()) fail(ErrorKind::InvalidArgument, "no file of ", repo_id, " matches the --include/--exclude patterns");
  for (const auto& f : out)
    if (!is_safe_repo_file(f)) fail(ErrorKind::BadFormat, repo_id, " lists an unsafe file name '", f, "'");
  return out;
}

}  // namespace ingot::registry
