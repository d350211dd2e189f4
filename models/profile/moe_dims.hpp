#pragma once
// "dims" of the MoE families: read from a profile JSON (keys listed in profile_parse.cpp) and checked. The checks
// are shared with profile_from_hf_dir, which fills ModelDims from config.json keys and names those in errors.
#include <functional>
#include <string>
#include <string_view>

#include "models/profile/json_fields.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

/// How a source spells a dims member in error messages, given wsbench's key ("hidden", "rope_scaling.factor").
using DimFieldName = std::function<std::string(std::string_view key)>;
/// A profile JSON's spelling: "dims.<key>".
std::string profile_dim_field(std::string_view key);

/// Each parser rejects unknown keys, reads every dimension and checks them with the validate_* function of its
/// family. `quantization` is the profile's method (block-quantized methods need whole blocks along K). Throws
/// Error(Format) "<file>: field 'dims.<key>': <why>".
ModelDims parse_glm4_moe_dims(const JsonFields& dims, std::string_view quantization);
ModelDims parse_deepseek_v3_dims(const JsonFields& dims, std::string_view quantization);
ModelDims parse_gpt_oss_dims(const JsonFields& dims, std::string_view quantization);

/// Checks a family's dims: every size > 0 (shared_experts and first_dense_layers >= 0, first_dense_layers <=
/// layers), vocab >= 256 (byte vocabulary), 0 < rms_eps < 1, rope_theta > 0, top_k <= experts; GQA (glm4_moe,
/// gpt_oss): kv_heads divides heads, head_dim even; glm4_moe: head_dim * partial_rotary_factor an even integer,
/// factor in (0, 1]; deepseek_v3: qk_rope_head_dim even, nvfp4: hidden and moe_intermediate multiples of 16;
/// gpt_oss mxfp4: hidden and intermediate multiples of 32; rope_scaling (when factor > 0): factor,
/// original_max_position_embeddings, beta_fast, beta_slow > 0. Throws Error(Format)
/// "<origin>: field '<name(key)>': <why>" for the first failure.
void validate_glm4_moe_dims(const ModelDims& dims, std::string_view quantization, const std::string& origin,
                            const DimFieldName& name);
void validate_deepseek_v3_dims(const ModelDims& dims, std::string_view quantization, const std::string& origin,
                               const DimFieldName& name);
void validate_gpt_oss_dims(const ModelDims& dims, std::string_view quantization, const std::string& origin,
                           const DimFieldName& name);

}  // namespace wsb
