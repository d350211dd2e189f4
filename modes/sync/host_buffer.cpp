#include "modes/sync/host_buffer.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace wsb {

void HostBuffer::Free::operator()(uint8_t* p) const { std::free(p); }

HostBuffer::HostBuffer(size_t bytes, size_t alignment) : size_(bytes) {
  const size_t rounded = align_up(bytes == 0 ? 1 : bytes, alignment);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(alignment, rounded));
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  data_.reset(p);
}

}  // namespace wsb
