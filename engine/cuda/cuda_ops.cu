// CUDA build of engine/cuda/cuda_ops.hpp.
#include "engine/cuda/cuda_check.hpp"
#include "engine/cuda/cuda_ops.hpp"

#include <cstring>

#include <nvtx3/nvToolsExtCudaRt.h>

namespace wsb::cuda_ops {
namespace {

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

/// Sets `device` current for a noexcept operation; returns the previous device, or -1 when nothing must be restored.
int enter_noexcept(int device) {
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  if (previous == device) return -1;
  if (cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return previous;
}

void leave_noexcept(int previous) {
  if (previous >= 0) cudaSetDevice(previous);
}

}  // namespace

bool built() { return true; }

int visible_devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // "no device" / "no driver" is sticky in the last-error slot; later checks must not see it
    return 0;
  }
  return count;
}

std::string device_name(int device) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties(" + std::to_string(device) + ")");
  return prop.name;
}

void memory_info(int device, uint64_t* free_bytes, uint64_t* total_bytes) {
  const std::string what = "cudaMemGetInfo on device " + std::to_string(device);
  DeviceGuard guard(device, what);
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), what);
  *free_bytes = free_b;
  *total_bytes = total_b;
}

void* device_alloc(int device, uint64_t bytes, const std::string& what) {
  DeviceGuard guard(device, what);
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaGetLastError();
    throw Error(ErrorKind::Resource, what + ": cudaMalloc of " + std::to_string(bytes) + " bytes on device " +
                                         std::to_string(device) + " failed: " + cudaGetErrorString(status) + " (" +
                                         std::to_string(free_b) + " bytes free)");
  }
  check(status, what + ": cudaMalloc of " + std::to_string(bytes) + " bytes on device " + std::to_string(device));
  return p;
}

void device_free(int device, void* p) noexcept {
  if (p == nullptr) return;
  const int previous = enter_noexcept(device);
  cudaFree(p);
  cudaGetLastError();
  leave_noexcept(previous);
}

void* stream_create(int device, const std::string& what) {
  DeviceGuard guard(device, what);
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), what + ": cudaStreamCreateWithFlags");
  // Nsight Systems then labels the stream's copies with the storage arena and stream they belong to.
  nvtxNameCudaStreamA(s, what.c_str());
  return s;
}

void stream_destroy(int device, void* stream) noexcept {
  if (stream == nullptr) return;
  const int previous = enter_noexcept(device);
  cudaStreamSynchronize(as_stream(stream));
  cudaStreamDestroy(as_stream(stream));
  cudaGetLastError();
  leave_noexcept(previous);
}

std::string stream_synchronize(int device, void* stream) noexcept {
  const int previous = enter_noexcept(device);
  const cudaError_t status = cudaStreamSynchronize(as_stream(stream));
  std::string message;
  if (status != cudaSuccess) {
    cudaGetLastError();
    message = cudaGetErrorString(status);
  }
  leave_noexcept(previous);
  return message;
}

void memset_async(int device, void* dst, int value, uint64_t bytes, void* stream, const std::string& what) {
  DeviceGuard guard(device, what);
  check(cudaMemsetAsync(dst, value, bytes, as_stream(stream)), what + ": cudaMemsetAsync");
}

void copy_h2d_async(int device, void* dst, const void* src, uint64_t bytes, void* stream, const std::string& what) {
  DeviceGuard guard(device, what);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, as_stream(stream)), what + ": cudaMemcpyAsync H2D");
}

void copy_d2h_async(int device, void* dst, const void* src, uint64_t bytes, void* stream, const std::string& what) {
  DeviceGuard guard(device, what);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, as_stream(stream)), what + ": cudaMemcpyAsync D2H");
}

void* event_create(int device, const std::string& what) {
  DeviceGuard guard(device, what);
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), what + ": cudaEventCreateWithFlags");
  return e;
}

void event_record(int device, void* event, void* stream, const std::string& what) {
  DeviceGuard guard(device, what);
  check(cudaEventRecord(static_cast<cudaEvent_t>(event), as_stream(stream)), what + ": cudaEventRecord");
}

std::string event_synchronize(int device, void* event) noexcept {
  const int previous = enter_noexcept(device);
  const cudaError_t status = cudaEventSynchronize(static_cast<cudaEvent_t>(event));
  std::string message;
  if (status != cudaSuccess) {
    cudaGetLastError();
    message = cudaGetErrorString(status);
  }
  leave_noexcept(previous);
  return message;
}

void event_destroy(int device, void* event) noexcept {
  if (event == nullptr) return;
  const int previous = enter_noexcept(device);
  cudaEventDestroy(static_cast<cudaEvent_t>(event));
  cudaGetLastError();
  leave_noexcept(previous);
}

void device_uuid(int device, uint8_t* uuid, const std::string& what) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), what + ": cudaGetDeviceProperties(" + std::to_string(device) + ")");
  static_assert(sizeof prop.uuid == 16, "cudaUUID_t is 16 bytes");
  std::memcpy(uuid, &prop.uuid, 16);
}

void ipc_get_handle(int device, void* p, uint8_t* handle, const std::string& what) {
  DeviceGuard guard(device, what);
  cudaIpcMemHandle_t h;
  static_assert(sizeof h == CUDA_IPC_HANDLE_SIZE, "cudaIpcMemHandle_t is CUDA_IPC_HANDLE_SIZE bytes");
  check(cudaIpcGetMemHandle(&h, p), what + ": cudaIpcGetMemHandle");
  std::memcpy(handle, &h, sizeof h);
}

void* ipc_open_handle(int device, const uint8_t* handle, const std::string& what) {
  DeviceGuard guard(device, what);
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle, sizeof h);
  void* p = nullptr;
  check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
        what + ": cudaIpcOpenMemHandle on device " + std::to_string(device));
  return p;
}

void ipc_close_handle(int device, void* p) noexcept {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = device;
  if (cudaSetDevice(device) == cudaSuccess) cudaIpcCloseMemHandle(p);
  cudaGetLastError();
  cudaSetDevice(previous);
}

void host_register(void* p, uint64_t bytes) {
  const cudaError_t status = cudaHostRegister(p, bytes, cudaHostRegisterPortable);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw Error(ErrorKind::Resource, "pinning " + std::to_string(bytes) +
                                         " B of host memory failed: " + cudaGetErrorString(status));
  }
}

void host_unregister(void* p) noexcept {
  if (p == nullptr) return;
  cudaHostUnregister(p);
  cudaGetLastError();
}

void* host_alloc(uint64_t bytes, const std::string& what) {
  void* p = nullptr;
  const cudaError_t status = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw Error(ErrorKind::Resource,
                what + ": cudaHostAlloc of " + std::to_string(bytes) + " B failed: " + cudaGetErrorString(status));
  }
  return p;
}

void host_free(void* p) noexcept {
  if (p == nullptr) return;
  cudaFreeHost(p);
  cudaGetLastError();
}

bool host_is_pinned(const void* p) noexcept {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

}  // namespace wsb::cuda_ops
