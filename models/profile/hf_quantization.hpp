#pragma once
// The quantization method a Hugging Face config.json's quantization_config declares, mapped to wsbench's methods
// (ModelProfile::quantization). Accepted forms, each as the public checkpoints write it:
// - absent: unquantized weights ("none").
// - compressed-tensors channel FP8 ("fp8-channel"), as zai-org/GLM-4.5-Air-FP8 ships it: quant_method
//   "compressed-tensors", format "float-quantized" (top level or per group), config_groups whose every group targets
//   ["Linear"] with weights {num_bits 8, type "float", strategy "channel", symmetric true, dynamic false} (one F32
//   weight_scale [out, 1] per weight) and input_activations absent or dynamic (no stored activation scale);
//   output_activations and kv_cache_scheme absent. Key names: compressed-tensors QuantizationArgs /
//   QuantizationScheme (llm-compressor); SGLang compressed_tensors.py reads the same keys.
// - ModelOpt NVFP4 ("nvfp4"): quant_method "modelopt" with quant_algo "NVFP4" either flat (config.json form) or
//   under "quantization" (hf_quant_config.json form), group_size 16 (top level, under "quantization", or the first
//   config_groups entry's weights.group_size, as SGLang's ModelOptFp4Config.from_config reads it; absent = 16, the
//   NVFP4 block), no KV-cache quantization (kv_cache_quant_algo / kv_cache_scheme absent or null).
// - MXFP4 ("mxfp4"): quant_method "mxfp4" (openai/gpt-oss-120b config.json).
// The module lists (ignore, exclude_modules, modules_to_not_convert) are not interpreted: the tensors themselves
// are checked against the family's layout (hf_checkpoint_check.hpp).
#include <optional>
#include <string>
#include <string_view>

#include "models/profile/json_fields.hpp"

namespace wsb {

struct HfQuantization {
  std::string method = "none";  ///< ModelProfile::quantization spelling
  std::string description;      ///< for messages, e.g. "compressed-tensors channel FP8"
};

/// Reads quantization_config (`config` absent = unquantized) for a model of `family` and checks that the family
/// supports the method (models/profile/family_quantization.hpp). `top` is the config's top level (it names the
/// absent field). Throws Error(Format) naming the field ("quantization_config.<path>") for a missing or unknown
/// quant_method, an unsupported algorithm, strategy, bit width, type, group size, activation or KV-cache scheme,
/// and a method the family does not support (field 'quantization_config' when it is absent).
HfQuantization read_hf_quantization(const JsonFields& top, const std::optional<JsonFields>& config,
                                    std::string_view family);

}  // namespace wsb
