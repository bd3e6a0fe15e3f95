// `ingot bench model`: prefill and decode rates through the engine.
#pragma once
#include <CLI/CLI.hpp>

namespace ingot::cli {

// Adds `model` under the `bench` verb group.
void register_bench_model(CLI::App& bench);

}  // namespace ingot::cli
