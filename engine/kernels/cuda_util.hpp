#pragma once
// CUDA error checks and device scoping of the device forward (C++17-clean: included by the .cu kernel files and by
// the CUDA-only .cpp glue). Every CUDA failure becomes a wsb::Error naming the operation.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace wsb::dk {

/// Throws unless `status` is cudaSuccess: Error(Resource) for cudaErrorMemoryAllocation, Error(Io) otherwise, the
/// message "<what>: <cudaGetErrorString>". Clears the (non-sticky) error state first so later checks start clean.
void check(cudaError_t status, const std::string& what);

/// Checks the launch of kernel `name` (cudaGetLastError: bad configuration, no kernel image for the device).
/// Asynchronous faults surface at the next synchronizing call, which names the step.
void check_launch(const char* name);

/// cudaMalloc of `bytes` on `device`, zero-filled. Throws Error(Resource) "<what>: needs <bytes> bytes on device
/// <d>, <free> free" when the device lacks the memory, Error(Io) for other failures.
void* device_alloc(int device, uint64_t bytes, const std::string& what);

/// Makes `device` current for the scope and restores the caller's device afterwards (CUDA's current device is
/// per host thread, and the forward must not leave it changed). Never throws from the destructor.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

/// cudaSetDevice(device), checked.
void set_device(int device);

}  // namespace wsb::dk
