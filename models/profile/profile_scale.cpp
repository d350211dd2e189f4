#include <fmt/format.h>

#include "models/core/errors.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

ModelProfile scale_profile(const ModelProfile& profile, const ProfileScale& scale) {
  ModelProfile out = profile;
  if (!scale.layers) return out;
  int layers = *scale.layers;
  if (layers < 1 || layers > profile.dims.layers)
    throw Error(ErrorKind::Format, fmt::format("profile '{}': scale field 'layers': {} is outside 1..{}", profile.id,
                                               layers, profile.dims.layers));
  // Dropping trailing layers keeps every remaining tensor's name and shape identical to the full model.
  out.dims.layers = layers;
  out.id = fmt::format("{}@layers={}", profile.id, layers);
  if (out.raw.is_object()) out.raw["scale"] = {{"layers", layers}, {"full_layers", profile.dims.layers}};
  return out;
}

}  // namespace wsb
