// config.json of a FULL checkpoint (declared in hf_config_write.hpp). Where each key name comes from:
// - llama: transformers configuration_llama.py (LlamaConfig); the keys profile_from_hf_dir reads back.
// - glm4_moe: transformers configuration_glm4_moe.py (Glm4MoeConfig: n_routed_experts, n_shared_experts,
//   first_k_dense_replace, partial_rotary_factor, n_group, topk_group, use_qk_norm) and the zai-org/GLM-4.5-Air-FP8
//   config.json cited in the profile's "source" (head_dim, num_nextn_predict_layers).
// - deepseek_v3: transformers configuration_deepseek_v3.py (DeepseekV3Config: MLA ranks, n_routed_experts,
//   first_k_dense_replace, n_group / topk_group whose defaults 8 / 4 must be overridden, num_key_value_heads whose
//   default 128 must be overridden) and the moonshotai/Kimi-K2 config.json of the profile's "source" (topk_method,
//   scoring_func, moe_layer_freq, rope_scaling with "type"). The Kimi K2.5 wrapper: SGLang configs/kimi_k25.py
//   (KimiK25Config: text_config parsed as a DeepseekV3Config) and models/kimi_k25.py (load_weights strips
//   "language_model." from every tensor name, vision tower weights optional).
// - gpt_oss: transformers configuration_gpt_oss.py (GptOssConfig: num_local_experts, num_experts_per_tok,
//   layer_types, sliding_window, swiglu_limit, attention_bias) and openai/gpt-oss-120b config.json
//   (experts_per_token, rope_scaling with "rope_type" and truncate false, quantization_config).
// quantization_config:
// - fp8-channel: compressed-tensors (quant_method "compressed-tensors", format "float-quantized", one config
//   group targeting Linear: weights 8-bit float strategy "channel", input_activations 8-bit float strategy
//   "token" dynamic), as zai-org/GLM-4.5-Air-FP8 ships it. Not {"quant_method": "fp8"}: SGLang's / vLLM's Fp8Config
//   without weight_block_size expects one per-tensor weight_scale per output partition (fp8.py, Fp8LinearMethod),
//   not wsbench's F32 weight_scale [out, 1]; and wsbench's FP8 has no block scales (weight_scale_inv).
// - nvfp4: ModelOpt's config.json form as SGLang (modelopt_quant.py, ModelOptFp4Config.from_config, "flat format")
//   and vLLM (modelopt.py) parse it: quant_method "modelopt", quant_algo "NVFP4", group_size 16, ignore = the
//   unquantized modules as glob patterns (hf_quant_config.json calls that list exclude_modules).
// - mxfp4: openai/gpt-oss-120b config.json: quant_method "mxfp4", modules_to_not_convert.
#include "models/profile/hf_config_write.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "core/errors.hpp"
#include "models/profile/family_quantization.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

