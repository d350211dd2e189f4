#pragma once
// CUDA error handling of engine/quant's .cu files (C++17; never included by host-only code).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/errors.hpp"

namespace wsb::quant {

/// True for the errors that mean "no usable CUDA device or driver here" (a machine fact, not an I/O failure).
inline bool is_no_device_error(cudaError_t err) {
  return err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver || err == cudaErrorInitializationError || err == cudaErrorDevicesUnavailable ||
         err == cudaErrorStubLibrary || err == cudaErrorSystemDriverMismatch || err == cudaErrorCompatNotSupportedOnDevice;
}

/// Throws for a failed CUDA call `what` (an operation and the object it acted on): Error(Resource) "no CUDA device
/// usable ..." or "... out of device memory" for those causes, Error(Io) "<what>: <cuda error>" otherwise. The
/// non-sticky error state is cleared first so later calls are not blamed for it.
inline void check_cuda(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return;
  cudaGetLastError();
  const std::string text = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
  if (is_no_device_error(err)) throw Error(ErrorKind::Resource, "no CUDA device usable (" + what + "): " + text);
  if (err == cudaErrorMemoryAllocation) throw Error(ErrorKind::Resource, what + ": out of device memory (" + text + ")");
  throw Error(ErrorKind::Io, what + ": " + text);
}

/// Throws Error(Resource) "no CUDA device: <what> needs one" when none is visible (or the driver is missing).
inline void require_device(const std::string& what) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    const std::string why = err != cudaSuccess ? std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err)
                                               : "cudaGetDeviceCount reports 0 devices";
    throw Error(ErrorKind::Resource, "no CUDA device: " + what + " needs one (" + why + ")");
  }
}

/// Makes `device` current for the guard's life and restores the previous device afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device, const std::string& what) {
    check_cuda(cudaGetDevice(&previous_), what + ": cudaGetDevice");
    if (device != previous_) check_cuda(cudaSetDevice(device), what + ": cudaSetDevice(" + std::to_string(device) + ")");
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace wsb::quant
