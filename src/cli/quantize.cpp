// `ingot quantize SRC DST --bits 4|8 [--group-size 64]`: an MLX affine
// checkpoint that ingot (and MLX) load.
#include <cstdio>

#include "cli/verbs.h"
#include "quant/affine_writer.h"

namespace ingot::cli {

void register_quantize(CLI::App& app) {
  struct Flags {
    std::string src, dst;
    int bits = 4, group = 64;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* sub = add_verb(app, "quantize", "write an affine 4/8-bit copy of a safetensors checkpoint", [f] {
    auto r = quant::quantize_checkpoint(f->src, f->dst, f->bits, f->group);
    std::printf("quantized %d matrices (%d tensors kept): %.1f MB -> %.1f MB\n", r.quantized, r.kept,
                static_cast<double>(r.bytes_in) / 1e6, static_cast<double>(r.bytes_out) / 1e6);
    return 0;
  });
  sub->add_option("SRC", f->src, "checkpoint directory")->required();
  sub->add_option("DST", f->dst, "output directory")->required();
  sub->add_option("--bits", f->bits, "4 or 8")->required();
  sub->add_option("--group-size", f->group, "values per scale/bias: 32, 64 or 128");
}

}  // namespace ingot::cli
