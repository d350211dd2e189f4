// Build of device_info.hpp without CUDA: no devices.
#ifndef WSBENCH_HAVE_CUDA
#include "engine/device_info.hpp"

namespace wsb {

std::vector<DeviceInfo> cuda_devices() { return {}; }
std::string cuda_driver_version() { return ""; }
std::string cuda_runtime_version() { return ""; }

}  // namespace wsb
#endif
