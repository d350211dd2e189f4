#pragma once
// Facts of the quantized MoE families shared by profiles, TP layout and the forward passes. Tensor names follow
// the Hugging Face state dicts of each model type:
//   glm4_moe    transformers modeling_glm4_moe.py (Glm4MoeForCausalLM): GQA attention with q/k/v bias and partial
//               RoPE; layers < first_dense_layers have a dense MLP, the others a MoE with a sigmoid router
//               (mlp.gate.weight, mlp.gate.e_score_correction_bias), routed experts mlp.experts.<e>.*_proj and
//               shared experts mlp.shared_experts.*_proj. The MTP layer (index `layers`) is not modelled.
//   deepseek_v3 transformers modeling_deepseek_v3.py (DeepseekV3ForCausalLM): multi-head latent attention
//               (q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj), the
//               same router/expert naming as glm4_moe.
//   gpt_oss     transformers modeling_gpt_oss.py (GptOssForCausalLM): GQA with q/k/v/o bias and per-head sinks,
//               alternating sliding/full attention (layer i slides iff i is even: config layer_types), softmax
//               top-k router mlp.router.{weight,bias}, stacked experts mlp.experts.{gate_up_proj,down_proj}*
//               with gate/up interleaved along the 2*I outputs (output 2i = gate i, 2i+1 = up i): the rows of the
//               MXFP4 *_blocks, the last dim of the BF16 gate_up_proj [E, H, 2I].
#include <string>
#include <string_view>

#include "models/profile/profile.hpp"

namespace wsb {

inline constexpr std::string_view kGlm4MoeFamily = "glm4_moe";
inline constexpr std::string_view kDeepseekV3Family = "deepseek_v3";
inline constexpr std::string_view kGptOssFamily = "gpt_oss";

/// Quantization methods (ModelProfile::quantization).
inline constexpr std::string_view kQuantNone = "none";
/// compressed-tensors FP8 "channel" strategy (llm-compressor): every Linear except lm_head and the router holds
/// weight F8_E4M3 [out, in] and weight_scale F32 [out, 1]; value = e4m3(weight) * weight_scale[row].
inline constexpr std::string_view kQuantFp8Channel = "fp8-channel";
/// NVIDIA ModelOpt NVFP4 on routed experts only: weight U8 [N, K/2] (two E2M1 codes per byte, low nibble = even
/// k), weight_scale F8_E4M3 [N, K/16], weight_scale_2 F32 [], input_scale F32 [];
/// value(n, k) = e2m1(code) * e4m3(weight_scale[n][k/16]) * weight_scale_2.
inline constexpr std::string_view kQuantNvfp4 = "nvfp4";
/// OCP MXFP4 as shipped by gpt-oss: *_blocks U8 [E, N, K/32, 16] (E2M1 pairs, low nibble = even k),
/// *_scales U8 [E, N, K/32] (E8M0 codes, 2^(code-127)); value(e, n, k) = e2m1(code) * 2^(scale-127).
inline constexpr std::string_view kQuantMxfp4 = "mxfp4";

inline constexpr int kNvfp4Block = 16;  ///< elements per NVFP4 weight_scale (ModelOpt group_size 16)
inline constexpr int kMxfp4Block = 32;  ///< elements per MXFP4 scale (OCP MX block size 32)

/// True for the three MoE families above.
bool is_moe_family(std::string_view family);
/// True when `layer` has a MoE MLP (layer >= first_dense_layers; every gpt_oss layer).
bool is_moe_layer(const ModelDims& dims, int layer);
/// gpt_oss: true when `layer` uses sliding-window attention (even layers, config layer_types).
bool gpt_oss_is_sliding(int layer);
/// deepseek_v3: q head dim = qk_nope_head_dim + qk_rope_head_dim.
int mla_qk_head_dim(const ModelDims& dims);
/// Shared-expert MLP intermediate = shared_experts * moe_intermediate (transformers' DeepseekV3MoE/Glm4MoeMoE).
int shared_intermediate(const ModelDims& dims);
/// "model.layers.<layer>.mlp.experts.<expert>.<leaf>"
std::string expert_tensor_name(int layer, int expert, std::string_view leaf);

}  // namespace wsb
