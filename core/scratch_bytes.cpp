#include "core/scratch_bytes.hpp"

#include <cstdlib>
#include <new>

namespace wsb {

void ScratchBytes::Free::operator()(uint8_t* p) const { std::free(p); }

void ScratchBytes::reserve(size_t bytes) {
  if (bytes <= capacity_ && data_) return;
  data_.reset();
  capacity_ = 0;
  // malloc, not new[]: no value-initialization pass, so untouched pages stay uncommitted.
  auto* p = static_cast<uint8_t*>(std::malloc(bytes == 0 ? 1 : bytes));
  if (p == nullptr) throw std::bad_alloc();
  data_.reset(p);
  capacity_ = bytes;
}

}  // namespace wsb
