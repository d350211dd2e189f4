#include <fmt/format.h>

#include "core/errors.hpp"
#include "models/forward/llama_forward.hpp"
#include "models/forward/moe_forward.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

std::unique_ptr<ForwardModel> make_forward(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
                                           const std::vector<RankStorageView>& storages) {
  if (profile.family == kLlamaFamily) return make_llama_forward(profile, layouts, storages);
  if (profile.family == kGlm4MoeFamily) return make_glm4_moe_forward(profile, layouts, storages);
  if (profile.family == kDeepseekV3Family) return make_deepseek_v3_forward(profile, layouts, storages);
  if (profile.family == kGptOssFamily) return make_gpt_oss_forward(profile, layouts, storages);
  throw Error(ErrorKind::Format, fmt::format("profile '{}': no reference forward pass for family '{}' (supported: "
                                             "llama, glm4_moe, deepseek_v3, gpt_oss)",
                                             profile.id, profile.family));
}

void check_token(const std::string& profile_id, int32_t token, int vocab) {
  if (token < 0 || token >= vocab)
    throw Error(ErrorKind::Format,
                fmt::format("profile '{}': token id {} is outside the vocabulary [0, {})", profile_id, token, vocab));
}

}  // namespace wsb
