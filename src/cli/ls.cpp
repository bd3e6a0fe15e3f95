// `ingot ls`: the models on this machine (hub cache, --models-dir folders and
// $INGOT_MODELS_DIR) with what they are and whether `ingot fit` says they fit.
#include <cstdio>

#include "cli/model_info.h"
#include "cli/table.h"
#include "cli/verbs.h"
#include "engine/memory.h"
#include "registry/local_models.h"
#include "registry/progress.h"
#include "util/error.h"

namespace ingot::cli {

namespace {

struct LsFlags {
  std::vector<std::string> models_dirs;
  int64_t ctx = 4096;
  std::string kv = "contiguous";
  bool paths = false;
};

std::string human_count(int64_t n) {
  char buf[32];
  if (n >= 1'000'000'000) std::snprintf(buf, sizeof buf, "%.1fB", n / 1e9);
  else if (n >= 1'000'000) std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
  else if (n >= 1'000) std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
  else std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  return buf;
}

int run_ls(const LsFlags& f) {
  if (f.ctx <= 0) fail(ErrorKind::InvalidArgument, "--ctx must be positive");
  std::vector<registry::fs::path> dirs = registry::env_models_dirs();
  for (const auto& d : f.models_dirs) dirs.emplace_back(d);
  const auto cache = registry::hub_cache_dir();
  auto models = registry::list_local_models(cache, dirs);
  if (models.empty()) {
    std::printf("no local models (hub cache: %s); download one with `ingot get ORG/NAME`\n", cache.c_str());
    return 0;
  }
  const int64_t avail = engine::machine_memory_bytes();
  std::vector<std::vector<std::string>> rows = {{"NAME", "SIZE", "ARCH", "PARAMS", "QUANT", "CTX", "FITS"}};
  if (f.paths) rows[0].push_back("PATH");
  for (const auto& m : models) {
    std::vector<std::string> row = {m.name, registry::human_bytes(registry::snapshot_bytes(m.path))};
    try {
      ModelSummary s = summarize_model(m.path.string());
      engine::FitQuery q;
      q.ctx = s.context_length > 0 ? std::min(f.ctx, s.context_length) : f.ctx;
      q.kv = f.kv;
      const int64_t need = predict_model_memory(m.path.string(), q).total();
      row.insert(row.end(), {s.architecture, human_count(s.parameters), s.quantization,
                             std::to_string(s.context_length),
                             str_cat(need <= avail ? "yes" : "no", " (", registry::human_bytes(need), " at ctx ",
                                     q.ctx, ")")});
    } catch (const Error& e) {
      // One unreadable checkpoint does not hide the others.
      row.insert(row.end(), {"?", "?", "?", "?", str_cat("? (", e.what(), ")")});
    }
    if (f.paths) row.push_back(m.path.string());
    rows.push_back(std::move(row));
  }
  print_table(rows);
  return 0;
}

}  // namespace

void register_ls(CLI::App& app) {
  auto f = std::make_shared<LsFlags>();
  CLI::App* sub = add_verb(app, "ls", "list local models", [f] { return run_ls(*f); });
  sub->add_option("--models-dir", f->models_dirs, "also list checkpoints under this folder (repeatable)");
  sub->add_option("--ctx", f->ctx, "context length the FITS column assumes (capped at the model's)")
      ->capture_default_str();
  sub->add_option("--kv", f->kv, "KV cache kind the FITS column assumes")->capture_default_str();
  sub->add_flag("--paths", f->paths, "show each model's path");
}

}  // namespace ingot::cli
