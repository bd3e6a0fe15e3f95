// `ingot get ORG/NAME[@revision]`: downloads a hub repository into the
// Hugging Face cache (see docs/registry.md).
#include <cstdio>

#include "cli/model_fetch.h"
#include "cli/verbs.h"

namespace ingot::cli {

namespace {

struct GetFlags {
  std::string repo;
  FetchOptions fetch;
};

int run_get(const GetFlags& f) {
  std::printf("%s\n", fetch_model(f.repo, f.fetch).c_str());
  return 0;
}

}  // namespace

void register_get(CLI::App& app) {
  auto f = std::make_shared<GetFlags>();
  CLI::App* sub = add_verb(app, "get", "download a Hugging Face repository into the local cache",
                           [f] { return run_get(*f); });
  sub->add_option("repo", f->repo, "ORG/NAME or ORG/NAME@REVISION")->required();
  sub->add_option("--include", f->fetch.include, "only files matching this glob (repeatable)");
  sub->add_option("--exclude", f->fetch.exclude, "skip files matching this glob (repeatable)");
  sub->add_option("--file", f->fetch.gguf_file, "download this one GGUF file of the repository");
  sub->add_option("--jobs,-j", f->fetch.jobs, "parallel file downloads")->capture_default_str();
}

}  // namespace ingot::cli
