// Mono float PCM pulled in order, a piece at a time: long recordings are
// transcribed from a source like this without holding all of their samples.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

namespace ingot::audio {

class PcmSource {
 public:
  virtual ~PcmSource() = default;
  // Copies up to `n` samples into `out`; fewer only at the end of the audio
  // (0 once it is reached). Throws Error for audio that turns out unreadable.
  virtual size_t read(float* out, size_t n) = 0;
  // Back to the first sample, for a second pass over the audio.
  virtual void rewind() = 0;
};

// Samples already in memory; the vector must outlive the source.
class PcmView : public PcmSource {
 public:
  explicit PcmView(const std::vector<float>& pcm) : pcm_(pcm) {}
  size_t read(float* out, size_t n) override {
    const size_t k = std::min(n, pcm_.size() - pos_);
    if (k) std::memcpy(out, pcm_.data() + pos_, k * sizeof(float));
    pos_ += k;
    return k;
  }
  void rewind() override { pos_ = 0; }

 private:
  const std::vector<float>& pcm_;
  size_t pos_ = 0;
};

}  // namespace ingot::audio
