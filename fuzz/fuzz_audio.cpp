// Audio containers: arbitrary bytes through FFmpeg demux + decode + resample
// from memory, as an upload would arrive. Only ingot::Error may come out.
#include <cstddef>
#include <cstdint>
#include <string>

#include "audio/decode.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ingot::audio::DecodeLimits lim;
  lim.max_seconds = 30;  // keeps each input cheap; longer audio is refused, which is also exercised
  try {
    auto pcm = ingot::audio::decode_memory(std::string(reinterpret_cast<const char*>(data), size), 16000, lim);
    for (float x : pcm)
      if (!(x >= -1.0f && x <= 1.0f)) __builtin_trap();
  } catch (const ingot::Error&) {
  }
  return 0;
}
