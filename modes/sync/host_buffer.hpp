#pragma once
// Aligned host allocations (rank images are 4 KiB aligned so they can be pinned / registered with CUDA).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace wsb {

/// Page-locks host memory for DMA. The CUDA backend supplies one (cudaHostRegister, engine/cuda/pinned.hpp); the
/// CPU backend passes none. Modes stay free of CUDA by seeing only this interface.
class HostPinner {
 public:
  virtual ~HostPinner() = default;
  /// Pins [p, p + bytes) (p 4 KiB aligned). Throws Error(Resource) saying the bytes requested when refused.
  virtual void pin(void* p, size_t bytes) const = 0;
  /// Undoes pin(p, ...). Never throws.
  virtual void unpin(void* p) const noexcept = 0;
};

/// Deleter of HostBuffer: unpins (when pinned) and frees (or unmaps and closes a shared buffer's memfd).
struct HostBufferFree {
  const HostPinner* pinner = nullptr;
  int fd = -1;              ///< the memfd of a shared buffer, else -1
  size_t mapped_bytes = 0;  ///< length of a shared buffer's mapping
  void operator()(uint8_t* p) const;
};

/// Where a HostBuffer's memory comes from. Shared: a memfd mapped MAP_SHARED, so another process (a refit sender
/// process started with the fd, modes/refit/sender_job.hpp) can map the same bytes.
enum class HostMemory { Private, Shared };

/// Owning, aligned, zero-initialised byte buffer, optionally pinned for its whole life (pinning happens here, at
/// allocation, never inside a pause). Alignment must be a power of two.
class HostBuffer {
 public:
  HostBuffer() = default;
  /// Throws std::bad_alloc, or whatever `pinner->pin` throws (the memory is freed first). A Shared buffer is page
  /// aligned (alignment must be <= 4096) and throws Error(Resource) naming the bytes and errno when the memfd cannot
  /// be created, sized or mapped.
  HostBuffer(size_t bytes, size_t alignment, const HostPinner* pinner = nullptr,
             HostMemory memory = HostMemory::Private);
  std::span<uint8_t> span() { return {data_.get(), size_}; }
  std::span<const uint8_t> span() const { return {data_.get(), size_}; }
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  bool pinned() const { return data_.get_deleter().pinner != nullptr; }
  /// The memfd of a Shared buffer (owned by the buffer: dup it to hand it on), -1 for a Private one.
  int shared_fd() const { return data_.get_deleter().fd; }

 private:
  std::unique_ptr<uint8_t, HostBufferFree> data_;
  size_t size_ = 0;
};

/// Rounds `value` up to a multiple of `alignment` (power of two).
constexpr uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) & ~(alignment - 1); }

}  // namespace wsb
