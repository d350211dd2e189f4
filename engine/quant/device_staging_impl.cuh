#pragma once
// DeviceStaging's CUDA objects, shared by the .cu files that use a staging (C++17; CUDA builds only).
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/quant/device_staging.hpp"

namespace wsb {

struct DeviceStaging::Impl {
  Impl() = default;
  /// Waits for the copy stream, then frees whatever was allocated (also after a constructor that threw halfway).
  /// Never throws.
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  int device = 0;
  uint64_t budget = 0;
  uint64_t half = 0;
  uint8_t* buffer = nullptr;  ///< device, budget bytes: half h at buffer + h * half
  uint8_t* bounce = nullptr;  ///< pinned host, budget bytes, allocated on first pageable source
  cudaStream_t copy_stream = nullptr;
  cudaEvent_t copied[2] = {nullptr, nullptr};    ///< H2D into half h done (also frees bounce half h)
  cudaEvent_t consumed[2] = {nullptr, nullptr};  ///< kernel reading device half h done
};

namespace quant {

/// The pinned bounce buffer (budget bytes), allocated on first call on the staging's device. Throws
/// Error(Resource) "DeviceStaging: pinning <bytes> B of host memory ... failed: <cuda error>".
uint8_t* staging_bounce(DeviceStaging::Impl& staging);

}  // namespace quant
}  // namespace wsb
