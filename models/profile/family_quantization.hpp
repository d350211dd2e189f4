#pragma once
// Which quantization methods each family's layout, post-load transforms and forward passes implement. The profile
// parser, profile_from_hf_dir and the config.json writer all ask this one table.
#include <span>
#include <string>
#include <string_view>

namespace wsb {

/// The methods `family` supports (ModelProfile::quantization spellings), the family's reference method first:
/// llama {none}; glm4_moe {fp8-channel, none}; deepseek_v3 {nvfp4, none}; gpt_oss {mxfp4, none}. Empty for an
/// unknown family.
std::span<const std::string_view> family_quantizations(std::string_view family);
/// True when `quantization` is one of family_quantizations(family).
bool family_supports_quantization(std::string_view family, std::string_view quantization);
/// family_quantizations joined with ", " (for error messages); "none known" for an unknown family.
std::string family_quantization_list(std::string_view family);

}  // namespace wsb
