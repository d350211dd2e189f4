#include <fmt/format.h>

#include "core/errors.hpp"
#include "models/profile/moe_family.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

std::string_view base_profile_id(std::string_view id) { return id.substr(0, id.find('@')); }

ModelProfile scale_profile(const ModelProfile& profile, const ProfileScale& scale) {
  ModelProfile out = profile;
  nlohmann::json record = nlohmann::json::object();
  if (scale.layers) {
    const int layers = *scale.layers;
    if (layers < 1 || layers > profile.dims.layers)
      throw Error(ErrorKind::Format, fmt::format("profile '{}': scale field 'layers': {} is outside 1..{}", profile.id,
                                                 layers, profile.dims.layers));
    // Dropping trailing layers keeps every remaining tensor's name and shape identical to the full model.
    out.dims.layers = layers;
    out.id += fmt::format("@layers={}", layers);
    record["layers"] = layers;
    record["full_layers"] = profile.dims.layers;
  }
  if (scale.experts) {
    const int experts = *scale.experts;
    if (!is_moe_family(profile.family))
      throw Error(ErrorKind::Format, fmt::format("profile '{}': scale field 'experts': family {} has no experts",
                                                 profile.id, profile.family));
    // Keeping the first N experts keeps every per-expert tensor's name and shape; the router and stacked tensors
    // shrink to N rows. top_k must still fit in N for routing to be defined.
    if (experts < profile.dims.top_k || experts > profile.dims.experts)
      throw Error(ErrorKind::Format,
                  fmt::format("profile '{}': scale field 'experts': {} is outside {}..{} (top_k..experts)", profile.id,
                              experts, profile.dims.top_k, profile.dims.experts));
    out.dims.experts = experts;
    out.id += fmt::format("@experts={}", experts);
    record["experts"] = experts;
    record["full_experts"] = profile.dims.experts;
  }
  if (out.raw.is_object() && !record.empty()) out.raw["scale"] = record;
  return out;
}

}  // namespace wsb
