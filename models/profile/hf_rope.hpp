#pragma once
// RoPE settings of a Hugging Face config.json, in both spellings transformers has written:
// - transformers >= 5: "rope_parameters" {rope_theta, rope_type, partial_rotary_factor, and the scaling keys}
//   (configuration_utils.py / modeling_rope_utils.py standardize_rope_params; per-layer-type dicts keyed by
//   layer type when a model's layers differ);
// - older: top-level "rope_theta" and "rope_scaling" {type or rope_type, scaling keys}.
// YaRN keys and defaults follow transformers' _compute_yarn_parameters: factor, original_max_position_embeddings,
// beta_fast (default 32), beta_slow (default 1), mscale, mscale_all_dim, truncate (default true), attention_factor.
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "models/profile/json_fields.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

struct HfRope {
  double theta = 10000.0;
  std::string theta_field = "rope_theta";  ///< dotted config field theta came from (for messages)
  std::string type = "default";            ///< rope_type ("default" when absent)
  std::string field = "rope_parameters";   ///< dotted config field of rope_type (for messages)
  std::string scaling_field = "rope_parameters";  ///< dotted path of the dict holding the scaling keys
  std::optional<double> partial_rotary_factor;  ///< rope_parameters.partial_rotary_factor when present
  RopeScaling yarn;                             ///< filled when type == "yarn"
};

/// Reads the RoPE settings of config object `cfg`. theta = rope_parameters.rope_theta, else rope_theta, else
/// `default_theta` (the config class's default). rope_parameters wins over rope_scaling when both are present. A
/// per-layer-type rope_parameters ({"full_attention": {...}, "sliding_attention": {...}}) is accepted when every
/// layer type holds the same parameters (wsbench applies one RoPE to every layer). The rope type must be one of
/// `types` (what `family`'s forward applies). Throws Error(Format) naming the field: an unsupported rope type,
/// per-layer-type parameters that differ, a YaRN dict without factor or original_max_position_embeddings, a
/// non-positive YaRN number, or an explicit attention_factor (wsbench derives it from factor and mscale).
HfRope read_hf_rope(const JsonFields& cfg, double default_theta, std::initializer_list<std::string_view> types,
                    std::string_view family);

}  // namespace wsb
