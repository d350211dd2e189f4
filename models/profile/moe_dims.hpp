#pragma once
// Profile JSON "dims" of the MoE families (keys listed in profile_parse.cpp), parsed and checked.
#include "models/profile/json_fields.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

/// Each parser rejects unknown keys and checks every dimension it reads. Throws Error(Format)
/// "<file>: field 'dims.<key>': <why>".
ModelDims parse_glm4_moe_dims(const JsonFields& dims);
ModelDims parse_deepseek_v3_dims(const JsonFields& dims);
ModelDims parse_gpt_oss_dims(const JsonFields& dims);
/// gpt_oss with MXFP4 experts: hidden and intermediate hold whole 32-element blocks (both are K of an expert
/// projection). Throws Error(Format) "<file>: field 'dims.<key>': <value> is not a multiple of 32 (...)".
void check_gpt_oss_mxfp4_dims(const JsonFields& dims, const ModelDims& parsed);

}  // namespace wsb