namespace {

using nlohmann::json;

/// Context length of the profiles without YaRN (meta-llama/Llama-3.1-8B and zai-org/GLM-4.5-Air config.json).
constexpr int64_t kDefaultMaxPositions = 131072;

[[noreturn]] void fail(const ModelProfile& p, const std::string& why) {
  throw Error(ErrorKind::Format, fmt::format("profile '{}': cannot write config.json: {}", p.id, why));
}

std::string torch_dtype(const ModelProfile& p) {
  switch (p.dtype) {
    case DType::BF16: return "bfloat16";
    case DType::F16: return "float16";
    case DType::F32: return "float32";
    default: fail(p, fmt::format("weight dtype {} has no torch_dtype", dtype_name(p.dtype)));
  }
}

int64_t max_positions(const ModelDims& d) {
  if (d.rope_scaling.factor <= 0.0) return kDefaultMaxPositions;
  return std::llround(d.rope_scaling.factor * d.rope_scaling.original_max_position);
}

/// Keys every family shares (the transformers PretrainedConfig / per-model config spellings agree on these).
json common_keys(const ModelProfile& p) {
  const ModelDims& d = p.dims;
  return json{{"hidden_size", d.hidden},
              {"intermediate_size", d.intermediate},
              {"num_hidden_layers", d.layers},
              {"num_attention_heads", d.heads},
              {"vocab_size", d.vocab},
              {"rope_theta", d.rope_theta},
              {"rms_norm_eps", d.rms_eps},
              {"tie_word_embeddings", d.tie_embeddings},
              {"hidden_act", "silu"},
              {"max_position_embeddings", max_positions(d)},
              {"torch_dtype", torch_dtype(p)}};
}

json llama_config(const ModelProfile& p) {
  json j = common_keys(p);
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["num_key_value_heads"] = p.dims.kv_heads;
  j["head_dim"] = p.dims.head_dim;
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  return j;
}

/// compressed-tensors channel FP8 of glm4_moe: every Linear but lm_head and the routers (mlp.gate of each MoE
/// layer), as models/profile/moe_tensors.cpp lays the tensors out. The ignore list names modules exactly.
json fp8_channel_quantization(const ModelProfile& p) {
  json ignore = json::array({"lm_head"});
  for (int i = 0; i < p.dims.layers; ++i)
    if (is_moe_layer(p.dims, i)) ignore.push_back(llama_layer_name(i, "mlp.gate"));
  const json weights = {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"},
                        {"symmetric", true}, {"dynamic", false}, {"group_size", nullptr}};
  const json activations = {{"num_bits", 8}, {"type", "float"}, {"strategy", "token"},
                            {"symmetric", true}, {"dynamic", true}, {"group_size", nullptr}};
  return json{{"quant_method", "compressed-tensors"},
              {"format", "float-quantized"},
              {"quantization_status", "compressed"},
              {"config_groups",
               {{"group_0",
                 {{"targets", {"Linear"}},
                  {"weights", weights},
                  {"input_activations", activations},
                  {"output_activations", nullptr}}}}},
              {"ignore", ignore},
              {"kv_cache_scheme", nullptr}};
}

json glm4_moe_config(const ModelProfile& p) {
  const ModelDims& d = p.dims;
  json j = common_keys(p);
  j["architectures"] = {"Glm4MoeForCausalLM"};
  j["model_type"] = "glm4_moe";
  j["num_key_value_heads"] = d.kv_heads;
  j["head_dim"] = d.head_dim;  // not hidden / heads (GLM-4.5-Air: 4096 / 96 is no integer)
  j["partial_rotary_factor"] = d.partial_rotary_factor;
  j["attention_bias"] = d.attention_bias;
  j["moe_intermediate_size"] = d.moe_intermediate;
  j["n_routed_experts"] = d.experts;
  j["n_shared_experts"] = d.shared_experts;
  j["num_experts_per_tok"] = d.top_k;
  j["first_k_dense_replace"] = d.first_dense_layers;
  j["norm_topk_prob"] = d.norm_topk_prob;
  j["routed_scaling_factor"] = d.routed_scaling_factor;
  // wsbench's glm4_moe routing (sigmoid + e_score_correction_bias) has one group and no q/k norm; the MTP layer
  // is not part of the profile (moe_family.hpp).
  j["n_group"] = 1;
  j["topk_group"] = 1;
  j["use_qk_norm"] = false;
  j["num_nextn_predict_layers"] = 0;
  if (p.quantization == kQuantFp8Channel) j["quantization_config"] = fp8_channel_quantization(p);
  return j;
}

/// ModelOpt NVFP4 of deepseek_v3: only routed experts are NVFP4 (moe_tensors.cpp); everything else is BF16.
/// Patterns are ModelOpt-style globs over module names with the tensor prefix.
json nvfp4_quantization(const ModelProfile& p) {
  const std::string& pre = p.tensor_prefix;
  json ignore = json::array({pre + "lm_head", pre + "model.layers.*.self_attn*",
                             pre + "model.layers.*.mlp.shared_experts*", pre + "model.layers.*.mlp.gate"});
  for (int i = 0; i < p.dims.layers; ++i)
    if (!is_moe_layer(p.dims, i)) ignore.push_back(pre + llama_layer_name(i, "mlp*"));
  return json{{"quant_method", "modelopt"},
              {"quant_algo", "NVFP4"},
              {"group_size", kNvfp4Block},
              {"ignore", ignore},
              {"kv_cache_scheme", nullptr}};
}

json deepseek_v3_text_config(const ModelProfile& p) {
  const ModelDims& d = p.dims;
  json j = common_keys(p);
  j["architectures"] = {"DeepseekV3ForCausalLM"};
  j["model_type"] = "deepseek_v3";
  j["num_key_value_heads"] = d.heads;  // MLA: one latent KV per head
  j["q_lora_rank"] = d.q_lora_rank;
  j["kv_lora_rank"] = d.kv_lora_rank;
  j["qk_nope_head_dim"] = d.qk_nope_head_dim;
  j["qk_rope_head_dim"] = d.qk_rope_head_dim;
  j["v_head_dim"] = d.v_head_dim;
  j["attention_bias"] = false;
  j["moe_intermediate_size"] = d.moe_intermediate;
  j["n_routed_experts"] = d.experts;
  j["n_shared_experts"] = d.shared_experts;
  j["num_experts_per_tok"] = d.top_k;
  j["first_k_dense_replace"] = d.first_dense_layers;
  j["moe_layer_freq"] = 1;
  j["norm_topk_prob"] = d.norm_topk_prob;
  j["routed_scaling_factor"] = d.routed_scaling_factor;
  // wsbench's deepseek_v3 routing: sigmoid scores + e_score_correction_bias (noaux_tc) over one group; no MTP.
  j["topk_method"] = "noaux_tc";
  j["scoring_func"] = "sigmoid";
  j["n_group"] = 1;
  j["topk_group"] = 1;
  j["num_nextn_predict_layers"] = 0;
  const RopeScaling& s = d.rope_scaling;
  if (s.factor > 0.0) {
    j["rope_scaling"] = {{"type", "yarn"},
                         {"factor", s.factor},
                         {"original_max_position_embeddings", s.original_max_position},
                         {"beta_fast", s.beta_fast},
                         {"beta_slow", s.beta_slow},
                         {"mscale", s.mscale},
                         {"mscale_all_dim", s.mscale_all_dim}};
  }
  return j;
}

json deepseek_v3_config(const ModelProfile& p) {
  json text = deepseek_v3_text_config(p);
  const bool nvfp4 = p.quantization == kQuantNvfp4;
  if (p.tensor_prefix.empty()) {
    if (nvfp4) text["quantization_config"] = nvfp4_quantization(p);
    return text;
  }
  if (p.tensor_prefix != "language_model.")
    fail(p, fmt::format("no Hugging Face architecture is known for tensor_prefix '{}' (known: language_model.)",
                        p.tensor_prefix));
  // Kimi K2.5/K2.6 checkpoints: the decoder under language_model.*, described by text_config; the vision tower is
  // not part of the profile (its weights are simply absent).
  text.erase("architectures");
  json j{{"architectures", {"KimiK25ForConditionalGeneration"}},
         {"model_type", "kimi_k25"},
         {"text_config", text},
         {"tie_word_embeddings", p.dims.tie_embeddings},
         {"torch_dtype", torch_dtype(p)}};
  if (nvfp4) j["quantization_config"] = nvfp4_quantization(p);
  return j;
}

json gpt_oss_config(const ModelProfile& p) {
  const ModelDims& d = p.dims;
  json j = common_keys(p);
  j["architectures"] = {"GptOssForCausalLM"};
  j["model_type"] = "gpt_oss";
  j["num_key_value_heads"] = d.kv_heads;
  j["head_dim"] = d.head_dim;
  j["num_local_experts"] = d.experts;
  j["num_experts_per_tok"] = d.top_k;
  j["experts_per_token"] = d.top_k;
  j["sliding_window"] = d.sliding_window;
  json layer_types = json::array();
  for (int i = 0; i < d.layers; ++i) layer_types.push_back(gpt_oss_is_sliding(i) ? "sliding_attention" : "full_attention");
  j["layer_types"] = layer_types;
  j["swiglu_limit"] = d.swiglu_limit;
  j["attention_bias"] = d.attention_bias;
  const RopeScaling& s = d.rope_scaling;
  if (s.factor > 0.0) {
    j["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", s.factor},
                         {"original_max_position_embeddings", s.original_max_position},
                         {"beta_fast", s.beta_fast},
                         {"beta_slow", s.beta_slow},
                         {"truncate", s.truncate}};
  }
  // BF16 experts (quantization none) carry no quantization_config, as transformers' save_pretrained of an
  // unquantized GptOssForCausalLM writes none.
  if (p.quantization == kQuantMxfp4) {
    j["quantization_config"] = {
        {"quant_method", "mxfp4"},
        {"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
                                    "lm_head"}}};
  }
  return j;
}

