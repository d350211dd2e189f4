// Stand-in of the device forward for builds without nvcc (engine/CMakeLists.txt compiles *.cu only with CUDA).
#ifndef WSBENCH_HAVE_CUDA
#include <fmt/format.h>

#include "engine/kernels/device_forward.hpp"
#include "core/errors.hpp"

namespace wsb {

std::unique_ptr<ForwardModel> make_device_forward(const ModelProfile& profile, const std::vector<RankLayout>&,
                                                  const std::vector<DeviceRankView>&, const DeviceForwardOptions&) {
  throw Error(ErrorKind::Resource,
              fmt::format("profile '{}': device forward: wsbench was built without CUDA", profile.id));
}

}  // namespace wsb
#endif  // WSBENCH_HAVE_CUDA
