// Encoding throughput of ingot's tokenizer: encodes every string of a JSON
// array (one thread), `reps` times, and prints one JSON line with the bytes,
// the tokens and the time of the first and the best pass, plus a checksum of
// the ids so the driver can compare against the reference library.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/tokenizer.h"
#include "util/strings.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_tokenizer TOKENIZER_DIR TEXTS.json [reps]\n");
    return 2;
  }
  try {
    auto tok = ingot::Tokenizer::from_dir(argv[1]);
    auto texts = nlohmann::json::parse(ingot::read_text_file(argv[2])).get<std::vector<std::string>>();
    int reps = argc > 3 ? std::stoi(argv[3]) : 3;
    size_t bytes = 0;
    for (const auto& t : texts) bytes += t.size();
    double first = 0, best = 1e30;
    uint64_t tokens = 0, checksum = 0;
    for (int r = 0; r < reps; ++r) {
      tokens = 0;
      checksum = 1469598103934665603ull;
      auto t0 = std::chrono::steady_clock::now();
      for (const auto& t : texts) {
        auto ids = tok->encode(t, false);
        tokens += ids.size();
        for (int32_t id : ids) checksum = (checksum ^ static_cast<uint32_t>(id)) * 1099511628211ull;
      }
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r == 0) first = s;
      best = std::min(best, s);
    }
    std::printf("{\"bytes\": %zu, \"tokens\": %llu, \"first_s\": %.6f, \"best_s\": %.6f, \"checksum\": %llu}\n", bytes,
                static_cast<unsigned long long>(tokens), first, best, static_cast<unsigned long long>(checksum));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
  return 0;
}