std::string read_hf_config_bytes(const ModelProfile& p) {
  const std::filesystem::path path = p.hf_dir / kHfConfigFileName;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::Missing, fmt::format("{}: cannot open Hugging Face config", path.string()));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(ErrorKind::Io, fmt::format("{}: read failed", path.string()));
  return bytes;
}

/// The quantization must be one the family supports (family_quantization.hpp); each mapping writes every one.
void require_quantization(const ModelProfile& p) {
  if (!family_supports_quantization(p.family, p.quantization))
    fail(p, fmt::format("family {} with quantization '{}' has no mapping (supported: {})", p.family, p.quantization,
                        family_quantization_list(p.family)));
}

/// A Hugging Face directory's config with the scaling knobs applied where its family keeps the counts: the
/// decoder config (text_config of the Kimi wrapper) gets num_hidden_layers and the routed expert count.
void apply_scale(const ModelProfile& p, json& j) {
  json& text = !p.tensor_prefix.empty() && j.contains("text_config") ? j["text_config"] : j;
  text["num_hidden_layers"] = p.dims.layers;
  if (p.family == kGlm4MoeFamily || p.family == kDeepseekV3Family) text["n_routed_experts"] = p.dims.experts;
  if (p.family == kGptOssFamily) text["num_local_experts"] = p.dims.experts;
}

}  // namespace

json hf_config_json(const ModelProfile& p) {
  if (!p.hf_dir.empty()) {
    const std::string bytes = read_hf_config_bytes(p);
    json j;
    try {
      j = json::parse(bytes);
    } catch (const json::exception& e) {
      throw Error(ErrorKind::Format,
                  fmt::format("{}: invalid JSON: {}", (p.hf_dir / kHfConfigFileName).string(), e.what()));
    }
    apply_scale(p, j);
    return j;
  }
  if (p.family == kLlamaFamily) {
    require_quantization(p);
    return llama_config(p);
  }
  if (p.family == kGlm4MoeFamily) {
    require_quantization(p);
    return glm4_moe_config(p);
  }
  if (p.family == kDeepseekV3Family) {
    require_quantization(p);
    return deepseek_v3_config(p);
  }
  if (p.family == kGptOssFamily) {
    require_quantization(p);
    return gpt_oss_config(p);
  }
  fail(p, fmt::format("family '{}' has no mapping", p.family));
}

std::string hf_config_text(const ModelProfile& p) {
  if (!p.hf_dir.empty() && base_profile_id(p.id) == p.id) return read_hf_config_bytes(p);
  return hf_config_json(p).dump(2) + "\n";
}

}  // namespace wsb
