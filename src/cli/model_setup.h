// Turning ModelFlags into a loaded model (shared by logits, generate, serve).
#pragma once
#include <memory>

#include "cli/verbs.h"
#include "models/model.h"

namespace ingot::cli {

LoadOptions load_options(const ModelFlags& f);
std::unique_ptr<Model> load_model_from_flags(const ModelFlags& f);
CacheOptions cache_options(const ModelFlags& f);
// Throws InvalidArgument naming the first id outside [0, vocab).
void check_token_ids(const std::vector<int32_t>& ids, int64_t vocab);

}  // namespace ingot::cli
