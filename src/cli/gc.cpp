// `ingot gc`: deletes what no model in the hub cache uses (see docs/registry.md).
#include <cstdio>

#include "cli/verbs.h"
#include "registry/local_models.h"
#include "util/error.h"

namespace ingot::cli {

void register_gc(CLI::App& app) {
  auto age_minutes = std::make_shared<double>(60.0);
  CLI::App* sub = add_verb(app, "gc", "delete cache files no model uses", [age_minutes] {
    if (*age_minutes < 0) fail(ErrorKind::InvalidArgument, "--incomplete-age must be >= 0");
    std::printf("%s\n", registry::describe(registry::collect_garbage(
                              registry::hub_cache_dir(), std::chrono::seconds(static_cast<int64_t>(*age_minutes * 60))))
                              .c_str());
    return 0;
  });
  sub->add_option("--incomplete-age", *age_minutes,
                  "minutes since a partial download last grew before it counts as abandoned")
      ->capture_default_str();
}

}  // namespace ingot::cli
