#include "models/forward/rope_yarn.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "models/forward/dense_ops.hpp"

namespace wsb {

namespace {

double get_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

/// find_correction_dim: the dimension whose wavelength makes `rotations` turns over the original context.
double correction_dim(double rotations, int dim, double base, double original) {
  return (dim * std::log(original / (rotations * 2.0 * std::numbers::pi))) / (2.0 * std::log(base));
}

}  // namespace

RopeFrequencies rope_frequencies(double theta, int rotary_dim, const RopeScaling& s) {
  if (s.factor <= 0.0) return {rope_inv_freq(theta, rotary_dim), 1.0f};
  RopeFrequencies out;
  const double attention = s.mscale != 0.0 && s.mscale_all_dim != 0.0
                               ? get_mscale(s.factor, s.mscale) / get_mscale(s.factor, s.mscale_all_dim)
                               : get_mscale(s.factor, 1.0);
  out.attention_scaling = static_cast<float>(attention);
  double low = correction_dim(s.beta_fast, rotary_dim, theta, s.original_max_position);
  double high = correction_dim(s.beta_slow, rotary_dim, theta, s.original_max_position);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rotary_dim - 1));
  if (low == high) high += 0.001;  // linear_ramp_factor's guard against a zero-width ramp
  // torch evaluates tensor-scalar ops in float32 with the Python scalar converted to float32.
  const float base = static_cast<float>(theta), factor = static_cast<float>(s.factor);
  const float min = static_cast<float>(low), width = static_cast<float>(high - low);
  out.inv_freq.resize(static_cast<size_t>(rotary_dim / 2));
  for (int j = 0; j < rotary_dim / 2; ++j) {
    const float pos_freq = std::pow(base, static_cast<float>(2 * j) / static_cast<float>(rotary_dim));
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (factor * pos_freq);
    const float ramp = std::clamp((static_cast<float>(j) - min) / width, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    const float a = interpolation * (1.0f - extrapolation_factor);
    const float b = extrapolation * extrapolation_factor;
    out.inv_freq[static_cast<size_t>(j)] = a + b;
  }
  return out;
}

float mla_softmax_scale(int qk_head_dim, const RopeScaling& s) {
  double scale = std::pow(static_cast<double>(qk_head_dim), -0.5);
  if (s.factor > 0.0 && s.mscale_all_dim != 0.0) {
    const double mscale = get_mscale(s.factor, s.mscale_all_dim);
    scale = scale * mscale * mscale;
  }
  return static_cast<float>(scale);
}

}  // namespace wsb
