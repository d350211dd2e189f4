// engine/cuda/cuda_ipc.hpp on top of cuda_ops (compiles with and without CUDA).
#include "engine/cuda/cuda_ipc.hpp"

#include <fmt/format.h>

#include <deque>
#include <string>
#include <utility>
#include <vector>

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
  ~Exported() override {
    cuda_ops::stream_synchronize(device_, stream_.get());  // no copy still reads a source or writes the ring
    for (const auto& [ticket, event] : pending_) cuda_ops::event_destroy(device_, event);
    for (void* event : spare_events_) cuda_ops::event_destroy(device_, event);
    cuda_ops::device_free(device_, data_);
  }
  refit::IpcMemHandle handle() const override { return handle_; }
  void write(uint64_t offset, std::span<const uint8_t> src) override {
    refit::check_ring_range("cuda ipc", "write", offset, src.size(), bytes_);
    if (src.empty()) return;
    cuda_ops::copy_h2d_async(device_, static_cast<uint8_t*>(data_) + offset, src.data(), src.size(), stream_.get(),
                             "cuda ipc: bucket into the ring");
    stream_.wait("cuda ipc: bucket into the ring");
  }
  uint64_t write_async(uint64_t offset, std::span<const uint8_t> src) override {
    refit::check_ring_range("cuda ipc", "write", offset, src.size(), bytes_);
    void* event = nullptr;
    if (spare_events_.empty()) {
      event = cuda_ops::event_create(device_, "cuda ipc: staged copy event");
    } else {
      event = spare_events_.back();
      spare_events_.pop_back();
    }
    try {
      if (!src.empty()) {
        cuda_ops::copy_h2d_async(device_, static_cast<uint8_t*>(data_) + offset, src.data(), src.size(),
                                 stream_.get(), "cuda ipc: staged piece into the ring");
      }
      // One stream: copies complete in the order issued, so a ticket's event also covers every earlier copy.
      cuda_ops::event_record(device_, event, stream_.get(), "cuda ipc: staged piece into the ring");
    } catch (...) {
      spare_events_.push_back(event);
      throw;
    }
    pending_.emplace_back(++issued_, event);
    return issued_;
  }
  void wait_written(uint64_t ticket) override {
    if (ticket > issued_) {
      throw Error(ErrorKind::Mismatch,
                  fmt::format("cuda ipc: wait for copy {}, but only {} were started", ticket, issued_));
    }
    size_t done = 0;
    while (done < pending_.size() && pending_[done].first <= ticket) ++done;
    if (done == 0) return;
    if (const std::string error = cuda_ops::event_synchronize(device_, pending_[done - 1].second); !error.empty()) {
      throw Error(ErrorKind::Io, fmt::format("cuda ipc: staged piece into the ring: cudaEventSynchronize: {}", error));
    }
    for (size_t i = 0; i < done; ++i) spare_events_.push_back(pending_[i].second);
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
  }

 private:
  int device_;
  uint64_t bytes_;
  Stream stream_;
  void* data_;
  refit::IpcMemHandle handle_;
  uint64_t issued_ = 0;                         // tickets handed out by write_async
  std::deque<std::pair<uint64_t, void*>> pending_;  // (ticket, event recorded after its copy), oldest first
  std::vector<void*> spare_events_;             // completed events, recorded again by later copies
};

/// cudaHostAlloc'd staging memory.
class Pinned final : public refit::PinnedHostMemory {
 public:
  explicit Pinned(uint64_t bytes)
      : bytes_(bytes), data_(static_cast<uint8_t*>(cuda_ops::host_alloc(bytes, "cuda ipc: pinned staging"))) {}
  ~Pinned() override { cuda_ops::host_free(data_); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  std::span<uint8_t> bytes() override { return {data_, bytes_}; }

 private:
  uint64_t bytes_;
  uint8_t* data_;
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
  std::unique_ptr<refit::PinnedHostMemory> allocate_pinned(uint64_t bytes) const override {
    return std::make_unique<Pinned>(bytes);
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
