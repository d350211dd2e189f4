#pragma once
// CUDA devices visible to this process (empty without a CUDA build or without a device), for the context block
// and for GPU tests that must skip cleanly on machines without one.
#include <cstdint>
#include <string>
#include <vector>

namespace wsb {

struct DeviceInfo {
  int index = 0;
  std::string name;
  uint64_t memory_bytes = 0;
  int compute_major = 0;
  int compute_minor = 0;
  std::string pci_bus_id;
};

/// Devices cudaGetDeviceCount reports; empty when CUDA is not compiled in or no device/driver is present.
std::vector<DeviceInfo> cuda_devices();
/// Driver and runtime versions as "13.0" strings; empty without CUDA.
std::string cuda_driver_version();
std::string cuda_runtime_version();

}  // namespace wsb
