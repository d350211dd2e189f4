#ifdef WSBENCH_HAVE_CUDA
#include <fmt/format.h>

#include "engine/kernels/device_forward.hpp"
#include "engine/kernels/llama_device_forward.hpp"
#include "engine/kernels/moe_device_forwards.hpp"
#include "core/errors.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

std::unique_ptr<ForwardModel> make_device_forward(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
                                                  const std::vector<DeviceRankView>& views,
                                                  const DeviceForwardOptions& options) {
  if (profile.family == kLlamaFamily) return dk::make_llama_device_forward(profile, layouts, views, options);
  if (profile.family == kGlm4MoeFamily) return dk::make_glm4_moe_device_forward(profile, layouts, views, options);
  if (profile.family == kDeepseekV3Family)
    return dk::make_deepseek_v3_device_forward(profile, layouts, views, options);
  if (profile.family == kGptOssFamily) return dk::make_gpt_oss_device_forward(profile, layouts, views, options);
  throw Error(ErrorKind::Format,
              fmt::format("profile '{}': no device forward for family '{}' yet", profile.id, profile.family));
}

}  // namespace wsb
#endif  // WSBENCH_HAVE_CUDA
