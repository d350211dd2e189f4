#pragma once
// Aligned host allocations (rank images are 4 KiB aligned so they can be pinned / registered with CUDA later).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace wsb {

/// Owning, aligned, zero-initialised byte buffer. Alignment must be a power of two.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(size_t bytes, size_t alignment);
  std::span<uint8_t> span() { return {data_.get(), size_}; }
  std::span<const uint8_t> span() const { return {data_.get(), size_}; }
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

/// Rounds `value` up to a multiple of `alignment` (power of two).
constexpr uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) & ~(alignment - 1); }

}  // namespace wsb
