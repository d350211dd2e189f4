#include <fmt/format.h>

#include "models/core/errors.hpp"
#include "models/layout/llama_layout.hpp"
#include "models/profile/llama_family.hpp"

namespace wsb {

std::vector<RankLayout> build_rank_layouts(const ModelProfile& profile, int tp) {
  if (profile.family == kLlamaFamily) return build_llama_layouts(profile, tp);
  throw Error(ErrorKind::Format,
              fmt::format("profile '{}': no TP layout for family '{}' (supported: llama)", profile.id, profile.family));
}

}  // namespace wsb
