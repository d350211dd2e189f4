#ifdef WSBENCH_HAVE_CUDA
#include "engine/kernels/device_arena.hpp"

#include <fmt/format.h>

#include <utility>

#include "engine/kernels/cuda_util.hpp"
#include "core/errors.hpp"

namespace wsb::dk {

uint64_t ArenaPlan::add(uint64_t bytes) {
  constexpr uint64_t kAlign = 256;  // >= the 16-byte vector loads of the kernels, and whole cache lines
  const uint64_t offset = bytes_;
  bytes_ += (bytes + kAlign - 1) / kAlign * kAlign;
  return offset;
}

DeviceArena::DeviceArena(int device, uint64_t bytes, const std::string& what)
    : device_(device), data_(static_cast<uint8_t*>(device_alloc(device, bytes, what))) {}

namespace {

/// cudaFree with `device` current (the allocation's device), restoring the caller's; never throws.
void free_on(int device, void* p) noexcept {
  if (p == nullptr) return;
  int previous = device;
  const bool known = cudaGetDevice(&previous) == cudaSuccess;
  if (known && previous != device) (void)cudaSetDevice(device);
  (void)cudaFree(p);
  if (known && previous != device) (void)cudaSetDevice(previous);
}

}  // namespace

DeviceArena::~DeviceArena() { free_on(device_, data_); }

DeviceArena::DeviceArena(DeviceArena&& other) noexcept
    : device_(other.device_), data_(std::exchange(other.data_, nullptr)) {}

DeviceArena& DeviceArena::operator=(DeviceArena&& other) noexcept {
  if (this != &other) {
    free_on(device_, data_);
    device_ = other.device_;
    data_ = std::exchange(other.data_, nullptr);
  }
  return *this;
}

PinnedBuffer::PinnedBuffer(uint64_t bytes, const std::string& what) {
  const cudaError_t status = cudaHostAlloc(&data_, bytes == 0 ? 1 : bytes, cudaHostAllocPortable);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    data_ = nullptr;
    throw Error(ErrorKind::Resource, fmt::format("{}: pinning {} bytes of host memory failed: {}", what, bytes,
                                                 cudaGetErrorString(status)));
  }
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) (void)cudaFreeHost(data_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept : data_(std::exchange(other.data_, nullptr)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) (void)cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
  }
  return *this;
}

}  // namespace wsb::dk
#endif  // WSBENCH_HAVE_CUDA
