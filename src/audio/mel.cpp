#include "audio/mel.h"

#include <algorithm>
#include <cmath>

#include <kiss_fftr.h>
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

namespace {

// The mel filters as runs of non-zero weights over frequency bins.
struct SparseFilters {
  std::vector<int> first;  // bin of each filter's first weight
  std::vector<std::vector<double>> weights;
};

SparseFilters sparse_filters(const MelConfig& c) {
  const int bins = c.n_fft / 2 + 1;
  std::vector<double> dense = mel_filter_bank(c);
  SparseFilters f;
  for (int m = 0; m < c.n_mels; ++m) {
    int lo = bins, hi = -1;
    for (int b = 0; b < bins; ++b)
      if (dense[static_cast<size_t>(b * c.n_mels + m)] != 0.0) lo = std::min(lo, b), hi = std::max(hi, b);
    f.first.push_back(hi < lo ? 0 : lo);
    std::vector<double> w;
    for (int b = lo; b <= hi; ++b) w.push_back(dense[static_cast<size_t>(b * c.n_mels + m)]);
    f.weights.push_back(std::move(w));
  }
  return f;
}

// A real-input FFT of n_fft points (KISS FFT: mixed radix, so 400 points is fast).
class RealFft {
 public:
  explicit RealFft(int n) : cfg_(kiss_fftr_alloc(n, 0, nullptr, nullptr)), out_(static_cast<size_t>(n / 2 + 1)) {
    if (!cfg_) fail(ErrorKind::ResourceExhausted, "cannot set up a real FFT of ", n, " points");
  }
  ~RealFft() { kiss_fftr_free(cfg_); }
  RealFft(const RealFft&) = delete;
  RealFft& operator=(const RealFft&) = delete;
  // n real samples -> n / 2 + 1 complex values.
  const std::vector<kiss_fft_cpx>& run(const float* in) {
    kiss_fftr(cfg_, in, out_.data());
    return out_;
  }

 private:
  kiss_fftr_cfg cfg_;
  std::vector<kiss_fft_cpx> out_;
};

}  // namespace

Tensor log_mel(const std::vector<float>& pcm_in, const MelConfig& c) {
  if (c.n_fft <= 0 || c.n_fft % 2 || c.hop <= 0 || c.n_samples < c.n_fft || c.n_mels <= 0)
    fail(ErrorKind::BadFormat, "bad feature extractor config");
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
  const SparseFilters filt = sparse_filters(c);
  RealFft fft(c.n_fft);
  std::vector<float> frame(static_cast<size_t>(c.n_fft));
  std::vector<double> power(static_cast<size_t>(bins));
  std::vector<double> mel(static_cast<size_t>(c.n_mels * frames));
  double mx = -1e300;
  for (int64_t t = 0; t < frames; ++t) {
    for (int i = 0; i < c.n_fft; ++i) frame[static_cast<size_t>(i)] = sample(t * c.hop + i) * window[static_cast<size_t>(i)];
    const std::vector<kiss_fft_cpx>& spec = fft.run(frame.data());
    for (int k = 0; k < bins; ++k) {
      const double re = spec[static_cast<size_t>(k)].r, im = spec[static_cast<size_t>(k)].i;
      power[static_cast<size_t>(k)] = static_cast<float>(re * re + im * im);
    }
    for (int m = 0; m < c.n_mels; ++m) {
      const std::vector<double>& w = filt.weights[static_cast<size_t>(m)];
      const double* p = power.data() + filt.first[static_cast<size_t>(m)];
      double s = 0;
      for (size_t k = 0; k < w.size(); ++k) s += w[k] * p[k];
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
