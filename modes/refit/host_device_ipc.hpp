#pragma once
// A DeviceIpc whose "device memory" is host memory (a memfd per allocation; the handle names the exporting process
// and its fd, the importer maps /proc/<pid>/fd/<fd>). It follows CUDA's process rule -- an import in the
// exporting process is refused -- so the whole cuda-ipc path (sender process, job, handshake, rings) runs and is
// tested without a GPU; `wsbench refit-sender --ipc host` uses it. Not a transport for real refits: the bytes
// never touch a GPU. An asynchronous write (write_async) copies only when it is waited for, the latest moment a
// device copy may complete, so a sender that reuses a staging piece or announces a bucket too early is caught.
#include <mutex>
#include <vector>

#include "modes/refit/device_ipc.hpp"

namespace wsb::refit {

class HostDeviceIpc final : public DeviceIpc {
 public:
  std::string_view kind() const override { return "host"; }
  /// "GPU" `device`'s UUID: the bytes "wsbench-host-gpu" with the device id in the last byte.
  std::array<uint8_t, 16> device_uuid(int device) const override;
  /// Throws Error(Resource) naming the bytes when the memfd cannot be created or mapped.
  std::unique_ptr<ExportedDeviceMemory> allocate(int device, uint64_t bytes) const override;
  /// Page-aligned ordinary memory; Error(Resource) naming the bytes when it cannot be allocated.
  std::unique_ptr<PinnedHostMemory> allocate_pinned(uint64_t bytes) const override;
  /// Throws Error(State) for a handle this process exported, Error(Io) naming the path when the exporter's fd
  /// cannot be opened (the exporter exited), Error(Mismatch) when its size is not `bytes`.
  std::unique_ptr<ImportedDeviceMemory> open(int device, const IpcMemHandle& handle, uint64_t bytes) const override;
  /// Local device ids passed to open(), in call order (what tests of the base GPU id mapping check).
  std::vector<int> opened_devices() const;

 private:
  mutable std::mutex mu_;
  mutable std::vector<int> opened_;
};

/// The process-wide instance `wsbench refit-sender --ipc host` uses.
const HostDeviceIpc& host_device_ipc();

}  // namespace wsb::refit
