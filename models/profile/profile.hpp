#pragma once
// Model profiles: the real architecture of one model (models/profiles/<id>.json), or a Hugging Face
// checkpoint directory's config.json. A profile expands to the canonical tensor list.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor_spec.hpp"

namespace wsb {

/// YaRN rotary scaling (rope_scaling {"type": "yarn", ...} of the deepseek_v3 and gpt_oss configs).
/// `factor` 0 means no scaling (plain RoPE with rope_theta). Field names follow the upstream config keys.
struct RopeScaling {
  double factor = 0.0;
  int original_max_position = 0;  ///< original_max_position_embeddings
  double beta_fast = 0.0;
  double beta_slow = 0.0;
  double mscale = 0.0;          ///< deepseek_v3 only (0 when unused)
  double mscale_all_dim = 0.0;  ///< deepseek_v3 only (0 when unused)
  /// Round the correction range to whole dims (transformers' default true; openai/gpt-oss-120b config false).
  bool truncate = true;
};

/// Architecture dimensions. Fields a family does not use stay 0 (or the stated neutral default). Sources are cited
/// in each profile JSON; the per-family meaning of each field is in models/profile/moe_family.hpp.
struct ModelDims {
  int layers = 0;
  int hidden = 0;
  int intermediate = 0;  ///< dense MLP intermediate (llama, and the first_dense_layers of glm4_moe/deepseek_v3);
                         ///< gpt_oss: the expert intermediate (its config calls it intermediate_size)
  int heads = 0;
  int kv_heads = 0;  ///< GQA kv heads (llama, glm4_moe, gpt_oss); deepseek_v3 (MLA): 0
  int head_dim = 0;  ///< attention head dim (llama, glm4_moe, gpt_oss); deepseek_v3: 0 (see qk_*/v_head_dim)
  int vocab = 0;
  double rope_theta = 10000.0;
  double rms_eps = 1e-5;
  bool tie_embeddings = false;

  // Mixture of experts (glm4_moe, deepseek_v3, gpt_oss).
  int moe_intermediate = 0;     ///< routed expert intermediate (glm4_moe, deepseek_v3); gpt_oss uses `intermediate`
  int experts = 0;              ///< routed experts per MoE layer (after the `experts` scaling knob)
  int shared_experts = 0;       ///< shared experts; their MLP intermediate is shared_experts * moe_intermediate
  int top_k = 0;                ///< experts per token
  int first_dense_layers = 0;   ///< layers [0, first_dense_layers) use a dense MLP (first_k_dense_replace)
  bool norm_topk_prob = false;  ///< renormalize the top-k routing weights to sum 1
  double routed_scaling_factor = 1.0;  ///< multiplies the routed experts' weighted sum

  // Multi-head latent attention (deepseek_v3).
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;

  // Attention variants.
  bool attention_bias = false;         ///< q/k/v (and for gpt_oss o) projections carry a bias
  double partial_rotary_factor = 1.0;  ///< fraction of head_dim that RoPE rotates (glm4_moe: 0.5)
  int sliding_window = 0;              ///< gpt_oss: window of the sliding-attention layers (even layers)
  double swiglu_limit = 0.0;           ///< gpt_oss: clamp of the SwiGLU inputs (7.0); 0 = no clamp
  RopeScaling rope_scaling;
};

/// One model profile. `family` selects tensor naming, TP layout and forward pass: "llama" (dense GQA),
/// "glm4_moe", "deepseek_v3", "gpt_oss" (models/profile/moe_family.hpp).
struct ModelProfile {
  std::string id;
  std::string family;
  std::string description;
  std::string quantization = "none";  ///< quantization method: "none", "fp8-channel", "nvfp4", "mxfp4"
  DType dtype = DType::BF16;          ///< dtype of unquantized weights
  ModelDims dims;
  bool tiny = false;             ///< CI preset (not a real model)
  std::string tensor_prefix;     ///< prepended to every canonical tensor name (deepseek_v3 only, e.g.
                                 ///< "language_model." for Kimi K2.5/K2.6); runtime names never carry it
  std::filesystem::path hf_dir;  ///< set when built from a real HF checkpoint directory
  nlohmann::json raw;            ///< the profile JSON as loaded (for reports)

