// engine/cuda/cuda_ipc.hpp on top of cuda_ops (compiles with and without CUDA).
#include "engine/cuda/cuda_ipc.hpp"

#include <fmt/format.h>

#include <string>

#include "engine/cuda/cuda_ops.hpp"
#include "core/errors.hpp"

namespace wsb {
namespace {

/// One stream of `device`, destroyed with its owner.
class Stream {
 public:
  Stream(int device, const std::string& what) : device_(device), stream_(cuda_ops::stream_create(device, what)) {}
  ~Stream() { cuda_ops::stream_destroy(device_, stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* get() const { return stream_; }
  /// Waits for everything issued; Error(Io) naming `what` on a CUDA error.
  void wait(const std::string& what) const {
    if (const std::string error = cuda_ops::stream_synchronize(device_, stream_); !error.empty()) {
      throw Error(ErrorKind::Io, fmt::format("{}: cudaStreamSynchronize: {}", what, error));
    }
  }

 private:
  int device_;
  void* stream_;
};

class Exported final : public refit::ExportedDeviceMemory {
 public:
  Exported(int device, uint64_t bytes)
      : device_(device),
        bytes_(bytes),
        stream_(device, "cuda ipc: bucket ring stream"),
        data_(cuda_ops::device_alloc(device, bytes, "cuda ipc: bucket ring")) {
    try {
      cuda_ops::ipc_get_handle(device, data_, handle_.bytes.data(), "cuda ipc: bucket ring");
    } catch (...) {
      cuda_ops::device_free(device_, data_);
      throw;
    }
  }
  ~Exported() override { cuda_ops::device_free(device_, data_); }
  refit::IpcMemHandle handle() const override { return handle_; }
  void write(uint64_t offset, std::span<const uint8_t> src) override {
    refit::check_ring_range("cuda ipc", "write", offset, src.size(), bytes_);
    if (src.empty()) return;
    cuda_ops::copy_h2d_async(device_, static_cast<uint8_t*>(data_) + offset, src.data(), src.size(), stream_.get(),
                             "cuda ipc: bucket into the ring");
    stream_.wait("cuda ipc: bucket into the ring");
  }

 private:
  int device_;
  uint64_t bytes_;
  Stream stream_;
  void* data_;
  refit::IpcMemHandle handle_;
};

class Imported final : public refit::ImportedDeviceMemory {
 public:
  Imported(int device, const refit::IpcMemHandle& handle, uint64_t bytes)
      : device_(device),
        bytes_(bytes),
        stream_(device, "cuda ipc: import stream"),
        data_(cuda_ops::ipc_open_handle(device, handle.bytes.data(), "cuda ipc: importing a bucket ring")) {}
  ~Imported() override { cuda_ops::ipc_close_handle(device_, data_); }
  void read(uint64_t offset, std::span<uint8_t> dst) override {
    refit::check_ring_range("cuda ipc", "read", offset, dst.size(), bytes_);
    if (dst.empty()) return;
    cuda_ops::copy_d2h_async(device_, dst.data(), static_cast<const uint8_t*>(data_) + offset, dst.size(),
                             stream_.get(), "cuda ipc: bucket out of the ring");
    stream_.wait("cuda ipc: bucket out of the ring");
  }

 private:
  int device_;
  uint64_t bytes_;
  Stream stream_;  // before the import: a stream that fails to start leaves nothing imported
  void* data_;
};

class CudaDeviceIpc final : public refit::DeviceIpc {
 public:
  std::string_view kind() const override { return "cuda"; }
  std::array<uint8_t, 16> device_uuid(int device) const override {
    std::array<uint8_t, 16> uuid{};
    cuda_ops::device_uuid(device, uuid.data(), fmt::format("cuda ipc: UUID of device {}", device));
    return uuid;
  }
  std::unique_ptr<refit::ExportedDeviceMemory> allocate(int device, uint64_t bytes) const override {
    return std::make_unique<Exported>(device, bytes);
  }
  std::unique_ptr<refit::ImportedDeviceMemory> open(int device, const refit::IpcMemHandle& handle,
                                                    uint64_t bytes) const override {
    return std::make_unique<Imported>(device, handle, bytes);
  }
};

}  // namespace

const refit::DeviceIpc& cuda_device_ipc() {
  static const CudaDeviceIpc ipc;
  return ipc;
}

}  // namespace wsb
