#include "modes/sync/host_buffer.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace wsb {

void HostBufferFree::operator()(uint8_t* p) const {
  if (pinner != nullptr) pinner->unpin(p);
  std::free(p);
}

HostBuffer::HostBuffer(size_t bytes, size_t alignment, const HostPinner* pinner) : size_(bytes) {
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
