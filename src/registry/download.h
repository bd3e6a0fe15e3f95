// `ingot get`: a repository revision into the hub cache. Files download in
// parallel to blobs/<etag>.incomplete, resume with HTTP Range, are checked
// against their etag (sha256 for LFS files, git blob sha1 otherwise) and only
// then renamed to blobs/<etag> and linked from snapshots/<commit>/. The ref
// is written last, so a repo id resolves only to a finished download.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "registry/cache_layout.h"
#include "registry/hub_client.h"

namespace ingot::registry {

struct GetOptions {
  Selection selection;
  int jobs = 4;
  int attempts = 4;  // per file: network failures resume this many times before giving up
  bool terminal = false;  // draw the in-place progress bar
};

struct GetResult {
  std::string repo_id, commit;
  fs::path snapshot;
  std::vector<std::string> files;
  int64_t bytes_fetched = 0;  // over the network in this run
  int64_t bytes_total = 0;
};

GetResult get_repo(const HubConfig& hub, const RepoRef& ref, const GetOptions& opt, std::FILE* log);

// Creates (or replaces) snapshots/<commit>/<file> as a relative link to blobs/<etag>.
void link_snapshot_file(const RepoPaths& paths, const std::string& commit, const std::string& file,
                        const std::string& etag);
// Writes refs/<revision> = commit atomically (no newline, as huggingface_hub reads it).
void write_ref(const RepoPaths& paths, const std::string& revision, const std::string& commit);

}  // namespace ingot::registry
