// Whisper log-mel features, identical to transformers' WhisperFeatureExtractor:
// periodic Hann window, centred STFT with reflect padding, power spectrum,
// Slaney mel filters, log10 clamp at 1e-10, dynamic range 8, (x + 4) / 4.
#pragma once
#include <vector>

#include "tensor/tensor.h"

namespace ingot::audio {

struct MelConfig {
  int n_mels = 80;
  int n_fft = 400;
  int hop = 160;
  int sampling_rate = 16000;
  int n_samples = 480000;  // one 30 s window
};

// Slaney-normalised triangular filters, [n_fft/2 + 1, n_mels] row-major.
std::vector<double> mel_filter_bank(const MelConfig& c);

// Log-mel of one window: `pcm` is padded with zeros (or cut) to n_samples.
// Returns [n_mels, n_samples / hop] float32 on the CPU (the spectra come
// from a real FFT: a few milliseconds a window).
Tensor log_mel(const std::vector<float>& pcm, const MelConfig& c);

}  // namespace ingot::audio
