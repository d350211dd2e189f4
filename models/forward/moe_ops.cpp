#include "models/forward/moe_ops.hpp"

#include <algorithm>
#include <cmath>

#include "models/forward/dense_ops.hpp"

namespace wsb {

void apply_partial_rope(float* x, int heads, int head_dim, int rotary_dim, const float* cos, const float* sin) {
  for (int h = 0; h < heads; ++h) apply_rope(x + int64_t{h} * head_dim, 1, rotary_dim, cos, sin);
}

void apply_rope_interleaved(float* x, int dim, const float* cos, const float* sin, float* tmp) {
  const int half = dim / 2;
  for (int i = 0; i < half; ++i) {
    tmp[i] = x[2 * i];
    tmp[half + i] = x[2 * i + 1];
  }
  std::copy(tmp, tmp + dim, x);
  apply_rope(x, 1, dim, cos, sin);
}

void attend_head_window(const float* __restrict q, const float* __restrict k, int64_t k_stride, int qk_dim,
                        const float* __restrict v, int64_t v_stride, int v_dim, int64_t first, int64_t length,
                        float scale, const float* sink, float* __restrict scores, float* __restrict out) {
  const int64_t last = first + length;
  float max_score = sink != nullptr ? *sink : -INFINITY;
  for (int64_t t = first; t < last; ++t) {
    const float* kt = k + t * k_stride;
    float dot = 0.0f;
    for (int d = 0; d < qk_dim; ++d) dot += q[d] * kt[d];
    scores[t] = dot * scale;
    if (scores[t] > max_score) max_score = scores[t];
  }
  float denom = 0.0f;
  for (int64_t t = first; t < last; ++t) {
    scores[t] = std::exp(scores[t] - max_score);
    denom += scores[t];
  }
  if (sink != nullptr) denom += std::exp(*sink - max_score);  // the sink column comes last in combined_logits
  for (int d = 0; d < v_dim; ++d) out[d] = 0.0f;
  for (int64_t t = first; t < last; ++t) {
    const float p = scores[t] / denom;
    const float* vt = v + t * v_stride;
    for (int d = 0; d < v_dim; ++d) out[d] += p * vt[d];
  }
}

void top_k_indices(const float* values, int n, int k, int* out) {
  // k passes of an index-order scan with a strict comparison: the first (lowest) index wins ties. k is small
  // (top-8), so this beats sorting; already chosen indices are skipped.
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (std::find(out, out + j, i) != out + j) continue;
      if (best < 0 || values[i] > values[best]) best = i;
    }
    out[j] = best;
  }
}

void sigmoid_topk_route(const float* logits, const float* correction_bias, int n, int top_k, bool normalize,
                        float scaling, int* experts, float* weights, float* scratch) {
  float* scores = scratch;
  float* choice = scratch + n;
  for (int i = 0; i < n; ++i) {
    scores[i] = 1.0f / (1.0f + std::exp(-logits[i]));
    choice[i] = scores[i] + correction_bias[i];
  }
  top_k_indices(choice, n, top_k, experts);
  float sum = 0.0f;
  for (int j = 0; j < top_k; ++j) {
    weights[j] = scores[experts[j]];
    sum += weights[j];
  }
  if (normalize) {
    const float denom = sum + 1e-20f;
    for (int j = 0; j < top_k; ++j) weights[j] /= denom;
  }
  for (int j = 0; j < top_k; ++j) weights[j] *= scaling;
}

void softmax_topk_route(const float* logits, int n, int top_k, int* experts, float* weights) {
  top_k_indices(logits, n, top_k, experts);
  const float max_logit = logits[experts[0]];  // selection order is descending
  float sum = 0.0f;
  for (int j = 0; j < top_k; ++j) {
    weights[j] = std::exp(logits[experts[j]] - max_logit);
    sum += weights[j];
  }
  for (int j = 0; j < top_k; ++j) weights[j] /= sum;
}

void clamped_swiglu_interleaved(const float* gate_up, int64_t n, float limit, float* out) {
  constexpr float kAlpha = 1.702f;
  for (int64_t j = 0; j < n; ++j) {
    const float gate = std::min(gate_up[2 * j], limit);
    const float up = std::clamp(gate_up[2 * j + 1], -limit, limit);
    const float glu = gate * (1.0f / (1.0f + std::exp(-(gate * kAlpha))));
    out[j] = (up + 1.0f) * glu;
  }
}

}  // namespace wsb
