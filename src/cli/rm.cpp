// `ingot rm ORG/NAME[@revision]`: gives a repository's disk back.
#include <cstdio>

#include "cli/verbs.h"
#include "registry/local_models.h"

namespace ingot::cli {

void register_rm(CLI::App& app) {
  auto repo = std::make_shared<std::string>();
  CLI::App* sub = add_verb(app, "rm", "remove a repository (or one of its refs) from the local cache", [repo] {
    std::printf("%s\n", registry::describe(registry::remove_model(registry::hub_cache_dir(), *repo)).c_str());
    return 0;
  });
  sub->add_option("repo", *repo, "ORG/NAME, or ORG/NAME@REVISION to drop one ref")->required();
}

}  // namespace ingot::cli
