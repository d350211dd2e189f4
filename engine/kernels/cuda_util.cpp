#ifdef WSBENCH_HAVE_CUDA
#include "engine/kernels/cuda_util.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb::dk {

void check(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();  // reset a non-sticky error so it is not reported again by the next check
  const ErrorKind kind = status == cudaErrorMemoryAllocation ? ErrorKind::Resource : ErrorKind::Io;
  throw Error(kind, fmt::format("{}: {}", what, cudaGetErrorString(status)));
}

void check_launch(const char* name) { check(cudaGetLastError(), fmt::format("launching kernel {}", name)); }

void* device_alloc(int device, uint64_t bytes, const std::string& what) {
  DeviceScope scope(device);
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    (void)cudaMemGetInfo(&free_bytes, &total);
    throw Error(ErrorKind::Resource,
                fmt::format("{}: needs {} bytes on device {}, {} free", what, bytes, device, free_bytes));
  }
  check(status, fmt::format("{}: cudaMalloc of {} bytes on device {}", what, bytes, device));
  const cudaError_t zero = cudaMemset(p, 0, bytes == 0 ? 1 : bytes);
  if (zero != cudaSuccess) {
    (void)cudaFree(p);
    check(zero, fmt::format("{}: cudaMemset of {} bytes on device {}", what, bytes, device));
  }
  return p;
}

DeviceScope::DeviceScope(int device) {
  check(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) set_device(device);
}

DeviceScope::~DeviceScope() {
  int now = previous_;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
}

void set_device(int device) { check(cudaSetDevice(device), fmt::format("cudaSetDevice({})", device)); }

}  // namespace wsb::dk
#endif  // WSBENCH_HAVE_CUDA
