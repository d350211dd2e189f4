#pragma once
// Reusable decode scratch: heap bytes that survive from one prepare to the next, so a decode of the size seen
// before faults no page in (a fresh allocation of a large buffer is an mmap whose every page faults on first touch
// and whose munmap shoots down TLBs on every core).
#include <cstddef>
#include <cstdint>
#include <memory>

namespace wsb {

/// Heap bytes left uninitialized and kept across uses: reserve() reallocates only to grow. Pages of a large
/// reservation that nothing writes cost only address space, so reserving what a frame header declares (within
/// its bound) commits no more memory than the frame really produces.
class ScratchBytes {
 public:
  ScratchBytes() = default;
  ScratchBytes(ScratchBytes&&) noexcept = default;
  ScratchBytes& operator=(ScratchBytes&&) noexcept = default;
  /// At least `bytes` of capacity; the content is lost when it grows. Throws std::bad_alloc.
  void reserve(size_t bytes);
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t capacity() const { return capacity_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t capacity_ = 0;
};

}  // namespace wsb
