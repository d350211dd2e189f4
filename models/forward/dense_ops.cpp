#include "models/forward/dense_ops.hpp"

#include <cmath>

namespace wsb {

void rms_norm(const float* x, const float* w, int64_t n, double eps, float* out) {
  float sum_sq = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum_sq += x[i] * x[i];
  const float mean = sum_sq / static_cast<float>(n);
  const float inv = 1.0f / std::sqrt(mean + static_cast<float>(eps));
  for (int64_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * inv);
}

std::vector<float> rope_inv_freq(double theta, int head_dim) {
  std::vector<float> inv(static_cast<size_t>(head_dim / 2));
  const float base = static_cast<float>(theta);
  for (int j = 0; j < head_dim / 2; ++j) {
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(head_dim);
    inv[static_cast<size_t>(j)] = 1.0f / std::pow(base, exponent);
  }
  return inv;
}

void rope_angles(const std::vector<float>& inv_freq, int64_t position, float* cos_out, float* sin_out, float scale) {
  const float pos = static_cast<float>(position);
  for (size_t j = 0; j < inv_freq.size(); ++j) {
    const float angle = inv_freq[j] * pos;
    cos_out[j] = std::cos(angle) * scale;
    sin_out[j] = std::sin(angle) * scale;
  }
}

void apply_rope(float* x, int heads, int head_dim, const float* cos, const float* sin) {
  const int half = head_dim / 2;
  for (int h = 0; h < heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cos[i] - b * sin[i];
      v[i + half] = b * cos[i] + a * sin[i];
    }
  }
}

// __restrict: `out` never aliases the cache or the scores, which lets the compiler vectorize the v accumulation
// across d (each out[d] still sums over t in order).
void attend_head(const float* __restrict q, const float* __restrict k, const float* __restrict v, int64_t length,
                 int64_t kv_stride, int head_dim, float scale, float* __restrict scores, float* __restrict out) {
  // Four positions at a time for instruction-level parallelism; each dot product still sums d in order.
  int64_t t = 0;
  for (; t + 4 <= length; t += 4) {
    const float* k0 = k + t * kv_stride;
    const float* k1 = k0 + kv_stride;
    const float* k2 = k1 + kv_stride;
    const float* k3 = k2 + kv_stride;
    float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
    for (int d = 0; d < head_dim; ++d) {
      d0 += q[d] * k0[d];
      d1 += q[d] * k1[d];
      d2 += q[d] * k2[d];
      d3 += q[d] * k3[d];
    }
    scores[t] = d0 * scale;
    scores[t + 1] = d1 * scale;
    scores[t + 2] = d2 * scale;
    scores[t + 3] = d3 * scale;
  }
  for (; t < length; ++t) {
    const float* kt = k + t * kv_stride;
    float dot = 0.0f;
    for (int d = 0; d < head_dim; ++d) dot += q[d] * kt[d];
    scores[t] = dot * scale;
  }
  float max_score = -INFINITY;
  for (t = 0; t < length; ++t)
    if (scores[t] > max_score) max_score = scores[t];
  float denom = 0.0f;
  for (t = 0; t < length; ++t) {
    scores[t] = std::exp(scores[t] - max_score);
    denom += scores[t];
  }
  for (int d = 0; d < head_dim; ++d) out[d] = 0.0f;
  for (t = 0; t < length; ++t) {
    const float p = scores[t] / denom;
    const float* vt = v + t * kv_stride;
    for (int d = 0; d < head_dim; ++d) out[d] += p * vt[d];
  }
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = gate[j] / (1.0f + std::exp(-gate[j])) * up[j];
}

}  // namespace wsb
