#include "modes/refit/host_device_ipc.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <deque>

#include "core/errors.hpp"
#include "modes/sync/host_buffer.hpp"

namespace wsb::refit {
namespace {

/// The handle's bytes: who exported it and under which fd.
struct HostHandle {
  int32_t pid;
  int32_t fd;
  uint64_t bytes;
};
static_assert(sizeof(HostHandle) <= sizeof(IpcMemHandle::bytes));

/// A shared mapping of `fd` (bytes long); unmapped and closed with the owner.
class Mapped {
 public:
  Mapped(int fd, uint64_t bytes, const char* what) : fd_(fd), bytes_(bytes) {
    data_ = mmap(nullptr, bytes == 0 ? 1 : bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data_ == MAP_FAILED) {
      const int error = errno;
      close(fd);
      throw Error(ErrorKind::Resource, fmt::format("host ipc: {}: mmap of {} B failed: {}", what, bytes,
                                                   std::strerror(error)));
    }
  }
  ~Mapped() {
    munmap(data_, bytes_ == 0 ? 1 : bytes_);
    close(fd_);
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  uint8_t* data() const { return static_cast<uint8_t*>(data_); }
  int fd() const { return fd_; }
  uint64_t bytes() const { return bytes_; }

 private:
  int fd_;
  uint64_t bytes_;
  void* data_ = nullptr;
};

class Exported final : public ExportedDeviceMemory {
 public:
  Exported(int fd, uint64_t bytes) : map_(fd, bytes, "exporting a ring") {}
  IpcMemHandle handle() const override {
    IpcMemHandle h;
    const HostHandle host{.pid = static_cast<int32_t>(getpid()), .fd = map_.fd(), .bytes = map_.bytes()};
    std::memcpy(h.bytes.data(), &host, sizeof host);
    return h;
  }
  void write(uint64_t offset, std::span<const uint8_t> src) override {
    check_ring_range("host ipc", "write", offset, src.size(), map_.bytes());
    wait_written(issued_);  // as on one CUDA stream: after every copy started before it
    if (!src.empty()) std::memcpy(map_.data() + offset, src.data(), src.size());
  }
  uint64_t write_async(uint64_t offset, std::span<const uint8_t> src) override {
    check_ring_range("host ipc", "write", offset, src.size(), map_.bytes());
    pending_.push_back(Copy{.ticket = ++issued_, .offset = offset, .src = src});
    return issued_;
  }
  void wait_written(uint64_t ticket) override {
    if (ticket > issued_) {
      throw Error(ErrorKind::Mismatch, fmt::format("host ipc: wait for copy {}, but only {} were started", ticket,
                                                   issued_));
    }
    while (!pending_.empty() && pending_.front().ticket <= ticket) {
      const Copy& c = pending_.front();
      if (!c.src.empty()) std::memcpy(map_.data() + c.offset, c.src.data(), c.src.size());
      pending_.pop_front();
    }
  }

 private:
  /// A copy started and not yet done: the stand-in copies at the latest moment the interface allows (when it is
  /// waited for), so a caller that reuses a source or signals the importer too early sees stale bytes.
  struct Copy {
    uint64_t ticket;
    uint64_t offset;
    std::span<const uint8_t> src;
  };
  Mapped map_;
  uint64_t issued_ = 0;
  std::deque<Copy> pending_;  // never waited for when destroyed: dropped
};

/// "Pinned" memory of the stand-in: page-aligned ordinary memory.
class Pinned final : public PinnedHostMemory {
 public:
  explicit Pinned(uint64_t bytes) : buffer_(bytes, 4096) {}
  std::span<uint8_t> bytes() override { return buffer_.span(); }

 private:
  HostBuffer buffer_;
};

class Imported final : public ImportedDeviceMemory {
 public:
  Imported(int fd, uint64_t bytes) : map_(fd, bytes, "importing a ring") {}
  void read(uint64_t offset, std::span<uint8_t> dst) override {
    check_ring_range("host ipc", "read", offset, dst.size(), map_.bytes());
    if (!dst.empty()) std::memcpy(dst.data(), map_.data() + offset, dst.size());
  }

 private:
  Mapped map_;
};

}  // namespace

std::unique_ptr<ExportedDeviceMemory> HostDeviceIpc::allocate(int device, uint64_t bytes) const {
  const int fd = memfd_create("wsbench-host-ipc", MFD_CLOEXEC);  // /proc/<pid>/fd/<fd> opens it anyway
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    if (fd >= 0) close(fd);
    throw Error(ErrorKind::Resource, fmt::format("host ipc: allocating {} B for device {} failed: {}", bytes, device,
                                                 std::strerror(error)));
  }
  return std::make_unique<Exported>(fd, bytes);
}

std::unique_ptr<PinnedHostMemory> HostDeviceIpc::allocate_pinned(uint64_t bytes) const {
  try {
    return std::make_unique<Pinned>(bytes);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::Resource, fmt::format("host ipc: allocating {} B of staging memory failed", bytes));
  }
}

std::array<uint8_t, 16> HostDeviceIpc::device_uuid(int device) const {
  std::array<uint8_t, 16> uuid{};
  std::memcpy(uuid.data(), "wsbench-host-gpu", 16);
  uuid[15] = static_cast<uint8_t>(device);
  return uuid;
}

std::unique_ptr<ImportedDeviceMemory> HostDeviceIpc::open(int device, const IpcMemHandle& handle,
                                                          uint64_t bytes) const {
  HostHandle host{};
  std::memcpy(&host, handle.bytes.data(), sizeof host);
  if (host.pid == static_cast<int32_t>(getpid())) {
    throw Error(ErrorKind::State, fmt::format("host ipc: handle exported by this process (pid {})", host.pid));
  }
  const std::string path = fmt::format("/proc/{}/fd/{}", host.pid, host.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    throw Error(ErrorKind::Io, fmt::format("host ipc: cannot open {}: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != bytes || host.bytes != bytes) {
    close(fd);
    throw Error(ErrorKind::Mismatch, fmt::format("host ipc: {} holds {} B, the importer expects {} B", path,
                                                 static_cast<uint64_t>(st.st_size), bytes));
  }
  {
    std::lock_guard lock(mu_);
    opened_.push_back(device);
  }
  return std::make_unique<Imported>(fd, bytes);
}

std::vector<int> HostDeviceIpc::opened_devices() const {
  std::lock_guard lock(mu_);
  return opened_;
}

const HostDeviceIpc& host_device_ipc() {
  static const HostDeviceIpc ipc;
  return ipc;
}

}  // namespace wsb::refit
