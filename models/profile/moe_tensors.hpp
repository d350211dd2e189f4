#pragma once
// Canonical (Hugging Face checkpoint) tensors of the MoE families; ModelProfile::canonical_tensors dispatches here.
#include <vector>

#include "core/tensor_spec.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

/// GLM-4.5-Air style (fp8-channel; quantization none: every linear one BF16 weight, no weight_scale): embed [V,H]
/// BF16; per layer input_layernorm [H]; self_attn.{q,k,v}_proj
/// weight F8_E4M3 [rows,H] + weight_scale F32 [rows,1] (+ bias BF16 [rows] when attention_bias), o_proj
/// [H, heads*head_dim] + scale [H,1]; post_attention_layernorm [H]; dense layers mlp.{gate,up}_proj [I,H],
/// down_proj [H,I] (+ scales); MoE layers mlp.gate.weight BF16 [E,H], mlp.gate.e_score_correction_bias F32 [E],
/// mlp.experts.<e>.{gate,up}_proj [Im,H], down_proj [H,Im] (+ scales), mlp.shared_experts.* with
/// shared_experts*Im; model.norm [H]; lm_head BF16 [V,H].
std::vector<TensorSpec> glm4_moe_tensors(const ModelProfile& profile);
/// Kimi-K2 style (nvfp4 on routed experts; quantization none: BF16 expert weights): names carry
/// profile.tensor_prefix. Per layer input_layernorm [H];
/// self_attn.q_a_proj [q_lora,H], q_a_layernorm [q_lora], q_b_proj [heads*(nope+rope), q_lora],
/// kv_a_proj_with_mqa [kv_lora+rope, H], kv_a_layernorm [kv_lora], kv_b_proj [heads*(nope+v), kv_lora],
/// o_proj [H, heads*v] (all BF16); dense/shared MLPs BF16; routed experts NVFP4: weight U8 [N,K/2],
/// weight_scale F8_E4M3 [N,K/16], weight_scale_2 F32 [], input_scale F32 [].
std::vector<TensorSpec> deepseek_v3_tensors(const ModelProfile& profile);
/// gpt-oss: per layer input_layernorm; self_attn.{q,k,v}_proj weight+bias, o_proj weight [H,q] + bias [H], sinks
/// BF16 [heads]; post_attention_layernorm; mlp.router.weight [E,H] + bias [E]; then the stacked experts.
/// mxfp4 (openai/gpt-oss-*): mlp.experts.gate_up_proj_blocks U8 [E,2I,H/32,16], _scales U8 [E,2I,H/32], _bias BF16
/// [E,2I], down_proj_blocks U8 [E,H,I/32,16], _scales U8 [E,H,I/32], _bias BF16 [E,H].
/// none (transformers GptOssExperts, modeling_gpt_oss.py, as save_pretrained writes it; SGLang gpt_oss.py
/// _load_normal_weights reads the same names): mlp.experts.gate_up_proj BF16 [E,H,2I] (x @ W; column 2j = gate j,
/// 2j+1 = up j: the forward's gate_up[..., ::2] / [..., 1::2]), gate_up_proj_bias [E,2I], down_proj [E,I,H],
/// down_proj_bias [E,H].
std::vector<TensorSpec> gpt_oss_tensors(const ModelProfile& profile);

}  // namespace wsb
