#pragma once
// Thin, checked wrappers over the CUDA runtime calls the C++20 glue of engine/cuda needs (device storages, pinned
// host memory, the CUPTI tracer's device check). C++17-clean and free of CUDA headers, so .cpp files compiled by
// g++ in either build can call them: cuda_ops.cu implements them with CUDA, cuda_ops_nocuda.cpp without (every
// operation then throws Error(Resource) "... built without CUDA"; queries report no device).
//
// Every function that takes `device` makes it current for the call and restores the caller's current device
// afterwards, so callers never depend on (or disturb) the thread's current device. Streams travel as void*
// (cudaStream_t). Errors: Error(Io) "<what>: <cudaGetErrorString>", except allocation failures, which are
// Error(Resource) naming the bytes requested and the bytes free.
#include <cstdint>
#include <string>

namespace wsb::cuda_ops {

/// True when this binary was compiled with CUDA.
bool built();
/// Devices cudaGetDeviceCount reports; 0 without a device, driver or CUDA build (the sticky error is cleared).
int visible_devices();
/// cudaDeviceProp::name of `device`.
std::string device_name(int device);
/// cudaMemGetInfo on `device`, bytes.
void memory_info(int device, uint64_t* free_bytes, uint64_t* total_bytes);

/// cudaMalloc of `bytes` on `device`. Out of memory -> Error(Resource) "<what>: cudaMalloc of <N> bytes on device
/// <d> failed: <error> (<F> bytes free)".
void* device_alloc(int device, uint64_t bytes, const std::string& what);
/// cudaFree; never throws (errors are dropped: it runs in destructors).
void device_free(int device, void* p) noexcept;

/// A cudaStreamNonBlocking stream on `device` (it does not synchronize with the legacy default stream).
void* stream_create(int device, const std::string& what);
/// Synchronizes and destroys; never throws.
void stream_destroy(int device, void* stream) noexcept;
/// cudaStreamSynchronize; returns "" on success, else cudaGetErrorString. Never throws.
std::string stream_synchronize(int device, void* stream) noexcept;

/// cudaMemsetAsync of `bytes` bytes to `value` on `stream`.
void memset_async(int device, void* dst, int value, uint64_t bytes, void* stream, const std::string& what);
/// cudaMemcpyAsync host -> device on `stream`; `src` must stay valid until the stream is synchronized.
void copy_h2d_async(int device, void* dst, const void* src, uint64_t bytes, void* stream, const std::string& what);
/// cudaMemcpyAsync device -> host on `stream`.
void copy_d2h_async(int device, void* dst, const void* src, uint64_t bytes, void* stream, const std::string& what);

/// A cudaEventDisableTiming event on `device` (a copy's completion, waited for without a whole-stream wait).
void* event_create(int device, const std::string& what);
/// cudaEventRecord of `event` on `stream`.
void event_record(int device, void* event, void* stream, const std::string& what);
/// cudaEventSynchronize; returns "" on success, else cudaGetErrorString. Never throws.
std::string event_synchronize(int device, void* event) noexcept;
/// cudaEventDestroy; never throws.
void event_destroy(int device, void* event) noexcept;

/// cudaDeviceProp::uuid of `device` into `uuid` (16 bytes).
void device_uuid(int device, uint8_t* uuid, const std::string& what);
/// cudaIpcGetMemHandle of `p` (a cudaMalloc'd base pointer on `device`) into `handle` (64 bytes,
/// CUDA_IPC_HANDLE_SIZE).
void ipc_get_handle(int device, void* p, uint8_t* handle, const std::string& what);
/// cudaIpcOpenMemHandle(handle, cudaIpcMemLazyEnablePeerAccess) on `device`: another process's allocation mapped
/// in this one. CUDA refuses a handle in the process that exported it.
void* ipc_open_handle(int device, const uint8_t* handle, const std::string& what);
/// cudaIpcCloseMemHandle; never throws.
void ipc_close_handle(int device, void* p) noexcept;

/// cudaHostRegister(p, bytes, cudaHostRegisterPortable): every device can DMA from [p, p + bytes). Refusal ->
/// Error(Resource) "pinning <bytes> B of host memory failed: <cuda error>".
void host_register(void* p, uint64_t bytes);
/// cudaHostUnregister; never throws.
void host_unregister(void* p) noexcept;
/// cudaHostAlloc(bytes, cudaHostAllocPortable): page-locked host memory every device can DMA from. Refusal ->
/// Error(Resource) "<what>: cudaHostAlloc of <bytes> B failed: <cuda error>".
void* host_alloc(uint64_t bytes, const std::string& what);
/// cudaFreeHost; never throws.
void host_free(void* p) noexcept;
/// cudaPointerGetAttributes(p).type == cudaMemoryTypeHost (page-locked or cudaHostAlloc'd memory). False without
/// CUDA, and for pageable or device memory.
bool host_is_pinned(const void* p) noexcept;

}  // namespace wsb::cuda_ops
