// `ingot get ORG/NAME[@revision]`: downloads a hub repository into the
// Hugging Face cache (see docs/registry.md).
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include "cli/verbs.h"
#include "registry/download.h"
#include "registry/local_models.h"
#include "registry/progress.h"

namespace ingot::cli {

namespace {

struct GetFlags {
  std::string repo;
  std::vector<std::string> include, exclude;
  std::string file;
  int jobs = 4;
};

int run_get(const GetFlags& f) {
  // A file-size limit must surface as a write error (EFBIG), not kill the process.
  std::signal(SIGXFSZ, SIG_IGN);
  registry::RepoRef ref = registry::parse_repo_ref_or_fail(f.repo);
  registry::HubConfig hub = registry::HubConfig::from_env();
  registry::GetOptions opt;
  opt.selection.include = f.include;
  opt.selection.exclude = f.exclude;
  opt.selection.gguf_file = f.file;
  opt.jobs = f.jobs;
  opt.terminal = isatty(STDERR_FILENO) != 0;
  registry::GetResult r = registry::get_repo(hub, ref, opt, stderr);
  std::fprintf(stderr, "%s: %zu files, %s fetched, %s in the snapshot\n", r.repo_id.c_str(), r.files.size(),
               registry::human_bytes(r.bytes_fetched).c_str(), registry::human_bytes(r.bytes_total).c_str());
  // The path a loader opens: the snapshot, or its one GGUF file.
  std::string path = r.snapshot.string();
  for (const auto& m : registry::list_cached_models(hub.cache_dir))
    if (m.commit == r.commit && m.repo_id == r.repo_id) {
      path = m.path.string();
      if (!m.gguf) break;
    }
  std::printf("%s\n", path.c_str());
  return 0;
}

}  // namespace

void register_get(CLI::App& app) {
  auto f = std::make_shared<GetFlags>();
  CLI::App* sub = add_verb(app, "get", "download a Hugging Face repository into the local cache",
                           [f] { return run_get(*f); });
  sub->add_option("repo", f->repo, "ORG/NAME or ORG/NAME@REVISION")->required();
  sub->add_option("--include", f->include, "only files matching this glob (repeatable)");
  sub->add_option("--exclude", f->exclude, "skip files matching this glob (repeatable)");
  sub->add_option("--file", f->file, "download this one GGUF file of the repository");
  sub->add_option("--jobs,-j", f->jobs, "parallel file downloads")->capture_default_str();
}

}  // namespace ingot::cli
