#pragma once
// Error conversion for CUDA runtime calls, for .cu files only (includes cuda_runtime.h; C++17).
#include <cuda_runtime.h>

#include <string>

#include "core/errors.hpp"

namespace wsb::cuda_ops {

/// Throws Error(Io) "<what>: <cudaGetErrorString>" when `status` is not cudaSuccess. The error is also cleared
/// from the thread's last-error slot so a later, unrelated check does not report it again.
inline void check(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();
  throw Error(ErrorKind::Io, what + ": " + cudaGetErrorString(status));
}

/// Makes `device` current for a scope and restores the previous current device (errors on restore are dropped:
/// the guard runs during unwinding).
class DeviceGuard {
 public:
  DeviceGuard(int device, const std::string& what) {
    check(cudaGetDevice(&previous_), what + ": cudaGetDevice");
    if (previous_ != device) check(cudaSetDevice(device), what + ": cudaSetDevice(" + std::to_string(device) + ")");
  }
  ~DeviceGuard() {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current != previous_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace wsb::cuda_ops
