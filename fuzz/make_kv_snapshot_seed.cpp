// Writes valid KV snapshots in the fuzzer's layout (plain and KV8, short and
// longer than the sliding window) into the directory given as argv[1].
#include <random>

#include "kv_snapshot_layout.h"
#include "runtime/runtime.h"
#include "tensor/tensor.h"
#include "util/error.h"

using namespace ingot;

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  runtime::init_backends();
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const char* kind : {"paged", "kv8"}) {
    auto pool = fuzz::snapshot_pool(kind);
    for (int64_t n : {3, 9}) {
      auto seq = pool->new_sequence();
      for (int l = 0; l < seq->num_layers(); ++l) {
        std::vector<float> k(static_cast<size_t>(n * 8)), v(k.size());
        for (float& x : k) x = nd(rng);
        for (float& x : v) x = nd(rng);
        seq->layer(l).append(Tensor::from_f32(k, {n, 1, 8}), Tensor::from_f32(v, {n, 1, 8}));
      }
      std::vector<int32_t> tokens;
      for (int64_t i = 0; i < n; ++i) tokens.push_back(static_cast<int32_t>(100 + i));
      kv::write_snapshot(str_cat(argv[1], "/", kind, "-", n, ".ikv"), *seq, tokens, fuzz::snapshot_key(*pool));
    }
  }
  return 0;
}
