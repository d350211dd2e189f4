#include <fmt/format.h>

#include "core/errors.hpp"
#include "models/layout/llama_layout.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

std::vector<RankLayout> build_rank_layouts(const ModelProfile& profile, int tp) {
  if (profile.family == kLlamaFamily) return build_llama_layouts(profile, tp);
  if (profile.family == kGlm4MoeFamily) return build_glm4_moe_layouts(profile, tp);
  if (profile.family == kDeepseekV3Family) return build_deepseek_v3_layouts(profile, tp);
  if (profile.family == kGptOssFamily) return build_gpt_oss_layouts(profile, tp);
  throw Error(ErrorKind::Format, fmt::format("profile '{}': no TP layout for family '{}' (supported: llama, glm4_moe, "
                                             "deepseek_v3, gpt_oss)",
                                             profile.id, profile.family));
}

}  // namespace wsb
