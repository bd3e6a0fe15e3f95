// tokenizer.json: arbitrary bytes as the file; an accepted tokenizer must
// then encode, decode and stream a fixed text without crashing.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string json(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<ingot::Tokenizer> tok;
  try {
    tok = ingot::Tokenizer::from_json(json, "");
  } catch (const ingot::Error&) {
    return 0;
  }
  try {
    for (const char* text : {"Hello, world! 123  \n\tcafé 日本語 <s>", "", " "}) {
      auto ids = tok->encode(text, true);
      tok->decode(ids, false);
      tok->decode(ids, true);
      auto s = tok->stream(false);
      for (int32_t id : ids) s->push(id);
      s->flush();
    }
    // Ids outside the vocabulary are a caller's mistake: an Error, not a crash.
    tok->decode({-1, 0, static_cast<int32_t>(tok->vocab_size()), 1 << 30}, false);
  } catch (const ingot::Error&) {
  }
  return 0;
}
