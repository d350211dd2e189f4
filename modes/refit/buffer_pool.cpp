#include "modes/refit/buffer_pool.hpp"

#include <cstring>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "modes/refit/bucket.hpp"

namespace wsb::refit {

PooledBuffer::PooledBuffer(PooledBuffer&& other) noexcept
    : pool_(other.pool_), index_(other.index_), data_(other.data_) {
  other.pool_ = nullptr;
  other.data_ = {};
}

PooledBuffer& PooledBuffer::operator=(PooledBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    pool_ = other.pool_;
    index_ = other.index_;
    data_ = other.data_;
    other.pool_ = nullptr;
    other.data_ = {};
  }
  return *this;
}

void PooledBuffer::reset() noexcept {
  if (pool_ == nullptr) return;
  pool_->release(index_);
  pool_ = nullptr;
  data_ = {};
}

BufferPool::BufferPool(uint64_t buffer_bytes, size_t count, std::optional<uint8_t> poison, const HostPinner* pinner)
    : buffer_bytes_(buffer_bytes), poison_(poison) {
  if (buffer_bytes == 0 || count == 0) {
    throw Error(ErrorKind::Resource,
                fmt::format("refit: receive buffer pool needs buffers of > 0 bytes and > 0 buffers (got {} x {} B)",
                            count, buffer_bytes));
  }
  stride_ = (buffer_bytes + kEntryAlignment - 1) / kEntryAlignment * kEntryAlignment;
  storage_ = HostBuffer(stride_ * count, 4096, pinner);  // page aligned: what a pinner needs
  base_ = storage_.data();
  free_flags_.assign(count, true);
}

PooledBuffer BufferPool::acquire() {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < free_flags_.size(); ++i) {
    if (!free_flags_[i]) continue;
    free_flags_[i] = false;
    ++outstanding_;
    if (outstanding_ > max_outstanding_) max_outstanding_ = outstanding_;
    return PooledBuffer(this, i, {base_ + i * stride_, buffer_bytes_});
  }
  throw Error(ErrorKind::Resource, fmt::format("refit: receive buffer pool exhausted ({} of {} buffers lent)",
                                               outstanding_, free_flags_.size()));
}

void BufferPool::release(size_t index) noexcept {
  if (poison_) std::memset(base_ + index * stride_, *poison_, buffer_bytes_);
  std::lock_guard lock(mu_);
  free_flags_[index] = true;
  --outstanding_;
  ++recycled_;
}

size_t BufferPool::outstanding() const {
  std::lock_guard lock(mu_);
  return outstanding_;
}

size_t BufferPool::max_outstanding() const {
  std::lock_guard lock(mu_);
  return max_outstanding_;
}

uint64_t BufferPool::recycled() const {
  std::lock_guard lock(mu_);
  return recycled_;
}

}  // namespace wsb::refit
