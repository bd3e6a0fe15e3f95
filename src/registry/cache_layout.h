// The Hugging Face hub cache layout, as huggingface_hub writes and reads it:
//   <cache>/models--ORG--NAME/blobs/<etag>            file contents, named by etag
//   <cache>/models--ORG--NAME/snapshots/<commit>/<f>  relative symlinks into blobs/
//   <cache>/models--ORG--NAME/refs/<revision>         the commit a branch or tag points to
// Pure functions only: paths, names, patterns, etags (no I/O beyond the environment).
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ingot::registry {

namespace fs = std::filesystem;

// $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
fs::path hub_cache_dir();

struct RepoRef {
  std::string repo_id;   // "ORG/NAME"
  std::string revision;  // "main" unless given after '@'
  bool revision_given = false;
};
// Parses "ORG/NAME[@revision]"; nullopt when the text is not shaped like a repo id.
std::optional<RepoRef> parse_repo_ref(const std::string& text);
// Like parse_repo_ref, but throws InvalidArgument explaining the expected form.
RepoRef parse_repo_ref_or_fail(const std::string& text);

// "ORG/NAME" -> "models--ORG--NAME" and back (nullopt for other folder names).
std::string repo_folder_name(const std::string& repo_id);
std::optional<std::string> repo_id_from_folder(const std::string& folder);
// The repo id of a path inside a hub cache snapshot
// (.../models--ORG--NAME/snapshots/<commit>[/file]); nullopt for any other path.
std::optional<std::string> repo_id_of_snapshot_path(const fs::path& path);
// The name a model at `path` goes by (the served model id): its repo id inside
// the hub cache, else the file name without ".gguf", or the folder name.
std::string model_name_for_path(const fs::path& path);

struct RepoPaths {
  fs::path root;
  fs::path blobs() const { return root / "blobs"; }
  fs::path snapshots() const { return root / "snapshots"; }
  fs::path refs() const { return root / "refs"; }
  fs::path blob(const std::string& etag) const { return blobs() / etag; }
  fs::path incomplete(const std::string& etag) const { return blobs() / (etag + ".incomplete"); }
  fs::path snapshot(const std::string& commit) const { return snapshots() / commit; }
  fs::path snapshot_file(const std::string& commit, const std::string& file) const { return snapshot(commit) / file; }
  fs::path ref(const std::string& revision) const { return refs() / revision; }
};
RepoPaths repo_paths(const fs::path& cache_dir, const std::string& repo_id);

// The relative symlink target from snapshots/<commit>/<file> to blobs/<etag>
// ("../../blobs/<etag>", one more "../" per folder level inside `file`).
std::string blob_link_target(const std::string& file, const std::string& etag);

// A repo file name is safe to place under a snapshot: relative, no "..", no empty parts.
bool is_safe_repo_file(const std::string& file);

// A 40-hex-digit git commit id.
bool is_commit_hash(const std::string& s);

// ETag headers: strip a weak "W/" prefix and quotes.
std::string normalize_etag(const std::string& header_value);
enum class EtagKind { Sha256, GitSha1, Opaque };
// 64 hex digits: sha256 of the content (LFS files); 40 hex: git blob sha1; else unverifiable.
EtagKind classify_etag(const std::string& etag);

// fnmatch-style glob as huggingface_hub applies it: '*' also matches '/', and a
// pattern ending in '/' means everything under that folder.
bool matches_pattern(const std::string& file, const std::string& pattern);
bool matches_any(const std::string& file, const std::vector<std::string>& patterns);

// Weight formats ingot loads.
bool is_safetensors_file(const std::string& file);
bool is_gguf_file(const std::string& file);
// Checkpoint formats ingot does not load (PyTorch pickles, TF, Flax, ONNX ...).
bool is_foreign_weight_file(const std::string& file);

struct Selection {
  std::vector<std::string> include, exclude;
  std::string gguf_file;  // --file: exactly this GGUF file (plus nothing else)
};
// Which of a repo's files `ingot get` downloads. Default: everything but other
// weight formats (GGUF files are skipped when safetensors exist; a repo of
// several GGUF files needs --file). --include replaces the default choice;
// --exclude always applies. Throws Unsupported / InvalidArgument / NotFound
// with a message that names the repo and the choices.
std::vector<std::string> select_files(const std::string& repo_id, const std::vector<std::string>& siblings,
                                      const Selection& sel);

}  // namespace ingot::registry
