#include "core/line_compare.hpp"

#include <cstring>

#include "core/cpu_features.hpp"

#ifdef WSBENCH_AVX512_DISPATCH
#include <immintrin.h>
#endif

namespace wsb {
namespace {

bool line_differs(const uint8_t* a, const uint8_t* b) {
  uint64_t any = 0;
  for (int k = 0; k < 8; ++k) {
    uint64_t x, y;
    std::memcpy(&x, a + 8 * k, 8);
    std::memcpy(&y, b + 8 * k, 8);
    any |= x ^ y;
  }
  return any != 0;
}

#ifdef WSBENCH_AVX512_DISPATCH
/// Four lines per step, their xors or-ed into one register and tested once: a scalar line costs eight loads and
/// xors of each buffer, which bound the rank image's compare by instructions rather than by memory.
__attribute__((target("avx512f"))) size_t first_differing_line_avx512(const uint8_t* a, const uint8_t* b,
                                                                        size_t lines) {
  size_t i = 0;
  for (; i + 4 <= lines; i += 4) {
    const uint8_t* p = a + 64 * i;
    const uint8_t* q = b + 64 * i;
    __m512i x = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_loadu_si512(q));
    x = _mm512_or_si512(x, _mm512_xor_si512(_mm512_loadu_si512(p + 64), _mm512_loadu_si512(q + 64)));
    x = _mm512_or_si512(x, _mm512_xor_si512(_mm512_loadu_si512(p + 128), _mm512_loadu_si512(q + 128)));
    x = _mm512_or_si512(x, _mm512_xor_si512(_mm512_loadu_si512(p + 192), _mm512_loadu_si512(q + 192)));
    if (_mm512_test_epi64_mask(x, x) != 0) break;
  }
  for (; i < lines; ++i) {
    const __m512i x = _mm512_xor_si512(_mm512_loadu_si512(a + 64 * i), _mm512_loadu_si512(b + 64 * i));
    if (_mm512_test_epi64_mask(x, x) != 0) return i;
  }
  return lines;
}
#endif

}  // namespace

size_t first_differing_line(const uint8_t* a, const uint8_t* b, size_t lines) {
#ifdef WSBENCH_AVX512_DISPATCH
  if (cpu_has_avx512()) return first_differing_line_avx512(a, b, lines);
#endif
  return first_differing_line_words(a, b, lines);
}

size_t first_differing_line_words(const uint8_t* a, const uint8_t* b, size_t lines) {
  for (size_t i = 0; i < lines; ++i) {
    if (line_differs(a + 64 * i, b + 64 * i)) return i;
  }
  return lines;
}

}  // namespace wsb
