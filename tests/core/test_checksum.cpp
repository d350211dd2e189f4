// xxh3_128_hex and Xxh3Hasher (core/checksum.hpp) give the xxHash library's own XXH3-128 for every length that
// takes a distinct path through XXH3 (0..2 KiB covers the short-input branches, the stripe and the block
// boundaries) and for a large input fed in irregular pieces, whichever vector path this CPU selects.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <random>
#include <vector>

#include "core/checksum.hpp"
#include "tests/support/cpu_forms.hpp"

namespace wsb {
namespace {

WSBENCH_BOTH_CPU_FORMS(ChecksumForms);

std::string library_hex(const uint8_t* p, size_t n) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits(p, n));
  std::string out;
  static constexpr char kDigits[] = "0123456789abcdef";
  for (unsigned char c : canonical.digest) {
    out += kDigits[c >> 4];
    out += kDigits[c & 0xF];
  }
  return out;
}

TEST_P(ChecksumForms, EqualsTheLibrarysXxh3ForEveryShortLength) {
  EXPECT_EQ(xxh3_128_hex({}), "99aa06d3014798d86001c324468d497f");  // xxHash's documented empty-input value
  std::vector<uint8_t> bytes(2049);
  std::mt19937_64 rng(17);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  Xxh3Hasher hasher;
  for (size_t n = 0; n <= 2048; ++n) {
    const std::string expected = library_hex(bytes.data(), n);
    ASSERT_EQ(xxh3_128_hex({bytes.data(), n}), expected) << n << " bytes";
    hasher.reset();
    hasher.update({bytes.data(), n / 3});
    hasher.update({bytes.data() + n / 3, n - n / 3});
    ASSERT_EQ(hasher.hex(), expected) << n << " bytes in two pieces";
  }
}

TEST_P(ChecksumForms, StreamedPiecesOfALargeInputEqualTheLibrarysOneShot) {
  std::vector<uint8_t> bytes((3u << 20) + 12345);
  std::mt19937_64 rng(29);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  const std::string expected = library_hex(bytes.data(), bytes.size());
  EXPECT_EQ(xxh3_128_hex(bytes), expected);
  Xxh3Hasher hasher;
  size_t at = 0;
  for (size_t piece = 1; at < bytes.size(); piece = piece * 7 % 300007 + 1) {
    const size_t n = std::min(piece, bytes.size() - at);
    hasher.update({bytes.data() + at, n});
    at += n;
  }
  EXPECT_EQ(hasher.hex(), expected);
  EXPECT_EQ(hasher.hex(), expected);  // reading the digest leaves the state as it was
  // More bytes after a digest continue the same stream.
  const std::vector<uint8_t> more(777, 0x5A);
  hasher.update(more);
  std::vector<uint8_t> all = bytes;
  all.insert(all.end(), more.begin(), more.end());
  EXPECT_EQ(hasher.hex(), library_hex(all.data(), all.size()));
  bytes[bytes.size() / 2] ^= 1;
  EXPECT_NE(xxh3_128_hex(bytes), expected);
}

}  // namespace
}  // namespace wsb
