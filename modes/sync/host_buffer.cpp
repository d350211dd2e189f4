#include "modes/sync/host_buffer.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/errors.hpp"

namespace wsb {

namespace {

constexpr size_t kPage = 4096;

/// A zero-filled memfd mapping of `bytes` (a multiple of the page); the fd stays open for the buffer's life.
std::pair<uint8_t*, int> map_shared(size_t bytes) {
  const auto fail = [bytes](const char* what) {
    return Error(ErrorKind::Resource, fmt::format("shared host buffer: {} of {} B failed: {}", what, bytes,
                                                  std::strerror(errno)));
  };
  const int fd = memfd_create("wsbench-host-buffer", MFD_CLOEXEC);
  if (fd < 0) throw fail("memfd_create");
  // fallocate reserves the pages now: a shared mapping the host cannot back would otherwise raise SIGBUS at some
  // later first touch, in whichever process touched it.
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      (fallocate(fd, 0, 0, static_cast<off_t>(bytes)) != 0 && errno != EOPNOTSUPP && errno != ENOSYS)) {
    const Error e = fail("sizing the memfd");
    close(fd);
    throw e;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    const Error e = fail("mmap");
    close(fd);
    throw e;
  }
  return {static_cast<uint8_t*>(p), fd};
}

}  // namespace

void HostBufferFree::operator()(uint8_t* p) const {
  if (pinner != nullptr) pinner->unpin(p);
  if (fd >= 0) {
    munmap(p, mapped_bytes);
    close(fd);
    return;
  }
  std::free(p);
}

HostBuffer::HostBuffer(size_t bytes, size_t alignment, const HostPinner* pinner, HostMemory memory) : size_(bytes) {
  if (memory == HostMemory::Shared) {
    if (alignment > kPage) {
      throw Error(ErrorKind::Mismatch, fmt::format("shared host buffer: alignment {} B exceeds the page", alignment));
    }
    const size_t rounded = align_up(bytes == 0 ? 1 : bytes, kPage);
    auto [p, fd] = map_shared(rounded);  // zero already, and every page faulted in by MAP_POPULATE
    const HostBufferFree release{.pinner = nullptr, .fd = fd, .mapped_bytes = rounded};
    if (pinner != nullptr) {
      try {
        pinner->pin(p, rounded);
      } catch (...) {
        release(p);
        throw;
      }
    }
    data_ = std::unique_ptr<uint8_t, HostBufferFree>(p, HostBufferFree{pinner, fd, rounded});
    return;
  }
  const size_t rounded = align_up(bytes == 0 ? 1 : bytes, alignment);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(alignment, rounded));
  if (p == nullptr) throw std::bad_alloc();
  // Touch every page now (zero fill), so neither pinning nor a later pause pays the first-touch faults.
  std::memset(p, 0, rounded);
  if (pinner != nullptr) {
    try {
      pinner->pin(p, rounded);
    } catch (...) {
      std::free(p);
      throw;
    }
  }
  data_ = std::unique_ptr<uint8_t, HostBufferFree>(p, HostBufferFree{pinner});
}

}  // namespace wsb
