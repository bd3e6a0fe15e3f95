// Getting a model onto this machine by its hub name: `ingot get`, and
// `ingot run`, which downloads a repo id that is not in the cache yet.
#pragma once
#include <string>
#include <vector>

namespace ingot::cli {

struct FetchOptions {
  std::vector<std::string> include, exclude;
  std::string gguf_file;  // one GGUF file of the repository
  int jobs = 4;
};

// Downloads ORG/NAME[@REVISION] into the hub cache (progress on stderr, a bar
// on a terminal, then a summary line) and returns the path a loader opens:
// the snapshot, or its one GGUF file.
std::string fetch_model(const std::string& repo, const FetchOptions& options);

// What --model resolves to on this machine (a path, an exact cached name, a
// unique part of a name); a repo id with no exact local match is downloaded
// first. `gguf_file` picks one file of a GGUF repository.
std::string resolve_or_fetch_model(const std::string& arg, const std::string& gguf_file);

}  // namespace ingot::cli
