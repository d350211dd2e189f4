#pragma once
// Model profiles: the real architecture of one model (models/profiles/<id>.json), or a Hugging Face
// checkpoint directory's config.json. A profile expands to the canonical tensor list.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/core/tensor_spec.hpp"

namespace wsb {

/// Architecture dimensions. Fields a family does not use stay 0. Sources are cited in each profile JSON.
struct ModelDims {
  int layers = 0;
  int hidden = 0;
  int intermediate = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int vocab = 0;
  double rope_theta = 10000.0;
  double rms_eps = 1e-5;
  bool tie_embeddings = false;
};

/// One model profile. `family` selects tensor naming, TP layout and forward pass ("llama" = dense GQA).
struct ModelProfile {
  std::string id;
  std::string family;
  std::string description;
  std::string quantization = "none";  ///< quantization method; "none" = unquantized
  DType dtype = DType::BF16;          ///< dtype of unquantized weights
  ModelDims dims;
  bool tiny = false;                   ///< CI preset (not a real model)
  std::filesystem::path hf_dir;        ///< set when built from a real HF checkpoint directory
  nlohmann::json raw;                  ///< the profile JSON as loaded (for reports)

  /// Canonical checkpoint tensors (HF naming), in a fixed order: embed, per layer, final norm, lm_head.
  std::vector<TensorSpec> canonical_tensors() const;
  /// Sum of canonical tensor bytes.
  uint64_t canonical_bytes() const;
};

/// Scaling knobs: drop whole layers (and, for MoE families, experts) keeping per-tensor shapes real.
struct ProfileScale {
  std::optional<int> layers;
};

/// Parses a profile JSON file. Throws wsb::Error(Format) naming the file and the field.
ModelProfile load_profile(const std::filesystem::path& json_path);
/// Parses profile JSON already in memory; `origin` names it in errors.
ModelProfile parse_profile(const nlohmann::json& j, const std::string& origin);
/// Finds `<dir>/<id>.json`. Throws Error(Missing) listing the known ids.
ModelProfile find_profile(const std::string& id, const std::filesystem::path& profiles_dir);
/// Every profile in `dir`, sorted by id.
std::vector<ModelProfile> list_profiles(const std::filesystem::path& profiles_dir);
/// Profile from a Hugging Face checkpoint directory (config.json; model_type "llama"). Throws Error(Format).
ModelProfile profile_from_hf_dir(const std::filesystem::path& dir);
/// Applies scaling knobs; the id gets a suffix such as "@layers=2". Throws Error(Format) if out of range.
ModelProfile scale_profile(const ModelProfile& profile, const ProfileScale& scale);

}  // namespace wsb
