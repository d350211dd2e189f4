#include "models/profile/hf_quantization.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "models/profile/family_quantization.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

namespace {

/// Requires `key` to hold exactly `want` (numbers, strings or booleans compared as JSON).
void require_value(const JsonFields& f, std::string_view key, const nlohmann::json& want, std::string_view why) {
  if (!f.has(key)) f.fail(key, fmt::format("missing (expected {}: {})", want.dump(), why));
  const nlohmann::json& got = f.value().at(std::string(key));
  if (got != want) f.fail(key, fmt::format("{} is not supported (expected {}: {})", got.dump(), want.dump(), why));
}

/// A key that must be absent or null: the scheme it describes would store tensors wsbench does not model.
void require_absent(const JsonFields& f, std::string_view key, std::string_view why) {
  if (f.has(key)) f.fail(key, fmt::format("{} is not supported ({})", f.value().at(std::string(key)).dump(), why));
}

/// One compressed-tensors config group: Linear targets, channel FP8 weights, no stored activation scales.
void check_fp8_channel_group(const JsonFields& g) {
  if (!g.has("targets") || g.value().at("targets") != nlohmann::json::array({"Linear"}))
    g.fail("targets", fmt::format("{} is not supported (expected [\"Linear\"])",
                                  g.has("targets") ? g.value().at("targets").dump() : std::string("missing")));
  if (std::optional<std::string> format = g.optional_string("format"); format && *format != "float-quantized")
    g.fail("format", fmt::format("'{}' is not supported (expected float-quantized: F8_E4M3 weights)", *format));
  const JsonFields w = g.object("weights");
  require_value(w, "num_bits", 8, "8-bit weights");
  require_value(w, "type", "float", "F8_E4M3 weight codes");
  if (w.optional_string("strategy").value_or("tensor") != "channel") {
    const std::string strategy = w.optional_string("strategy").value_or("tensor");
    w.fail("strategy", fmt::format("'{}' is not supported (wsbench models channel FP8: one F32 weight_scale [out, 1] "
                                   "per output row{})",
                                   strategy, strategy == "block" ? "; block FP8 stores weight_scale per block" : ""));
  }
  if (w.optional_boolean("symmetric").value_or(true) == false)
    w.fail("symmetric", "false is not supported (asymmetric weights store zero points)");
  if (w.optional_boolean("dynamic").value_or(false))
    w.fail("dynamic", "true is not supported (channel FP8 weights carry a stored weight_scale)");
  require_absent(w, "group_size", "channel FP8 has no weight groups");
  require_absent(w, "block_structure", "channel FP8 has no weight blocks");
  if (std::optional<JsonFields> a = g.optional_object("input_activations");
      a && !a->optional_boolean("dynamic").value_or(false))
    a->fail("dynamic", "static activation quantization is not supported (it stores an input_scale per layer); "
                       "dynamic or absent input_activations are");
  require_absent(g, "output_activations", "output activation scales are not modelled");
}

HfQuantization compressed_tensors(const JsonFields& q) {
  if (std::optional<std::string> format = q.optional_string("format");
      format && *format != "float-quantized" && *format != "mixed-precision")
    q.fail("format", fmt::format("'{}' is not supported (expected float-quantized: F8_E4M3 weights)", *format));
  const JsonFields groups = q.object("config_groups");
  if (groups.value().empty()) q.fail("config_groups", "has no group");
  for (const auto& [name, group] : groups.value().items())
    check_fp8_channel_group(JsonFields(group, q.origin(), groups.field(name)));
  require_absent(q, "kv_cache_scheme", "KV-cache scales are not modelled");
  return {std::string(kQuantFp8Channel), "compressed-tensors channel FP8"};
}

HfQuantization modelopt(const JsonFields& q) {
  // Flat (config.json) form first, then the hf_quant_config.json form nested under "quantization".
  const std::optional<JsonFields> nested = q.has("quant_algo") ? std::nullopt : q.optional_object("quantization");
  const JsonFields& f = nested ? *nested : q;
  const std::string algo = f.string("quant_algo");
  if (algo != "NVFP4")
    f.fail("quant_algo", fmt::format("'{}' is not supported (supported: NVFP4, group_size 16)", algo));
  std::optional<int> group = f.optional_integer("group_size");
  std::string group_field = f.field("group_size");
  if (!group && !nested) {
    if (std::optional<JsonFields> groups = q.optional_object("config_groups"); groups && !groups->value().empty()) {
      const auto first = groups->value().begin();
      const JsonFields g(first.value(), q.origin(), groups->field(first.key()));
      if (std::optional<JsonFields> w = g.optional_object("weights")) {
        group = w->optional_integer("group_size");
        group_field = w->field("group_size");
      }
    }
  }
  if (group && *group != kNvfp4Block)
    throw Error(ErrorKind::Format,
                fmt::format("{}: field '{}': {} is not supported (NVFP4 scales blocks of {} elements)", q.origin(),
                            group_field, *group, kNvfp4Block));
  for (const char* key : {"kv_cache_quant_algo", "kv_cache_scheme"})
    require_absent(f, key, "KV-cache scales are not modelled");
  return {std::string(kQuantNvfp4), "ModelOpt NVFP4, group_size 16"};
}

}  // namespace

HfQuantization read_hf_quantization(const JsonFields& top, const std::optional<JsonFields>& config,
                                    std::string_view family) {
  if (!config) {
    if (!family_supports_quantization(family, kQuantNone))
      top.fail("quantization_config", fmt::format("absent (unquantized weights) is not supported by family {} "
                                                  "(supported: {})",
                                                  family, family_quantization_list(family)));
    return {std::string(kQuantNone), "absent: unquantized weights"};
  }
  const JsonFields& q = *config;
  const std::string method = q.string("quant_method");
  HfQuantization out;
  if (method == "compressed-tensors") {
    out = compressed_tensors(q);
  } else if (method == "modelopt") {
    out = modelopt(q);
  } else if (method == "mxfp4") {
    out = {std::string(kQuantMxfp4), "MXFP4"};
  } else {
    q.fail("quant_method",
           fmt::format("'{}' is not supported (supported: compressed-tensors channel FP8, modelopt NVFP4, mxfp4{})",
                       method, method == "fp8" ? "; 'fp8' is block FP8 with weight_scale_inv per block" : ""));
  }
  if (!family_supports_quantization(family, out.method))
    q.fail("quant_method", fmt::format("'{}' ({}) is not supported by family {} (supported: {})", method,
                                       out.description, family, family_quantization_list(family)));
  return out;
}

}  // namespace wsb
