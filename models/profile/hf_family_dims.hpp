#pragma once
// ModelDims of each family from a Hugging Face config.json: the decoder's config object (the top level, or the
// text_config of a Kimi K2.5/K2.6 wrapper). Key names and defaults are transformers' (>= 5) configuration classes':
//   llama       configuration_llama.py LlamaConfig: num_key_value_heads = num_attention_heads, head_dim =
//               hidden_size / num_attention_heads, rope_theta 10000, rms_norm_eps 1e-6, tie_word_embeddings false;
//               hidden_act silu, attention_bias / mlp_bias false, rope_type default or llama3 (applied as plain RoPE,
//               forward.hpp).
//   glm4_moe    modular_glm4_moe.py Glm4MoeConfig: n_routed_experts, n_shared_experts (1), num_experts_per_tok,
//               first_k_dense_replace (1), norm_topk_prob (true), routed_scaling_factor (1.0), n_group / topk_group
//               (1), use_qk_norm (false), attention_bias (false), rms_norm_eps (1e-5), head_dim (hidden_size /
//               num_attention_heads: Glm4MoeAttention reads getattr(config, "head_dim", ...)),
//               partial_rotary_factor (rope_parameters.partial_rotary_factor, else top level, else 0.5: the BC
//               default of Glm4MoeConfig.__post_init__), rope_type default.
//   deepseek_v3 configuration_deepseek_v3.py DeepseekV3Config: n_shared_experts (1), first_k_dense_replace (3),
//               n_group (8), topk_group (4), routed_scaling_factor (2.5), norm_topk_prob (true), rms_norm_eps
//               (1e-6), rope_interleave (true), attention_bias (false), rope_type default or yarn; the hub configs'
//               scoring_func (sigmoid), topk_method (noaux_tc), moe_layer_freq (1) (deepseek-ai/DeepSeek-V3,
//               moonshotai/Kimi-K2). num_key_value_heads and head_dim (= qk_rope_head_dim) are not read: MLA
//               derives both from the latent ranks.
//   gpt_oss     configuration_gpt_oss.py GptOssConfig: num_local_experts, num_experts_per_tok (openai's
//               experts_per_token; 4), head_dim, sliding_window, layer_types (sliding on even layers),
//               swiglu_limit (7.0, modeling_gpt_oss.py), rms_norm_eps (1e-5), rope_theta 150000, rope_type default
//               or yarn; attention_bias is always true in GptOssConfig.
// Structural sizes (layers, hidden, intermediate, heads, vocab, expert counts, latent ranks) are required. A field
// whose value the reference forward does not implement is refused naming it: group-limited routing (n_group or
// topk_group > 1), scoring other than sigmoid, topk_method other than noaux_tc, q/k norms, q_lora_rank null,
// non-interleaved MLA RoPE, tied embeddings of the MoE families, biases of llama, a rope_type the family does not
// apply, layer_types other than gpt-oss's alternation. Every function then runs the family's dims checks
// (validate_llama_dims / validate_*_dims), naming the config key. Throws Error(Format)
// "<config.json>: field '<dotted key>': <why>".
#include <string_view>

#include "models/profile/json_fields.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

ModelDims hf_llama_dims(const JsonFields& cfg);
ModelDims hf_glm4_moe_dims(const JsonFields& cfg, std::string_view quantization);
ModelDims hf_deepseek_v3_dims(const JsonFields& cfg, std::string_view quantization);
ModelDims hf_gpt_oss_dims(const JsonFields& cfg, std::string_view quantization);

/// num_nextn_predict_layers of a glm4_moe / deepseek_v3 config (0 when absent): multi-token-prediction layers stored
/// after the decoder (model.layers.<num_hidden_layers + i>). Throws Error(Format) when negative.
int hf_mtp_layers(const JsonFields& cfg);

}  // namespace wsb
