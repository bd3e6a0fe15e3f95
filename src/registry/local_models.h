// Models already on this machine: finished downloads in the hub cache (a ref
// points at their snapshot) and checkpoints under models directories. Turns
// the name a user types (path, repo id, or a unique part of a name) into a
// path the loader opens, and reclaims disk (rm, gc).
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "registry/cache_layout.h"

namespace ingot::registry {

struct LocalModel {
  std::string name;                  // "org/name", "org/name@v1", "org/name/file.gguf", or a path under a models dir
  std::vector<std::string> aliases;  // other exact names (a repo id for its only GGUF file)
  fs::path path;                     // checkpoint directory or .gguf file
  std::string repo_id, commit;       // hub cache entries only
  bool gguf = false;
};

// $INGOT_MODELS_DIR, colon-separated.
std::vector<fs::path> env_models_dirs();
std::vector<LocalModel> list_cached_models(const fs::path& cache_dir);
std::vector<LocalModel> list_dir_models(const fs::path& models_dir);
// Hub cache plus each models dir, in that order.
std::vector<LocalModel> list_local_models(const fs::path& cache_dir, const std::vector<fs::path>& models_dirs);

// An existing path as is; else an exact name or alias; else the one model
// whose name contains `arg` (case-insensitive). No match: NotFound;
// several: InvalidArgument listing them.
std::string resolve_model(const std::string& arg, const std::vector<LocalModel>& models);
// Against the hub cache and $INGOT_MODELS_DIR. Text spelled as a path
// ("/...", "./...", "../...") is returned unchanged.
bool is_explicit_path(const std::string& arg);
std::string resolve_model(const std::string& arg);

struct Reclaimed {
  int64_t bytes = 0;
  int blobs = 0, incomplete = 0, snapshots = 0, repos = 0;
};
// Deletes a whole repo (`ORG/NAME`) or one ref of it (`ORG/NAME@rev`, then
// the repo's garbage). NotFound when absent from the cache.
Reclaimed remove_model(const fs::path& cache_dir, const std::string& arg);
// Snapshots no ref points to, blobs no snapshot links, .incomplete files
// untouched for `incomplete_age`, and repos left empty.
Reclaimed collect_garbage(const fs::path& cache_dir, std::chrono::seconds incomplete_age);
Reclaimed collect_repo_garbage(const fs::path& repo_root, std::chrono::seconds incomplete_age);
// "freed 1.2 GB (1234567890 bytes): 3 blobs, 1 partial download, 1 snapshot, 0 repos"
std::string describe(const Reclaimed& r);

// Bytes of the distinct blobs a snapshot links to (what the model takes on disk).
int64_t snapshot_bytes(const fs::path& snapshot_or_file);

}  // namespace ingot::registry
