#pragma once
// Float32 building blocks of the MoE families' forward passes that the dense ones (dense_ops.hpp) lack: partial and
// interleaved RoPE, attention with separate k/v widths, a window and a sink logit, the two routers and gpt-oss's
// clamped SwiGLU. Each follows the transformers module named in its comment operation by operation; sums run in
// index order; nothing here is threaded.
#include <cstdint>

namespace wsb {

/// transformers modeling_glm4_moe.py apply_rotary_pos_emb (partial rotary): in each of `heads` vectors of
/// `head_dim` (consecutive), the first `rotary_dim` elements are rotated rotate_half style over rotary_dim (element
/// i pairs with i + rotary_dim/2, angle index i), the rest passes through. cos/sin have rotary_dim/2 entries
/// (rope_inv_freq(theta, rotary_dim)).
void apply_partial_rope(float* x, int heads, int head_dim, int rotary_dim, const float* cos, const float* sin);

/// transformers modeling_deepseek_v3.py apply_rotary_pos_emb_interleave (config.rope_interleave, the default): the
/// `dim` elements at x are de-interleaved (even elements first, then odd ones) and then rotated rotate_half style,
/// so stored pair (2i, 2i+1) turns by angle index i; the result stays in the de-interleaved order (q and k are
/// permuted alike, so their dot products are those of the pairwise rotation). `tmp` holds dim floats.
void apply_rope_interleaved(float* x, int dim, const float* cos, const float* sin, float* tmp);

/// One query head over cached positions [first, first + length): scores_t = (q . k_t) * scale over qk_dim,
/// softmax with max subtraction, out[d] = sum_t p_t v_t[d] (v_dim wide) in t order. Row t of k starts at
/// k + t * k_stride (v likewise). With `sink` non-null, the sink logit joins the softmax denominator (and the
/// max) but has no value row: transformers modeling_gpt_oss.py eager_attention_forward (combined_logits, the sink
/// column dropped after the softmax). `scores` is scratch of at least first + length floats.
void attend_head_window(const float* q, const float* k, int64_t k_stride, int qk_dim, const float* v,
                        int64_t v_stride, int v_dim, int64_t first, int64_t length, float scale, const float* sink,
                        float* scores, float* out);

/// Indices of the `k` largest of `values[0..n)`, largest first; equal values go to the lower index first.
/// `out` receives k ints; 0 < k <= n.
void top_k_indices(const float* values, int n, int k, int* out);

/// noaux_tc routing of glm4_moe and deepseek_v3 (transformers Glm4MoeMoE/DeepseekV3MoE.route_tokens_to_experts,
/// n_group = topk_group = 1): scores = sigmoid(logits); the experts are chosen by top_k of scores +
/// correction_bias (the bias steers selection only); weights = the chosen experts' scores, divided by
/// (their sum + 1e-20) when `normalize`, then multiplied by `scaling`. Writes top_k expert ids (selection order) to
/// `experts` and their weights to `weights`; `scratch` holds 2 * n floats.
void sigmoid_topk_route(const float* logits, const float* correction_bias, int n, int top_k, bool normalize,
                        float scaling, int* experts, float* weights, float* scratch);

/// gpt-oss routing (transformers GptOssTopKRouter): top_k of the router logits (bias already added), weights =
/// softmax over those k logits (max subtracted, sum in selection order).
void softmax_topk_route(const float* logits, int n, int top_k, int* experts, float* weights);

/// gpt-oss expert activation (transformers GptOssExperts, alpha 1.702): with gate = gate_up[2j] and up =
/// gate_up[2j+1] (interleaved rows), gate = min(gate, limit), up = clamp(up, -limit, limit),
/// out[j] = (up + 1) * gate * sigmoid(gate * 1.702) for j < n.
void clamped_swiglu_interleaved(const float* gate_up, int64_t n, float limit, float* out);

}  // namespace wsb
