// CUDA build of engine/quant/device_staging.hpp.
#include <cuda_runtime.h>

#include <string>

#include "engine/quant/cuda_check.cuh"
#include "engine/quant/device_staging.hpp"
#include "engine/quant/device_staging_impl.cuh"

namespace wsb {

DeviceStaging::DeviceStaging(uint64_t budget_bytes, int device) : impl_(std::make_unique<Impl>()) {
  using quant::check_cuda;
  quant::require_device("DeviceStaging");
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "DeviceStaging: cudaGetDeviceCount");
  if (budget_bytes == 0) throw Error(ErrorKind::Mismatch, "DeviceStaging: budget of 0 bytes");
  if (device < 0 || device >= count)
    throw Error(ErrorKind::Mismatch, "DeviceStaging: device " + std::to_string(device) + " outside the " +
                                         std::to_string(count) + " visible devices");
  Impl& s = *impl_;
  s.device = device;
  s.budget = budget_bytes;
  s.half = budget_bytes / 2;
  quant::DeviceGuard guard(device, "DeviceStaging");
  const cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&s.buffer), budget_bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    if (err == cudaErrorMemoryAllocation)
      throw Error(ErrorKind::Resource, "DeviceStaging: device " + std::to_string(device) + " needs " +
                                           std::to_string(budget_bytes) + " bytes of staging, " +
                                           std::to_string(free_bytes) + " free");
    check_cuda(err, "DeviceStaging: cudaMalloc of " + std::to_string(budget_bytes) + " bytes");
  }
  check_cuda(cudaStreamCreateWithFlags(&s.copy_stream, cudaStreamNonBlocking), "DeviceStaging: copy stream");
  for (int h = 0; h < 2; ++h) {
    check_cuda(cudaEventCreateWithFlags(&s.copied[h], cudaEventDisableTiming), "DeviceStaging: event");
    check_cuda(cudaEventCreateWithFlags(&s.consumed[h], cudaEventDisableTiming), "DeviceStaging: event");
  }
}

DeviceStaging::Impl::~Impl() {
  if (buffer == nullptr && bounce == nullptr && copy_stream == nullptr) return;  // nothing was allocated
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = device;
  cudaSetDevice(device);
  if (copy_stream != nullptr) cudaStreamSynchronize(copy_stream);
  for (int h = 0; h < 2; ++h) {
    if (copied[h] != nullptr) cudaEventDestroy(copied[h]);
    if (consumed[h] != nullptr) cudaEventDestroy(consumed[h]);
  }
  if (copy_stream != nullptr) cudaStreamDestroy(copy_stream);
  if (buffer != nullptr) cudaFree(buffer);
  if (bounce != nullptr) cudaFreeHost(bounce);
  cudaGetLastError();
  cudaSetDevice(previous);
}

DeviceStaging::~DeviceStaging() = default;

uint64_t DeviceStaging::budget_bytes() const { return impl_->budget; }
uint64_t DeviceStaging::half_bytes() const { return impl_->half; }
int DeviceStaging::device() const { return impl_->device; }
bool DeviceStaging::has_bounce_buffer() const { return impl_->bounce != nullptr; }

namespace quant {

uint8_t* staging_bounce(DeviceStaging::Impl& s) {
  if (s.bounce == nullptr) {
    const cudaError_t err = cudaHostAlloc(reinterpret_cast<void**>(&s.bounce), s.budget, cudaHostAllocPortable);
    if (err != cudaSuccess) {
      cudaGetLastError();
      s.bounce = nullptr;
      throw Error(ErrorKind::Resource, "DeviceStaging: pinning " + std::to_string(s.budget) +
                                           " B of host memory for the bounce buffer failed: " +
                                           cudaGetErrorString(err));
    }
  }
  return s.bounce;
}

}  // namespace quant
}  // namespace wsb
