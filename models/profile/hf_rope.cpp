#include "models/profile/hf_rope.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/errors.hpp"

namespace wsb {

namespace {

/// Layer types of transformers' configs (configuration_utils.py ALLOWED_LAYER_TYPES, the ones these families use).
constexpr const char* kLayerTypes[] = {"full_attention", "sliding_attention"};

bool is_per_layer_type(const nlohmann::json& rope) {
  for (const char* t : kLayerTypes)
    if (rope.contains(t)) return true;
  return false;
}

double positive(const JsonFields& f, std::string_view key, std::optional<double> fallback = std::nullopt) {
  std::optional<double> v = f.optional_number(key);
  if (!v) {
    if (!fallback) f.fail(key, "missing (YaRN needs it)");
    return *fallback;
  }
  if (!(*v > 0.0) || !std::isfinite(*v)) f.fail(key, fmt::format("must be > 0, got {}", *v));
  return *v;
}

RopeScaling read_yarn(const JsonFields& f) {
  if (f.has("attention_factor"))
    f.fail("attention_factor",
           "an explicit YaRN attention factor is not supported (wsbench derives it from factor, mscale and "
           "mscale_all_dim)");
  RopeScaling s;
  s.factor = positive(f, "factor");
  const double original = positive(f, "original_max_position_embeddings");
  if (original != std::floor(original) || original > 1e9)
    f.fail("original_max_position_embeddings", fmt::format("must be a positive integer, got {}", original));
  s.original_max_position = static_cast<int>(original);
  s.beta_fast = positive(f, "beta_fast", 32.0);
  s.beta_slow = positive(f, "beta_slow", 1.0);
  s.mscale = f.optional_number("mscale").value_or(0.0);
  s.mscale_all_dim = f.optional_number("mscale_all_dim").value_or(0.0);
  s.truncate = f.optional_boolean("truncate").value_or(true);
  return s;
}

}  // namespace

HfRope read_hf_rope(const JsonFields& cfg, double default_theta, std::initializer_list<std::string_view> types,
                    std::string_view family) {
  HfRope out;
  std::optional<JsonFields> params = cfg.optional_object("rope_parameters");
  if (params && is_per_layer_type(params->value())) {
    // One RoPE for every layer: take the first layer type's dict once every type holds the same one.
    std::optional<JsonFields> first;
    for (const char* t : kLayerTypes) {
      std::optional<JsonFields> typed = params->optional_object(t);
      if (!typed) continue;
      if (!first) {
        first = typed;
      } else if (typed->value() != first->value()) {
        params->fail(t, "RoPE parameters that differ per layer type are not supported (wsbench applies one RoPE "
                        "to every layer)");
      }
    }
    params = first;
  }
  std::optional<JsonFields> scaling = params ? params : cfg.optional_object("rope_scaling");
  if (scaling) {
    out.scaling_field = scaling->path();
    out.field = scaling->field("rope_type");
    for (const char* key : {"rope_type", "type"}) {
      if (std::optional<std::string> type = scaling->optional_string(key)) {
        out.type = *type;
        out.field = scaling->field(key);
        break;
      }
    }
  }
  std::optional<double> theta = params ? params->optional_number("rope_theta") : std::nullopt;
  if (theta) {
    out.theta_field = params->field("rope_theta");
  } else {
    theta = cfg.optional_number("rope_theta");
    out.theta_field = cfg.field("rope_theta");
  }
  out.theta = theta.value_or(default_theta);
  if (params) out.partial_rotary_factor = params->optional_number("partial_rotary_factor");
  bool supported = false;
  for (std::string_view t : types) supported = supported || t == out.type;
  if (!supported)
    throw Error(ErrorKind::Format,
                fmt::format("{}: field '{}': unsupported rope type '{}' (supported by family {}: {})", cfg.origin(),
                            out.field, out.type, family, fmt::join(types, ", ")));
  if (out.type == "yarn") out.yarn = read_yarn(*scaling);
  return out;
}

}  // namespace wsb
