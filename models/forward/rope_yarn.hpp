#pragma once
// RoPE frequencies with YaRN scaling and the YaRN softmax-scale correction of deepseek_v3, computed as
// transformers 5 does (modeling_rope_utils.py _compute_yarn_parameters; modeling_deepseek_v3.py
// DeepseekV3Attention.__init__), so the reference forwards reproduce transformers' logits for the YaRN configs of
// deepseek_v3 (Kimi K2) and gpt_oss.
#include <vector>

#include "models/profile/profile.hpp"

namespace wsb {

/// Inverse frequencies of one rotary width and the factor transformers' rotary embedding multiplies cos and sin by
/// (its attention_scaling).
struct RopeFrequencies {
  std::vector<float> inv_freq;    ///< rotary_dim / 2 floats
  float attention_scaling = 1.0f;  ///< cos and sin are multiplied by it (float32)
};

/// `scaling.factor` == 0: plain RoPE (rope_inv_freq(theta, rotary_dim), attention_scaling 1). Otherwise YaRN over
/// `rotary_dim` dims: pos_freq[j] = theta^(2j / dim) (float32), extrapolation 1 / pos_freq, interpolation
/// 1 / (factor * pos_freq); the correction range [low, high] from beta_fast / beta_slow and
/// original_max_position_embeddings (find_correction_dim, floor/ceil when `truncate`, clamped to [0, dim - 1],
/// high + 0.001 when equal); ramp[j] = clamp((j - low) / (high - low), 0, 1); inv_freq = interpolation * ramp +
/// extrapolation * (1 - ramp), each product and sum rounded to float32 as torch's elementwise ops are.
/// attention_scaling = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) when both are non-zero,
/// else get_mscale(factor), with get_mscale(s, m) = 0.1 * m * ln(s) + 1 (1 when s <= 1).
RopeFrequencies rope_frequencies(double theta, int rotary_dim, const RopeScaling& scaling);

/// deepseek_v3's softmax scale: qk_head_dim^-0.5, times mscale^2 with mscale = get_mscale(factor, mscale_all_dim)
/// when the config has YaRN scaling with a non-zero mscale_all_dim (computed in double, rounded to float32).
float mla_softmax_scale(int qk_head_dim, const RopeScaling& scaling);

}  // namespace wsb
