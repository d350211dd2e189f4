#pragma once
// Small device-memory utilities for the engine/quant tests and benchmarks, usable from C++20 code that must not
// include CUDA headers: an owned device buffer with synchronous copies, and a CUDA graph captured from a callback.
// C++17, no CUDA headers. In a build without CUDA every constructor throws Error(Resource) "... built without CUDA".
#include <cstdint>
#include <functional>

#include "engine/quant/device_linear.hpp"  // cudaStream_t

namespace wsb {

/// One cudaMalloc allocation on the device current at construction, freed at destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates `bytes` (> 0). Throws Error(Resource) "no CUDA device ..." without a device, or naming the bytes
  /// needed and free when the device lacks the memory; Error(Resource) "built without CUDA" without CUDA.
  explicit DeviceBuffer(uint64_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(data_);
  }
  /// Copies host bytes [src, src + bytes) to [offset, offset + bytes) and waits for the copy. Throws
  /// Error(Mismatch) when the range exceeds the buffer, Error(Io) on a CUDA failure.
  void upload(const void* src, uint64_t bytes, uint64_t offset = 0);
  /// Waits for all work of the device (cudaDeviceSynchronize, so kernels on any stream have landed), then copies
  /// [offset, offset + bytes) to host `dst`. Errors as upload.
  void download(void* dst, uint64_t bytes, uint64_t offset = 0) const;
  /// Sets every byte to `value` and waits.
  void fill(uint8_t value);

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

/// A CUDA graph captured once from `enqueue(stream)` on a stream of the current device (global capture mode), then
/// replayed. The graph keeps every kernel argument of the capture (pointers included); device memory the kernels
/// read (e.g. expert ids) is read afresh at each replay.
class DeviceGraph {
 public:
  /// Throws Error(Io) naming the step on a CUDA failure (capture, instantiate), Error(Resource) without a device
  /// or without CUDA; whatever `enqueue` throws (the capture is ended first).
  explicit DeviceGraph(const std::function<void(cudaStream_t)>& enqueue);
  ~DeviceGraph();
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;
  /// Launches the graph and waits for it. Throws Error(Io) on a CUDA failure.
  void replay();

 private:
  void release() noexcept;
  void* stream_ = nullptr;  // cudaStream_t
  void* graph_ = nullptr;   // cudaGraph_t
  void* exec_ = nullptr;    // cudaGraphExec_t
};

/// cudaDeviceSynchronize on the current device; Error(Io) with the CUDA error otherwise.
void device_synchronize();

}  // namespace wsb
