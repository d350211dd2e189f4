#pragma once
// Recycled receive buffers of the refit receivers: a fixed number of bucket-sized buffers, handed out and returned,
// never reallocated during a refit. Optionally each buffer is overwritten with a poison byte when it is returned, so
// any reference still held into it reads the pattern instead of stale-but-plausible weights (tests use this).
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "modes/sync/host_buffer.hpp"

namespace wsb::refit {

class BufferPool;

/// One buffer lent by a BufferPool (move-only); returns it to the pool when destroyed or reset().
class PooledBuffer {
 public:
  PooledBuffer() = default;
  PooledBuffer(PooledBuffer&& other) noexcept;
  PooledBuffer& operator=(PooledBuffer&& other) noexcept;
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;
  ~PooledBuffer() { reset(); }

  /// Returns the buffer to its pool (poisoning it when the pool poisons). No-op when empty. Never throws.
  void reset() noexcept;
  bool valid() const { return pool_ != nullptr; }
  /// The whole buffer: bucket_size_bytes of the pool.
  std::span<uint8_t> span() const { return data_; }

 private:
  friend class BufferPool;
  PooledBuffer(BufferPool* pool, size_t index, std::span<uint8_t> data) : pool_(pool), index_(index), data_(data) {}
  BufferPool* pool_ = nullptr;
  size_t index_ = 0;
  std::span<uint8_t> data_;
};

/// `count` buffers of `buffer_bytes` bytes each (64 B aligned). Thread-safe. Must outlive its PooledBuffers.
class BufferPool {
 public:
  /// `poison`: byte written over a whole buffer when it is returned; nullopt writes nothing. `pinner` pins the
  /// buffers for their life (the cuda-ipc transport copies device buckets into them: page-locked, that copy runs
  /// at the PCIe rate). Throws Error(Resource) when count or buffer_bytes is 0, and what the pinner throws.
  BufferPool(uint64_t buffer_bytes, size_t count, std::optional<uint8_t> poison = std::nullopt,
             const HostPinner* pinner = nullptr);

  /// Lends a free buffer. Throws Error(Resource, "refit: receive buffer pool exhausted (N of N buffers lent)") when
  /// none is free: the receivers hold at most one batch per rank, so an exhausted pool is a bug, never a wait.
  PooledBuffer acquire();

  uint64_t buffer_bytes() const { return buffer_bytes_; }
  size_t count() const { return free_flags_.size(); }
  /// Buffers lent right now, and the most lent at once since construction.
  size_t outstanding() const;
  size_t max_outstanding() const;
  /// Times a buffer was returned (each return is one recycling).
  uint64_t recycled() const;

 private:
  friend class PooledBuffer;
  void release(size_t index) noexcept;

  uint64_t buffer_bytes_;
  std::optional<uint8_t> poison_;
  HostBuffer storage_;  // count * stride bytes
  uint8_t* base_ = nullptr;
  uint64_t stride_ = 0;
  mutable std::mutex mu_;
  std::vector<bool> free_flags_;
  size_t outstanding_ = 0;
  size_t max_outstanding_ = 0;
  uint64_t recycled_ = 0;
};

}  // namespace wsb::refit
