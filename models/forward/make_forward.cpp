#include <fmt/format.h>

#include "models/core/errors.hpp"
#include "models/forward/llama_forward.hpp"
#include "models/profile/llama_family.hpp"

namespace wsb {

std::unique_ptr<ForwardModel> make_forward(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
                                           const std::vector<RankStorageView>& storages) {
  if (profile.family == kLlamaFamily) return make_llama_forward(profile, layouts, storages);
  throw Error(ErrorKind::Format, fmt::format("profile '{}': no reference forward pass for family '{}' (supported: "
                                             "llama)",
                                             profile.id, profile.family));
}

}  // namespace wsb
