// first_differing_line (core/line_compare.hpp): for every line count up to a few blocks of four, every line and
// byte a difference can sit in, and every misalignment of either buffer, both forms name the line a bytewise scan
// names.
#include <gtest/gtest.h>

#include <vector>

#include "core/line_compare.hpp"

namespace wsb {
namespace {

size_t bytewise(const uint8_t* a, const uint8_t* b, size_t lines) {
  for (size_t p = 0; p < 64 * lines; ++p) {
    if (a[p] != b[p]) return p / 64;
  }
  return lines;
}

TEST(LineCompare, NamesTheLineABytewiseScanNamesForEveryPositionAndMisalignment) {
  constexpr size_t kMaxLines = 11;  // two blocks of four and a tail of three
  std::vector<uint8_t> a(64 * kMaxLines + 64), b(64 * kMaxLines + 64);
  for (size_t i = 0; i < a.size(); ++i) a[i] = b[i] = static_cast<uint8_t>(i * 131 + 7);
  size_t cases = 0;
  for (size_t shift_a : {0, 1, 7, 33}) {
    for (size_t shift_b : {0, 5, 63}) {
      uint8_t* pa = a.data() + shift_a;
      uint8_t* pb = b.data() + shift_b;
      for (size_t i = 0; i < 64 * kMaxLines; ++i) pb[i] = pa[i];
      for (size_t lines = 0; lines <= kMaxLines; ++lines) {
        EXPECT_EQ(first_differing_line(pa, pb, lines), lines);
        EXPECT_EQ(first_differing_line_words(pa, pb, lines), lines);
        for (size_t p = 0; p < 64 * lines; ++p) {
          for (uint8_t bit : {uint8_t{0x01}, uint8_t{0x80}}) {
            pb[p] ^= bit;
            ASSERT_EQ(first_differing_line(pa, pb, lines), p / 64) << lines << " lines, byte " << p;
            ASSERT_EQ(first_differing_line_words(pa, pb, lines), p / 64) << lines << " lines, byte " << p;
            // A second difference further on never moves the answer.
            if (p + 64 < 64 * lines) {
              pb[p + 64] ^= 0x10;
              ASSERT_EQ(first_differing_line(pa, pb, lines), bytewise(pa, pb, lines));
              pb[p + 64] ^= 0x10;
            }
            pb[p] ^= bit;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 12u * 2u * 64u * (kMaxLines * (kMaxLines + 1) / 2));
}

}  // namespace
}  // namespace wsb
