#pragma once
// Device forward of the llama family (layout of models/layout/llama_layout.hpp), mirroring
// models/forward/llama_forward.cpp step for step on CUDA devices. CUDA builds only.
#include <memory>
#include <vector>

#include "engine/kernels/device_forward.hpp"

namespace wsb::dk {

/// Throws Error(Format) for a weight dtype other than BF16/F16/F32, Error(Mismatch) when layouts/views do not
/// match build_llama_layouts(profile, layouts.size()) (names, shapes, byte sizes, device addresses), and what
/// DeviceForwardBase's constructor throws.
std::unique_ptr<ForwardModel> make_llama_device_forward(const ModelProfile& profile,
                                                        const std::vector<RankLayout>& layouts,
                                                        const std::vector<DeviceRankView>& views,
                                                        const DeviceForwardOptions& options);

}  // namespace wsb::dk
