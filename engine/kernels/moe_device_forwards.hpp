#pragma once
// Device forwards of the quantized MoE families (CUDA builds only), mirroring models/forward/moe_forward.hpp step
// for step on CUDA devices over the same runtime layouts (models/layout/moe_layout.hpp), dequantizing inside the
// kernels. Same contract as make_device_forward (device_forward.hpp).
#include <memory>
#include <vector>

#include "engine/kernels/device_forward.hpp"

namespace wsb::dk {

/// glm4_moe with fp8-channel weights (moe_forward.hpp make_glm4_moe_forward). Throws Error(Format) for a weight
/// dtype other than BF16/F16/F32, Error(Mismatch) when layouts/views do not match build_rank_layouts(profile,
/// layouts.size()) or a storage lacks the fp8-channel layout (naming it), and what DeviceForwardBase throws.
std::unique_ptr<ForwardModel> make_glm4_moe_device_forward(const ModelProfile& profile,
                                                           const std::vector<RankLayout>& layouts,
                                                           const std::vector<DeviceRankView>& views,
                                                           const DeviceForwardOptions& options);

/// deepseek_v3 with NVFP4 routed experts and MLA by naive latent expansion (make_deepseek_v3_forward). Throws as
/// make_glm4_moe_device_forward (NVFP4 storages instead of fp8-channel).
std::unique_ptr<ForwardModel> make_deepseek_v3_device_forward(const ModelProfile& profile,
                                                              const std::vector<RankLayout>& layouts,
                                                              const std::vector<DeviceRankView>& views,
                                                              const DeviceForwardOptions& options);

/// gpt_oss with MXFP4 experts, sinks, alternating sliding window and biases (make_gpt_oss_forward). Throws as
/// make_glm4_moe_device_forward (MXFP4 storages).
std::unique_ptr<ForwardModel> make_gpt_oss_device_forward(const ModelProfile& profile,
                                                          const std::vector<RankLayout>& layouts,
                                                          const std::vector<DeviceRankView>& views,
                                                          const DeviceForwardOptions& options);

}  // namespace wsb::dk
