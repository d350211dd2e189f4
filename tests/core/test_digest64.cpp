// digest64 (core/digest64.hpp): the values of an independent implementation (Python, from the definition in
// the header), piecewise sums over any split equal the whole, and every single-bit change moves the digest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

#include "core/digest64.hpp"
#include "tests/support/cpu_forms.hpp"

namespace wsb {
namespace {

WSBENCH_BOTH_CPU_FORMS(Digest64Forms);

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST_P(Digest64Forms, ValuesOfAnIndependentImplementation) {
  EXPECT_EQ(digest64({}), 0x0ull);
  EXPECT_EQ(digest64(bytes_of("wsbench")), 0x93b8af642fca1e12ull);  // one zero-padded word
  std::vector<uint8_t> ramp(20);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(digest64(ramp), 0x48226c623f52dc26ull);  // two words and a 4-byte tail
  EXPECT_EQ(digest64(std::vector<uint8_t>(4096)), 0x6ea6788d1f9e3c65ull);  // zeros still depend on position
}

TEST_P(Digest64Forms, PiecesAddUpAndEveryBitCounts) {
  std::mt19937_64 rng(3);
  std::vector<uint8_t> data(1000 * 8 + 5);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const uint64_t whole = digest64(data);
  const size_t cut = 8 * 371;
  const uint64_t sum = digest64_sum(std::span(data).subspan(0, cut)) + digest64_sum(std::span(data).subspan(cut), cut / 8);
  EXPECT_EQ(digest64_close(sum, data.size()), whole);
  for (int k = 0; k < 200; ++k) {
    const size_t bit = rng() % (8 * data.size());
    data[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_NE(digest64(data), whole) << "bit " << bit;
    data[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
  // Swapping two different words (same multiset of words, other positions) is seen too.
  std::swap_ranges(data.begin(), data.begin() + 8, data.begin() + 16);
  EXPECT_NE(digest64(data), whole);
}

TEST_P(Digest64Forms, SumsOfEveryLengthAndStartEqualTheSumOfTheirTerms) {
  // The sum is taken eight words at a time where the CPU allows it: any length (a tail of whole words and of
  // bytes) and any starting word index must give the term-by-term sum of the definition.
  std::mt19937_64 rng(5);
  std::vector<uint8_t> data(8 * 70 + 7);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (const uint64_t first : {uint64_t{0}, uint64_t{1}, uint64_t{13}, (uint64_t{1} << 40) + 3, ~uint64_t{0} - 20}) {
    for (size_t n = 0; n <= data.size(); ++n) {
      uint64_t want = 0;
      for (size_t w = 0; 8 * w < n; ++w) {
        uint64_t word = 0;
        std::memcpy(&word, data.data() + 8 * w, std::min<size_t>(8, n - 8 * w));
        want += digest64_term(word, first + w);
      }
      ASSERT_EQ(digest64_sum(std::span(data).subspan(0, n), first), want) << n << " bytes from word " << first;
    }
  }
  EXPECT_EQ(digest64_sum(data, 7), 0xdf101ef15930302aull);  // an independent implementation (Python)
}

}  // namespace
}  // namespace wsb
