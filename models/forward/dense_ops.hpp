#pragma once
// Float32 building blocks of the dense decoder, written to follow transformers' Llama modules operation by
// operation (modeling_llama.py: LlamaRMSNorm, LlamaRotaryEmbedding + apply_rotary_pos_emb, eager attention,
// LlamaMLP with act_fn silu). Sums run in index order; nothing here is threaded.
#include <cstdint>
#include <vector>

namespace wsb {

/// out[i] = w[i] * (x[i] * (1 / sqrt(mean(x^2) + eps))), all float32 (eps rounded to float32 as torch does when
/// adding a Python float to a float32 tensor). x, w, out have n elements; out may alias x.
void rms_norm(const float* x, const float* w, int64_t n, double eps, float* out);

/// Rotary inverse frequencies inv_freq[j] = 1 / theta^(2j / head_dim), j < head_dim/2, computed in float32 like
/// LlamaRotaryEmbedding's default rope init. Plain RoPE only: Llama 3.1's "llama3" rope_scaling is not applied.
std::vector<float> rope_inv_freq(double theta, int head_dim);

/// cos/sin of position * inv_freq[j] (float32 product, then cosf/sinf), each head_dim/2 long, times `scale` (the
/// rotary embedding's attention scaling: rope_frequencies' (rope_yarn.hpp) for YaRN, else 1).
void rope_angles(const std::vector<float>& inv_freq, int64_t position, float* cos_out, float* sin_out,
                 float scale = 1.0f);

/// Rotates `heads` consecutive vectors of head_dim in place, rotate_half convention: element i pairs with
/// i + head_dim/2: out[i] = x[i]*c - x[i+h]*s, out[i+h] = x[i+h]*c + x[i]*s.
void apply_rope(float* x, int heads, int head_dim, const float* cos, const float* sin);

/// One query head over `length` cached positions: scores = (q . k_t) * scale, softmax with max subtraction,
/// out[d] = sum_t p_t * v_t[d] in t order. k/v rows of head_dim start at k + t * kv_stride (v likewise).
/// `scores` is scratch of at least `length` floats.
void attend_head(const float* q, const float* k, const float* v, int64_t length, int64_t kv_stride, int head_dim,
                 float scale, float* scores, float* out);

/// out[j] = silu(gate[j]) * up[j], silu(g) = g / (1 + exp(-g)).
void swiglu(const float* gate, const float* up, int64_t n, float* out);

}  // namespace wsb
