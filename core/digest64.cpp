#include "core/digest64.hpp"

#include <cstring>

#include "core/cpu_features.hpp"

namespace wsb {
namespace {

uint64_t sum_words_scalar(const uint8_t* p, size_t words, uint64_t first_word) {
  uint64_t sum = 0;
  for (size_t i = 0; i < words; ++i) {
    uint64_t word;
    std::memcpy(&word, p + 8 * i, 8);
    sum += digest64_term(word, first_word + i);
  }
  return sum;
}

#ifdef WSBENCH_AVX512_DISPATCH
using Lanes = uint64_t __attribute__((vector_size(64)));

/// The same terms, eight words per step: scalar code is bound by its two 64-bit multiplies per word (about 9 GB/s
/// per core), which AVX-512DQ does eight at a time. Integer arithmetic mod 2^64, so the sum is the scalar one.
__attribute__((target("avx512f,avx512dq"))) uint64_t sum_words_avx512(const uint8_t* p, size_t words,
                                                                        uint64_t first_word) {
  Lanes index;  // (word index + 1) of each lane
  for (int k = 0; k < 8; ++k) index[k] = first_word + 1 + static_cast<uint64_t>(k);
  Lanes acc = {};
  size_t i = 0;
  for (; i + 8 <= words; i += 8) {
    Lanes z;
    std::memcpy(&z, p + 8 * i, sizeof z);
    z ^= index * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    acc += z ^ (z >> 31);
    index += 8;
  }
  uint64_t sum = 0;
  for (int k = 0; k < 8; ++k) sum += acc[k];
  return sum + sum_words_scalar(p + 8 * i, words - i, first_word + i);
}
#endif

}  // namespace

uint64_t digest64_sum(std::span<const uint8_t> bytes, uint64_t first_word) {
  const size_t whole = bytes.size() / 8;
  uint64_t sum = 0;
#ifdef WSBENCH_AVX512_DISPATCH
  if (cpu_has_avx512()) sum = sum_words_avx512(bytes.data(), whole, first_word);
  else sum = sum_words_scalar(bytes.data(), whole, first_word);
#else
  sum = sum_words_scalar(bytes.data(), whole, first_word);
#endif
  if (bytes.size() > 8 * whole) {
    uint64_t word = 0;
    std::memcpy(&word, bytes.data() + 8 * whole, bytes.size() - 8 * whole);
    sum += digest64_term(word, first_word + whole);
  }
  return sum;
}

}  // namespace wsb
