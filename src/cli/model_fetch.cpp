#include "cli/model_fetch.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>

#include "cli/model_setup.h"
#include "registry/download.h"
#include "registry/local_models.h"
#include "registry/progress.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::cli {

std::string fetch_model(const std::string& repo, const FetchOptions& options) {
  // A file-size limit must surface as a write error (EFBIG), not kill the process.
  std::signal(SIGXFSZ, SIG_IGN);
  registry::RepoRef ref = registry::parse_repo_ref_or_fail(repo);
  registry::HubConfig hub = registry::HubConfig::from_env();
  registry::GetOptions opt;
  opt.selection.include = options.include;
  opt.selection.exclude = options.exclude;
  opt.selection.gguf_file = options.gguf_file;
  opt.jobs = options.jobs;
  opt.terminal = isatty(STDERR_FILENO) != 0;
  registry::GetResult r = registry::get_repo(hub, ref, opt, stderr);
  std::fprintf(stderr, "%s: %zu files, %s fetched, %s in the snapshot\n", r.repo_id.c_str(), r.files.size(),
               registry::human_bytes(r.bytes_fetched).c_str(), registry::human_bytes(r.bytes_total).c_str());
  std::string path = r.snapshot.string();
  for (const auto& m : registry::list_cached_models(hub.cache_dir))
    if (m.commit == r.commit && m.repo_id == r.repo_id) {
      path = m.path.string();
      if (!m.gguf) break;
      if (!options.gguf_file.empty() && m.path.filename() == options.gguf_file) break;
    }
  return path;
}

std::string resolve_or_fetch_model(const std::string& arg, const std::string& gguf_file) {
  if (arg.empty()) fail(ErrorKind::InvalidArgument, "give a model: a path, a repo id or part of a local model's name");
  const auto ref = registry::parse_repo_ref(arg);
  if (!gguf_file.empty() && !ref) fail(ErrorKind::InvalidArgument, "--file needs a repo id (ORG/NAME), got '", arg, "'");
  if (!ref || registry::is_explicit_path(arg) || is_directory(arg) || file_exists(arg)) return resolve_model_arg(arg);
  // A repo id: the exact cached model, else a download, as `ollama run` does.
  const std::string exact = gguf_file.empty() ? arg : arg + "/" + gguf_file;
  for (const auto& m : registry::list_local_models(registry::hub_cache_dir(), registry::env_models_dirs())) {
    if (m.name == exact) return m.path.string();
    for (const auto& a : m.aliases)
      if (a == exact) return m.path.string();
  }
  FetchOptions opt;
  opt.gguf_file = gguf_file;
  try {
    return fetch_model(arg, opt);
  } catch (const Error& e) {
    // Offline, or the text was part of a local name shaped like a repo id.
    if (gguf_file.empty()) {
      try {
        return resolve_model_arg(arg);
      } catch (const Error&) {
      }
    }
    fail(e.kind(), exact, " is not on this machine and could not be downloaded: ", e.what());
  }
}

}  // namespace ingot::cli
