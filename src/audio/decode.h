// Audio files to 16 kHz mono float PCM through FFmpeg's libraries: any
// container and codec FFmpeg reads (wav, flac, mp3, ogg/opus, webm, m4a ...).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ingot::audio {

struct DecodeLimits {
  double max_seconds = 4 * 3600.0;  // longer audio is refused before decoding it all
};

// Decodes and resamples to `rate` Hz mono in [-1, 1]. Throws Error(BadFormat)
// for data that is not audio, Error(InvalidArgument) for empty or too-long audio.
std::vector<float> decode_file(const std::string& path, int rate = 16000, const DecodeLimits& lim = {});
std::vector<float> decode_memory(const std::string& bytes, int rate = 16000, const DecodeLimits& lim = {});

}  // namespace ingot::audio
