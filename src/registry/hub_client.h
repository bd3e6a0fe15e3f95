// The hub's HTTP API over libcurl: a revision's commit and file list, one
// file's metadata (etag, size, commit) and ranged downloads that follow the
// CDN redirect. Errors a user can cause become one-line ingot::Errors.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "registry/cache_layout.h"

namespace ingot::registry {

struct HubConfig {
  std::string endpoint = "https://huggingface.co";  // no trailing '/'
  std::string token;                                // sent as "Authorization: Bearer"
  fs::path cache_dir;
  // HF_ENDPOINT, HF_TOKEN (else $HF_TOKEN_PATH or $HF_HOME/token), hub_cache_dir().
  static HubConfig from_env();
};

struct RevisionInfo {
  std::string commit;
  std::vector<std::string> files;
};
// GET {endpoint}/api/models/{repo}/revision/{revision}.
RevisionInfo fetch_revision(const HubConfig& hub, const RepoRef& ref);

struct FileMeta {
  std::string etag;    // normalised (no quotes, no W/)
  std::string commit;  // X-Repo-Commit, may be empty
  int64_t size = -1;   // X-Linked-Size or Content-Length; -1 when unknown
};
std::string resolve_url(const HubConfig& hub, const std::string& repo_id, const std::string& commit,
                        const std::string& file);
// HEAD of the resolve URL without following the CDN redirect (the hub's own
// headers carry the LFS etag and size).
FileMeta head_file(const HubConfig& hub, const std::string& repo_id, const std::string& commit, const std::string& file);

struct TransferResult {
  bool ok = false;
  bool retryable = false;  // network trouble: resuming may help; disk errors are not retryable
  std::string error;
};
// Appends the bytes of `url` from `offset` on to the file at `path` (created
// if missing). A server that ignores the Range restarts the file from 0.
// `on_bytes(delta)` reports growth (negative on a restart); `cancel` aborts.
TransferResult fetch_to_file(const HubConfig& hub, const std::string& url, const fs::path& path, int64_t offset,
                             const std::function<void(int64_t)>& on_bytes, const std::atomic<bool>& cancel);

}  // namespace ingot::registry
