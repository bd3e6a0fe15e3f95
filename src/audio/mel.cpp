#include "audio/mel.h"

#include <algorithm>
#include <cmath>

#include "ops/ops.h"
#include "util/error.h"

namespace ingot::audio {

namespace {

double hz_to_mel(double f) {
  const double min_log_hz = 1000.0, min_log_mel = 15.0, logstep = 27.0 / std::log(6.4);
  return f < min_log_hz ? 3.0 * f / 200.0 : min_log_mel + std::log(f / min_log_hz) * logstep;
}

double mel_to_hz(double m) {
  const double min_log_hz = 1000.0, min_log_mel = 15.0, logstep = std::log(6.4) / 27.0;
  return m < min_log_mel ? 200.0 * m / 3.0 : min_log_hz * std::exp(logstep * (m - min_log_mel));
}

}  // namespace

std::vector<double> mel_filter_bank(const MelConfig& c) {
  const int bins = c.n_fft / 2 + 1;
  const double fmax = c.sampling_rate / 2.0;
  const double mmin = hz_to_mel(0.0), mmax = hz_to_mel(fmax);
  std::vector<double> filt_hz(static_cast<size_t>(c.n_mels + 2));
  for (int i = 0; i < c.n_mels + 2; ++i)
    filt_hz[static_cast<size_t>(i)] = mel_to_hz(mmin + (mmax - mmin) * i / (c.n_mels + 1));
  std::vector<double> out(static_cast<size_t>(bins * c.n_mels), 0.0);
  for (int b = 0; b < bins; ++b) {
    double f = static_cast<double>(c.sampling_rate / 2) * b / (bins - 1);
    for (int m = 0; m < c.n_mels; ++m) {
      double lo = filt_hz[static_cast<size_t>(m)], mid = filt_hz[static_cast<size_t>(m + 1)],
             hi = filt_hz[static_cast<size_t>(m + 2)];
      double down = (f - lo) / (mid - lo);
      double up = (hi - f) / (hi - mid);
      double v = std::max(0.0, std::min(down, up));
      out[static_cast<size_t>(b * c.n_mels + m)] = v * 2.0 / (hi - lo);  // slaney area normalisation
    }
  }
  return out;
}

Tensor log_mel(const std::vector<float>& pcm_in, const MelConfig& c, Device device) {
  if (c.n_fft <= 0 || c.hop <= 0 || c.n_samples < c.n_fft) fail(ErrorKind::BadFormat, "bad feature extractor config");
  std::vector<float> pcm(static_cast<size_t>(c.n_samples), 0.0f);
  std::copy_n(pcm_in.begin(), std::min(pcm_in.size(), pcm.size()), pcm.begin());
  const int pad = c.n_fft / 2;
  const int64_t frames = c.n_samples / c.hop;  // the STFT's last frame is dropped
  const int bins = c.n_fft / 2 + 1;
  auto sample = [&](int64_t i) {  // reflect padding, as torch.stft(center=True)
    int64_t n = static_cast<int64_t>(pcm.size());
    int64_t j = i - pad;
    if (j < 0) j = -j;
    if (j >= n) j = 2 * (n - 1) - j;
    return pcm[static_cast<size_t>(j)];
  };
  std::vector<float> window(static_cast<size_t>(c.n_fft));
  for (int i = 0; i < c.n_fft; ++i) window[static_cast<size_t>(i)] = static_cast<float>(0.5 - 0.5 * std::cos(2 * M_PI * i / c.n_fft));
  std::vector<float> fr(static_cast<size_t>(frames * c.n_fft));
  for (int64_t t = 0; t < frames; ++t)
    for (int i = 0; i < c.n_fft; ++i)
      fr[static_cast<size_t>(t * c.n_fft + i)] = sample(t * c.hop + i) * window[static_cast<size_t>(i)];
  // DFT basis: rows 0..bins-1 are cos, bins..2*bins-1 are -sin.
  std::vector<float> basis(static_cast<size_t>(2 * bins * c.n_fft));
  for (int k = 0; k < bins; ++k)
    for (int i = 0; i < c.n_fft; ++i) {
      double a = 2 * M_PI * static_cast<double>((static_cast<int64_t>(k) * i) % c.n_fft) / c.n_fft;
      basis[static_cast<size_t>(k * c.n_fft + i)] = static_cast<float>(std::cos(a));
      basis[static_cast<size_t>((bins + k) * c.n_fft + i)] = static_cast<float>(-std::sin(a));
    }
  Weight w;
  w.data = Tensor::from_f32(basis, {2 * bins, c.n_fft}).to(device);
  Tensor spec = ops::linear(Tensor::from_f32(fr, {frames, c.n_fft}).to(device), w).to(Device::CPU);
  const float* ps = spec.data<float>();
  std::vector<double> filt = mel_filter_bank(c);
  std::vector<double> mel(static_cast<size_t>(c.n_mels * frames));
  std::vector<double> power(static_cast<size_t>(bins));
  double mx = -1e300;
  for (int64_t t = 0; t < frames; ++t) {
    for (int k = 0; k < bins; ++k) {
      double re = ps[t * 2 * bins + k], im = ps[t * 2 * bins + bins + k];
      power[static_cast<size_t>(k)] = static_cast<float>(re * re + im * im);
    }
    for (int m = 0; m < c.n_mels; ++m) {
      double s = 0;
      for (int k = 0; k < bins; ++k) s += filt[static_cast<size_t>(k * c.n_mels + m)] * power[static_cast<size_t>(k)];
      double lv = std::log10(std::max(static_cast<double>(static_cast<float>(s)), 1e-10));
      mel[static_cast<size_t>(m * frames + t)] = lv;
      mx = std::max(mx, lv);
    }
  }
  std::vector<float> out(mel.size());
  for (size_t i = 0; i < mel.size(); ++i) out[i] = static_cast<float>((std::max(mel[i], mx - 8.0) + 4.0) / 4.0);
  return Tensor::from_f32(out, {c.n_mels, frames});
}

}  // namespace ingot::audio
