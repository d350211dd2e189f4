#pragma once
// Bounded device staging for post-load transforms that run on the device (models/transform/nvfp4.hpp, "Device
// path"): a fixed device buffer split into two halves, so the host-to-device copy of chunk i + 1 can run while a
// kernel consumes chunk i, plus a pinned host bounce buffer of the same size, allocated on first use, for sources
// that are not pinned (a pageable source cannot be copied asynchronously). Memory use is the budget, whatever the
// tensor size. C++17, no CUDA headers.
#include <cstdint>
#include <memory>

namespace wsb {

class DeviceStaging {
 public:
  /// Allocates `budget_bytes` (> 0) of device memory on `device`, a copy stream and four events there.
  /// Throws Error(Resource) "no CUDA device: DeviceStaging needs one (...)" without a device, Error(Resource)
  /// naming the bytes needed and free when the device lacks them, Error(Mismatch) for budget 0 or a device index
  /// that does not exist, Error(Resource) "DeviceStaging: built without CUDA" in a build without CUDA.
  explicit DeviceStaging(uint64_t budget_bytes, int device = 0);
  /// Waits for the staging's own copies, then frees everything. Never throws.
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  uint64_t budget_bytes() const;
  /// Bytes of one half (budget / 2): the most one chunk may hold.
  uint64_t half_bytes() const;
  int device() const;
  /// True once a pageable source made the staging allocate its pinned bounce buffer (budget bytes).
  bool has_bounce_buffer() const;

  struct Impl;  ///< CUDA objects; defined in the .cu
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace wsb
