// GGUF: arbitrary bytes as a whole file; an accepted file's metadata is then
// read the way `serve` does (typed lookups, the embedded tokenizer).
#include <cstddef>
#include <cstdint>

#include "io/gguf.h"
#include "io/gguf_tokenizer.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto g = ingot::GgufFile::parse(data, size);
    try {
      ingot::gguf_tokenizer_files(*g);
    } catch (const ingot::Error&) {
    }
  } catch (const ingot::Error&) {
  }
  return 0;
}
