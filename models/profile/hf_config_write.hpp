#pragma once
// The Hugging Face config.json of a checkpoint written from a model profile, so that a transformers-style loader
// (an SGLang fork started with `--model-path <FULL dir>`) can boot from a FULL checkpoint that wsbench publishes.
// Key names per family follow the upstream configuration classes and hub configs; quantization_config follows
// the public checkpoint format of each method. Sources are cited next to each mapping in hf_config_write.cpp.
// wsbench itself never reads the file back except through profile_from_hf_dir, which accepts every form written here.
#include <nlohmann/json.hpp>
#include <string>

#include "models/profile/profile.hpp"

namespace wsb {

/// File name of the Hugging Face config in a FULL checkpoint directory. An expected file beside the index and the
/// shards that no wsbench reader opens (CheckpointReader, Publication, inspect, the sync modes); only
/// profile_from_hf_dir reads it, so a bad config.json never makes a publication unreadable to wsbench.
inline constexpr const char* kHfConfigFileName = "config.json";

/// config.json of a checkpoint of `profile`, with the dims as scaled (num_hidden_layers, and n_routed_experts /
/// num_local_experts, after the `layers` / `experts` knobs):
/// - llama: LlamaForCausalLM, model_type "llama" (transformers LlamaConfig keys, no rope_scaling: the synthetic
///   checkpoint is defined with plain RoPE).
/// - glm4_moe: Glm4MoeForCausalLM, model_type "glm4_moe" (Glm4MoeConfig keys), quantization_config of
///   compressed-tensors FP8, strategy "channel" weights and dynamic per-token activations, for fp8-channel; no
///   quantization_config for quantization none.
/// - deepseek_v3: DeepseekV3ForCausalLM, model_type "deepseek_v3" (DeepseekV3Config keys); with tensor_prefix
///   "language_model." (Kimi K2.5/K2.6 naming) the Kimi K2.5 wrapper KimiK25ForConditionalGeneration, model_type
///   "kimi_k25", holding those keys as text_config. quantization_config of ModelOpt NVFP4 (routed experts only) for
///   nvfp4, none for quantization none.
/// - gpt_oss: GptOssForCausalLM, model_type "gpt_oss" (GptOssConfig keys), quantization_config of MXFP4 for
///   mxfp4, none for BF16 experts (quantization none).
/// max_position_embeddings is factor * original_max_position_embeddings for YaRN profiles, else 131072 (the
/// value of Llama-3.1-8B and GLM-4.5-Air; profiles do not record it).
/// A profile read from a Hugging Face directory (hf_dir set) gives that directory's config.json as parsed, with
/// num_hidden_layers and the routed expert count (n_routed_experts, num_local_experts) set to the (possibly scaled)
/// counts, in text_config for the Kimi wrapper.
/// Throws Error(Format) naming the profile for a family, quantization or tensor prefix without a mapping;
/// Error(Missing) / Error(Format) naming the file when hf_dir's config.json cannot be opened / parsed.
nlohmann::json hf_config_json(const ModelProfile& profile);

/// The bytes written as config.json: for an unscaled profile with hf_dir, that directory's config.json copied
/// verbatim; otherwise hf_config_json(profile).dump(2) and a newline (keys sorted, so the bytes are a pure
/// function of the profile). Throws as hf_config_json, Error(Io) when hf_dir's config.json cannot be read.
std::string hf_config_text(const ModelProfile& profile);

}  // namespace wsb
