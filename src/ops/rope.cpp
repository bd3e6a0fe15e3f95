#include "ops/rope.h"

#include <cmath>

#include "util/error.h"

namespace ingot {

RopeSpec make_rope_spec(const RopeParams& p, int head_dim, bool interleaved) {
  RopeSpec s;
  s.interleaved = interleaved;
  int rot = static_cast<int>(head_dim * p.partial_rotary_factor);
  rot -= rot % 2;
  s.rotary_dim = rot;
  if (p.type == "proportional") {
    // Gemma 4 full layers: the rotation spans the whole head (dim j pairs with
    // j + head_dim/2), but only the first partial*head_dim/2 frequencies are
    // non-zero (exponents over head_dim); the rest rotate by angle 0.
    s.rotary_dim = head_dim - head_dim % 2;
    const int half_all = s.rotary_dim / 2;
    const int angles = static_cast<int>(p.partial_rotary_factor * head_dim / 2);
    s.inv_freq.assign(static_cast<size_t>(half_all), 0.0f);
    for (int i = 0; i < angles && i < half_all; ++i) {
      float expo = static_cast<float>(2 * i) / static_cast<float>(head_dim);
      s.inv_freq[static_cast<size_t>(i)] = static_cast<float>(
          1.0f / static_cast<float>(std::pow(static_cast<double>(static_cast<float>(p.theta)),
                                             static_cast<double>(expo))) / p.factor);
    }
    return s;
  }
  int freq_dim = rot;
  int half = rot / 2;
  s.inv_freq.resize(static_cast<size_t>(half));
  // Computed in float32 exactly as transformers does (base ** (arange/dim)).
  for (int i = 0; i < half; ++i) {
    float expo = static_cast<float>(2 * i) / static_cast<float>(freq_dim);
    s.inv_freq[static_cast<size_t>(i)] =
        1.0f / static_cast<float>(std::pow(static_cast<double>(static_cast<float>(p.theta)),
                                           static_cast<double>(expo)));
  }
  if (p.type == "default") return s;
  if (p.type == "linear") {
    for (float& f : s.inv_freq) f = static_cast<float>(f / p.factor);
    return s;
  }
  if (p.type == "llama3") {
    double old_ctx = p.original_max_position;
    double low_wl = old_ctx / p.low_freq_factor;
    double high_wl = old_ctx / p.high_freq_factor;
    for (float& f : s.inv_freq) {
      double wl = 2 * M_PI / static_cast<double>(f);
      float out;
      if (wl > low_wl) {
        out = static_cast<float>(f / p.factor);
      } else if (wl < high_wl) {
        out = f;
      } else {
        double smooth = (old_ctx / wl - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
        out = static_cast<float>((1 - smooth) * f / p.factor + smooth * f);
      }
      f = out;
    }
    return s;
  }
  if (p.type == "yarn") {
    double base = p.theta, dim = rot, factor = p.factor;
    double orig = p.original_max_position;
    auto get_mscale = [](double scale, double m) {
      return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
    };
    double att = p.attention_factor;
    if (att == 0) {
      if (p.mscale != 0 && p.mscale_all_dim != 0)
        att = get_mscale(factor, p.mscale) / get_mscale(factor, p.mscale_all_dim);
      else
        att = get_mscale(factor, 1.0);
    }
    auto corr_dim = [&](double nrot) {
      return (dim * std::log(orig / (nrot * 2 * M_PI))) / (2 * std::log(base));
    };
    double low = std::floor(corr_dim(p.beta_fast));
    double high = std::ceil(corr_dim(p.beta_slow));
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1);
    for (int i = 0; i < half; ++i) {
      double pos_freq = std::pow(base, (2.0 * i) / dim);
      double extra = 1.0 / pos_freq, inter = 1.0 / (factor * pos_freq);
      double hi = high == low ? high + 0.001 : high;
      double ramp = std::clamp((i - low) / (hi - low), 0.0, 1.0);
      double extra_factor = 1 - ramp;
      s.inv_freq[static_cast<size_t>(i)] =
          static_cast<float>(inter * (1 - extra_factor) + extra * extra_factor);
    }
    s.attention_scaling = static_cast<float>(att);
    return s;
  }
  fail(ErrorKind::Unsupported, "rope type '", p.type, "' is not supported");
}

}  // namespace ingot
