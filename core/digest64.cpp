#include "core/digest64.hpp"

#include <cstring>

namespace wsb {

uint64_t digest64_sum(std::span<const uint8_t> bytes, uint64_t first_word) {
  const size_t whole = bytes.size() / 8;
  uint64_t sum = 0;
  for (size_t i = 0; i < whole; ++i) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + 8 * i, 8);
    sum += digest64_term(word, first_word + i);
  }
  if (bytes.size() > 8 * whole) {
    uint64_t word = 0;
    std::memcpy(&word, bytes.data() + 8 * whole, bytes.size() - 8 * whole);
    sum += digest64_term(word, first_word + whole);
  }
  return sum;
}

}  // namespace wsb
