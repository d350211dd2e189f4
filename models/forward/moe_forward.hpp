#pragma once
// Reference forward passes of the quantized MoE families over their TP-sharded runtime storages (layouts:
// models/layout/moe_layout.hpp; kernels: quant_linear.hpp; shared skeleton: moe_forward_base.hpp). Each follows
// the transformers model named below in float32, reading the weights through the runtime layout at every step.
//
// YaRN rope_scaling (deepseek_v3 and gpt_oss configs) is applied as transformers does (rope_yarn.hpp): interpolated
// frequencies, cos/sin times the YaRN attention factor, and deepseek_v3's mscale^2 on the softmax scale.
// What is deliberately not modelled (the same for every engine version, so fingerprints stay comparable):
// - Activation quantization of the FP8 / NVFP4 kernels (activations stay float32; see quant_linear.hpp).
// - Multi-token-prediction layers (not part of the profiles).
#include <memory>
#include <vector>

#include "models/forward/forward.hpp"

namespace wsb {

/// glm4_moe (transformers modeling_glm4_moe.py, Glm4MoeForCausalLM) with fp8-channel or unquantized weights: GQA
/// attention with q/k/v bias and partial RoPE (rotate_half over the first int(head_dim * partial_rotary_factor) dims
/// of each head, inv_freq over that rotary dim; the rest passes through), scale head_dim^-0.5; dense MLP for layers
/// < first_dense_layers; MoE with sigmoid routing + e_score_correction_bias (selection only), norm_topk_prob,
/// routed_scaling_factor, and the shared expert. Throws as make_forward (forward.hpp) states; Error(Mismatch)
/// naming the storage when a storage does not have the layout of the profile's quantization.
std::unique_ptr<ForwardModel> make_glm4_moe_forward(const ModelProfile& profile,
                                                    const std::vector<RankLayout>& layouts,
                                                    const std::vector<RankStorageView>& storages);

/// deepseek_v3 (transformers modeling_deepseek_v3.py, DeepseekV3ForCausalLM) with NVFP4 or unquantized routed
/// experts: MLA with naive latent expansion -- q = q_b(rmsnorm(q_a(x))), [latent | k_rope] = kv_a_proj_with_mqa(x)
/// (the two down-projections come fused in one replicated storage), [k_nope | v] per head = kv_b(rmsnorm(latent));
/// RoPE (interleaved, config.rope_interleave) on q's rope part and on k_rope, which every head shares; keys [k_nope
/// | k_rope] and values cached expanded per head; scale (qk_nope + qk_rope)^-0.5 (times YaRN's mscale^2). q_a/kv_a
/// layernorms use dims.rms_eps (SGLang; transformers' default 1e-6 equals it for DeepSeek-V3 and Kimi K2). Dense
/// first layers and the shared expert are BF16; routing as glm4_moe; routed experts NVFP4 with w13 = [up; gate], or
/// unquantized with w13 = [gate; up].
std::unique_ptr<ForwardModel> make_deepseek_v3_forward(const ModelProfile& profile,
                                                       const std::vector<RankLayout>& layouts,
                                                       const std::vector<RankStorageView>& storages);

/// gpt_oss (transformers modeling_gpt_oss.py, GptOssForCausalLM) with MXFP4 experts or BF16 experts (quantization
/// none, K-major storages read as DenseKMajor): GQA with q/k/v/o biases, RoPE rotate_half over the full head_dim with
/// YaRN when rope_scaling is set (transformers' _compute_yarn_parameters: interpolated inv_freq, cos/sin times the
/// attention factor), per-head attention sinks in the softmax denominator, sliding window (keys at positions > pos -
/// sliding_window) on the layers gpt_oss_is_sliding names, scale head_dim^-0.5; router logits (+bias) -> top_k ->
/// softmax over the chosen logits; experts with biases and the clamped SwiGLU (gate <= limit, up in [-limit,
/// limit], (up + 1) * gate * sigmoid(1.702 gate)) over interleaved gate/up rows. Row-parallel biases (o_proj, expert
/// down_proj) are added once after the rank-ordered reduction, from rank 0's copy and with rank 0's routing weights.
std::unique_ptr<ForwardModel> make_gpt_oss_forward(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
                                                   const std::vector<RankStorageView>& storages);

}  // namespace wsb