  /// Canonical checkpoint tensors (HF naming), in a fixed order: embed, per layer, final norm, lm_head.
  std::vector<TensorSpec> canonical_tensors() const;
  /// Sum of canonical tensor bytes.
  uint64_t canonical_bytes() const;
};

/// Scaling knobs: drop whole layers and, for MoE families, experts (keep the first N of every MoE layer), keeping
/// every per-expert tensor shape real. The constructor (not an aggregate) lets callers write ProfileScale{layers}.
struct ProfileScale {
  std::optional<int> layers;
  std::optional<int> experts;

  ProfileScale() = default;
  ProfileScale(std::optional<int> layers_, std::optional<int> experts_ = std::nullopt)
      : layers(layers_), experts(experts_) {}
};

/// Parses a profile JSON file. Throws wsb::Error(Format) naming the file and the field.
ModelProfile load_profile(const std::filesystem::path& json_path);
/// Parses profile JSON already in memory; `origin` names it in errors.
ModelProfile parse_profile(const nlohmann::json& j, const std::string& origin);
/// Finds `<dir>/<id>.json`. Throws Error(Missing) listing the known ids.
ModelProfile find_profile(const std::string& id, const std::filesystem::path& profiles_dir);

/// The profiles folder when none is given: $WSBENCH_PROFILES, else ./models/profiles when present, else the source
/// tree's models/profiles.
std::filesystem::path default_profiles_dir();
/// Every profile in `dir`, sorted by id.
std::vector<ModelProfile> list_profiles(const std::filesystem::path& profiles_dir);
/// Profile from a Hugging Face checkpoint directory: profile_from_hf_config, then check_hf_checkpoint
/// (models/profile/hf_checkpoint_check.hpp) against the checkpoint's safetensors headers, so a profile this returns
/// describes the directory's tensors exactly. The entry point for every user of a Hugging Face directory. Throws
/// what the two throw.
ModelProfile profile_from_hf_dir(const std::filesystem::path& dir);
/// The config.json half of profile_from_hf_dir (reads no tensor): model_type llama, glm4_moe, deepseek_v3, gpt_oss,
/// or kimi_k25 (Kimi K2.5/K2.6: the deepseek_v3 decoder described by text_config, every tensor under
/// "language_model.", tensor_prefix); quantization from quantization_config (models/profile/hf_quantization.hpp;
/// absent = unquantized weights of `dtype` / `torch_dtype`). Key names, defaults and what is refused:
/// models/profile/hf_family_dims.hpp. id "hf:<directory name>", hf_dir = dir, raw = the config as parsed.
/// Throws Error(Missing) when config.json cannot be opened, Error(Format) "<dir>/config.json: field '<key>': <why>"
/// for invalid JSON, an unsupported model_type, quantization method or field value.
ModelProfile profile_from_hf_config(const std::filesystem::path& dir);
/// Applies scaling knobs; the id gets a suffix per knob, "@layers=2" then "@experts=8". Router, correction bias and
/// stacked expert tensors (gpt_oss) shrink to the kept experts. Throws Error(Format) if a knob is out of range
/// (layers in 1..layers, experts in top_k..experts) or the family has no experts.
ModelProfile scale_profile(const ModelProfile& profile, const ProfileScale& scale);
/// The id of the profile a (possibly scaled) profile id came from: everything before the first scaling suffix
/// ("llama-3.1-8b-bf16@layers=4" -> "llama-3.1-8b-bf16"), for a command line that takes the base id plus knobs.
std::string_view base_profile_id(std::string_view id);

}  // namespace wsb
