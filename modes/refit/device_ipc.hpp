#pragma once
// Device memory shared between processes, as the refit's cuda-ipc transport needs it (cuda_ipc_transport.hpp):
// the trainer's sender process allocates each rank's bucket ring on a GPU and exports it as a handle; the engine's
// process imports the handle and copies buckets out. The interface keeps the modes free of CUDA: the CUDA backend
// implements it with cudaMalloc / cudaIpcGetMemHandle / cudaIpcOpenMemHandle (engine/cuda/cuda_ipc.hpp); tests use
// a host-memory stand-in with the same process rules.
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace wsb::refit {

/// An exported allocation's handle: the 64 opaque bytes of cudaIpcMemHandle_t (CUDA runtime API,
/// CUDA_IPC_HANDLE_SIZE = 64).
struct IpcMemHandle {
  std::array<uint8_t, 64> bytes{};
};

/// Device memory this process allocated and exported (the exporter side).
class ExportedDeviceMemory {
 public:
  virtual ~ExportedDeviceMemory() = default;
  virtual IpcMemHandle handle() const = 0;
  /// Copies `src` to [offset, offset + src.size()) of the allocation and waits until the bytes are there (so a
  /// host-side signal sent afterwards orders them for the importer). Throws Error(Mismatch) out of range,
  /// Error(Io) naming the CUDA error.
  virtual void write(uint64_t offset, std::span<const uint8_t> src) = 0;
  /// Starts copying `src` to [offset, offset + src.size()) of the allocation and returns without waiting: the copy
  /// may happen at any time until wait_written(ticket) returns, so `src` must neither change nor be freed before
  /// that. Copies are asynchronous to the host only from page-locked memory (DeviceIpc::allocate_pinned); from
  /// pageable memory the driver stages them. Returns the copy's ticket: 1 for the first copy, then increasing by 1.
  /// Throws Error(Mismatch) out of range, Error(Io) naming the CUDA error.
  virtual uint64_t write_async(uint64_t offset, std::span<const uint8_t> src) = 0;
  /// Waits until copy `ticket` and every copy started before it are in the allocation (so a host-side signal sent
  /// afterwards orders them for the importer). A ticket already waited for, and ticket 0, return at once. Throws Error(Mismatch)
  /// for a ticket not issued yet, Error(Io) naming the CUDA error.
  virtual void wait_written(uint64_t ticket) = 0;
};

/// Page-locked host memory for staging copies into exported device memory (ExportedDeviceMemory::write_async);
/// freed when destroyed.
class PinnedHostMemory {
 public:
  virtual ~PinnedHostMemory() = default;
  /// The whole allocation, 4 KiB aligned.
  virtual std::span<uint8_t> bytes() = 0;
};

/// Another process's exported memory, opened in this one (the importer side). Closed when destroyed.
class ImportedDeviceMemory {
 public:
  virtual ~ImportedDeviceMemory() = default;
  /// Copies [offset, offset + dst.size()) into `dst` (host memory) and waits for it. Throws Error(Mismatch) out of
  /// range, Error(Io) naming the CUDA error.
  virtual void read(uint64_t offset, std::span<uint8_t> dst) = 0;
};

/// Allocation and import of exportable device memory. Thread-safe.
class DeviceIpc {
 public:
  virtual ~DeviceIpc() = default;
  /// "cuda" or "host" (host_device_ipc.hpp): the sender process is started with the same kind (--ipc KIND).
  virtual std::string_view kind() const = 0;
  /// Allocates `bytes` on local device `device` and exports it. Throws Error(Resource) naming the bytes and device
  /// when refused (no device, out of memory), Error(Io) on another CUDA error.
  virtual std::unique_ptr<ExportedDeviceMemory> allocate(int device, uint64_t bytes) const = 0;
  /// Allocates `bytes` of page-locked host memory (cudaHostAlloc, portable to every device), contents unspecified.
  /// Throws Error(Resource) naming the bytes when refused.
  virtual std::unique_ptr<PinnedHostMemory> allocate_pinned(uint64_t bytes) const = 0;
  /// The GPU's identity, the same in every process whatever its device numbering (cudaDeviceProp::uuid, 16 B).
  /// Throws Error(Io) naming the device when it cannot be queried.
  virtual std::array<uint8_t, 16> device_uuid(int device) const = 0;
  /// Opens `handle` (`bytes` long, exported by another process) on local device `device`. Throws Error(Io) naming
  /// the CUDA error (a handle opened in its exporting process is refused by CUDA).
  virtual std::unique_ptr<ImportedDeviceMemory> open(int device, const IpcMemHandle& handle,
                                                     uint64_t bytes) const = 0;
};

/// GPU ids across processes. The sender names the GPU of a bucket ring by a physical id (its own device ordinal plus
/// its base_gpu_id); the engine maps it to its local id, physical - base_gpu_id of the engine (SGLang's
/// base_gpu_id: the host GPU the engine's local GPU 0 is). The two processes may number GPUs differently; the id
/// says which ring belongs to which engine GPU, and the handshake's GPU UUID then proves it (CudaIpcTransport).
/// Throws Error(Mismatch, "refit: rank R: ... physical GPU P ... base_gpu_id B ...") when P < B, or when P - B is
/// not `expected_local`, the device engine TP rank `rank` lives on.
int local_gpu_id(int rank, int physical, int base_gpu_id, int expected_local);

/// For DeviceIpc implementations: throws Error(Mismatch, "<owner>: <what> of [offset, offset + bytes) outside the
/// <size> B ring") unless the range lies within a ring of `size` bytes.
void check_ring_range(std::string_view owner, std::string_view what, uint64_t offset, uint64_t bytes,
                      uint64_t size);

}  // namespace wsb::refit
