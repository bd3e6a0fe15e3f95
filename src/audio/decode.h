// Audio files to 16 kHz mono float PCM through FFmpeg's libraries: any
// container and codec FFmpeg reads (wav, flac, mp3, ogg/opus, webm, m4a ...),
// read a piece at a time (PcmReader) or all at once (decode_file).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "audio/pcm_source.h"

namespace ingot::audio {

struct DecodeLimits {
  // Longer audio is refused: from the container's duration before decoding,
  // else once decoding passes it. Reading streams, so this bounds time, not memory.
  double max_seconds = 24 * 3600.0;
};

// Decodes and resamples to `rate` Hz mono in [-1, 1] as it is read, holding
// one decoded packet at a time. Opening checks the header and decodes up to
// the first samples, so it throws what decode_file throws for a missing
// file (NotFound), data that is not audio (BadFormat), empty or too-long
// audio (InvalidArgument); read() throws for corrupt data further on and
// once the audio runs past the limit.
class PcmReader : public PcmSource {
 public:
  static std::unique_ptr<PcmReader> open_file(const std::string& path, int rate = 16000, const DecodeLimits& lim = {});
  // `bytes` is kept for as long as the reader (and rewind) needs it.
  static std::unique_ptr<PcmReader> open_memory(std::shared_ptr<const std::string> bytes, int rate = 16000,
                                                const DecodeLimits& lim = {});
  ~PcmReader() override;

  size_t read(float* out, size_t n) override;
  void rewind() override;  // decodes again from the start
  // The container's duration in seconds, < 0 when it gives none.
  double duration_hint() const;

  struct Impl;

 private:
  explicit PcmReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The whole audio through a PcmReader.
std::vector<float> decode_file(const std::string& path, int rate = 16000, const DecodeLimits& lim = {});
std::vector<float> decode_memory(const std::string& bytes, int rate = 16000, const DecodeLimits& lim = {});

}  // namespace ingot::audio
