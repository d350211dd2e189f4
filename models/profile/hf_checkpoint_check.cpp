#include "models/profile/hf_checkpoint_check.hpp"

#include <fmt/format.h>

#include <set>
#include <string>

#include "core/errors.hpp"
#include "models/checkpoint/checkpoint.hpp"
#include "models/profile/hf_config_write.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"
#include "models/quant/quant_role.hpp"

namespace wsb {

namespace {

constexpr const char* kVisionPrefixes[] = {"vision_tower.", "mm_projector."};

/// The leaves an MTP layer adds to a decoder layer (DeepSeek-V3 README_WEIGHTS.md, SGLang deepseek_nextn.py).
constexpr const char* kMtpLeaves[] = {"embed_tokens.weight", "enorm.weight",          "hnorm.weight",
                                      "eh_proj.weight",      "shared_head.norm.weight", "shared_head.head.weight"};

std::string describe(const TensorSpec& t) { return fmt::format("{} {}", dtype_name(t.dtype), shape_string(t.shape)); }

/// Weight codes, scales of any kind and activation scales: what a quantization_config decides.
bool quantized(const TensorSpec& t) {
  const QuantRole role = quant_role(t);
  return role.method != QuantMethod::None || role.part != QuantPart::Plain;
}

/// The decoder's config object inside raw (text_config of the Kimi wrapper).
const nlohmann::json& decoder_config(const ModelProfile& p) {
  if (!p.tensor_prefix.empty() && p.raw.contains("text_config") && p.raw.at("text_config").is_object())
    return p.raw.at("text_config");
  return p.raw;
}

std::string quantization_summary(const ModelProfile& p) {
  if (p.quantization == kQuantFp8Channel) return "compressed-tensors channel FP8";
  if (p.quantization == kQuantNvfp4) return "ModelOpt NVFP4 routed experts";
  if (p.quantization == kQuantMxfp4) return "MXFP4 experts";
  return fmt::format("absent: unquantized {} weights", dtype_name(p.dtype));
}

/// Names of the tensors the profile does not model but the checkpoint may hold (see the header).
std::set<std::string, std::less<>> tolerated_extras(const ModelProfile& p) {
  std::set<std::string, std::less<>> names;
  if (p.family != kGlm4MoeFamily && p.family != kDeepseekV3Family) return names;
  const nlohmann::json& cfg = decoder_config(p);
  const auto it = cfg.find("num_nextn_predict_layers");
  const int mtp = it != cfg.end() && it->is_number_integer() ? it->get<int>() : 0;
  if (mtp <= 0) return names;
  ModelProfile with_mtp = p;
  with_mtp.dims.layers = p.dims.layers + mtp;
  for (int i = 0; i < mtp; ++i) {
    const std::string layer = p.tensor_prefix + llama_layer_name(p.dims.layers + i, "");
    for (const char* leaf : kMtpLeaves) names.insert(layer + leaf);
    if (p.quantization == kQuantFp8Channel) names.insert(layer + "eh_proj.weight_scale");
  }
  for (const TensorSpec& t : with_mtp.canonical_tensors()) {
    for (int i = 0; i < mtp; ++i)
      if (t.name.starts_with(p.tensor_prefix + llama_layer_name(p.dims.layers + i, ""))) names.insert(t.name);
  }
  return names;
}

bool tolerated_prefix(const ModelProfile& p, std::string_view name) {
  if (p.tensor_prefix.empty()) return false;  // only the Kimi wrapper carries a vision tower
  for (const char* prefix : kVisionPrefixes)
    if (name.starts_with(prefix)) return true;
  return false;
}

}  // namespace

void check_hf_checkpoint(const ModelProfile& p) {
  const std::filesystem::path& dir = p.hf_dir;
  const std::string config = (dir / kHfConfigFileName).string();
  const CheckpointReader reader(dir);
  const std::string index = std::filesystem::exists(dir / kIndexFileName) ? (dir / kIndexFileName).string()
                                                                           : (dir / "model.safetensors").string();
  auto quant_field = [&] {
    return fmt::format("{}: field 'quantization_config' ({})", config, quantization_summary(p));
  };
  std::set<std::string, std::less<>> expected_names;
  for (const TensorSpec& want : p.canonical_tensors()) {
    expected_names.insert(want.name);
    if (!reader.contains(want.name)) {
      if (quantized(want))
        throw Error(ErrorKind::Mismatch, fmt::format("{} does not match the checkpoint: tensor '{}' ({}) is absent "
                                                     "from {}",
                                                     quant_field(), want.name, describe(want), index));
      throw Error(ErrorKind::Mismatch, fmt::format("{}: tensor '{}' ({} from {}) is absent", index, want.name,
                                                   describe(want), config));
    }
    const TensorSpec found = reader.entry(want.name).spec();
    if (found == want) continue;
    const std::string shard = reader.shard_of(want.name).path().string();
    if (quantized(want) || quantized(found))
      throw Error(ErrorKind::Mismatch, fmt::format("{} does not match tensor '{}' in {}: expected {}, found {}",
                                                   quant_field(), want.name, shard, describe(want), describe(found)));
    throw Error(ErrorKind::Mismatch, fmt::format("{}: tensor '{}': expected {} from {}, found {}", shard, want.name,
                                                 describe(want), config, describe(found)));
  }
  if (reader.index().weight_map.size() == expected_names.size()) return;  // every name matched above
  const std::set<std::string, std::less<>> extras = tolerated_extras(p);
  for (const std::string& name : reader.tensor_names()) {
    if (expected_names.contains(name) || extras.contains(name) || tolerated_prefix(p, name)) continue;
    const TensorSpec found = reader.entry(name).spec();
    const std::string shard = reader.shard_of(name).path().string();
    if (quantized(found))
      throw Error(ErrorKind::Mismatch, fmt::format("{} does not match tensor '{}' in {} ({}): the config's layout has "
                                                   "no such tensor",
                                                   quant_field(), name, shard, describe(found)));
    throw Error(ErrorKind::Mismatch, fmt::format("{}: tensor '{}' ({}) is not part of the {} model {} describes",
                                                 shard, name, describe(found), p.family, config));
  }
}

}  // namespace wsb
