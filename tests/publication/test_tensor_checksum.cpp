// Checksum texts under "xxh3-128" and "xxh3-128-ranges": the digests are xxHash's own over exactly the bytes of
// each range, a range is verified the moment its last byte arrives however the bytes are cut, and a mismatch names
// the range.
#include <gtest/gtest.h>

#include <random>

#include "core/errors.hpp"
#include "publication/tensor_checksum.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

using Bytes = std::vector<uint8_t>;
using test::error_message;

constexpr uint64_t kMiB = 1 << 20;

Bytes random_bytes(size_t n, uint32_t seed) {
  Bytes b(n);
  std::mt19937 rng(seed);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

std::string hex_of(const Bytes& b, uint64_t from, uint64_t to) {
  return xxh3_128_hex(std::span(b).subspan(from, to - from));
}

TEST(ChecksumRanges, CountsAndRangeBytesRule) {
  EXPECT_EQ(checksum_range_count(0, 0), 1u);
  EXPECT_EQ(checksum_range_count(5 * kMiB, 0), 1u);
  EXPECT_EQ(checksum_range_count(0, kMiB), 1u);
  EXPECT_EQ(checksum_range_count(kMiB, kMiB), 1u);
  EXPECT_EQ(checksum_range_count(kMiB + 1, kMiB), 2u);
  EXPECT_EQ(checksum_range_count(3 * kMiB, kMiB), 3u);
  EXPECT_EQ(checksum_range_bytes_problem(0), "");
  EXPECT_EQ(checksum_range_bytes_problem(32 * kMiB), "");
  EXPECT_EQ(checksum_range_bytes_problem(kMiB + 4096),
            "must be 0 (one xxh3-128 per tensor) or a multiple of 1 MiB (1048576), got 1052672");
  EXPECT_TRUE(is_xxh3_128_ranges_hex(std::string(64, 'a')));
  EXPECT_FALSE(is_xxh3_128_ranges_hex(""));
  EXPECT_FALSE(is_xxh3_128_ranges_hex(std::string(63, 'a')));
  EXPECT_FALSE(is_xxh3_128_ranges_hex(std::string(32, 'A')));
}

TEST(ChecksumRanges, TextIsTheDigestOfEachRangeInOrder) {
  const Bytes b = random_bytes(2 * kMiB + kMiB / 2, 3);
  EXPECT_EQ(tensor_checksum_text(b, 0), xxh3_128_hex(b));
  EXPECT_EQ(tensor_checksum_text(b, kMiB),
            hex_of(b, 0, kMiB) + hex_of(b, kMiB, 2 * kMiB) + hex_of(b, 2 * kMiB, b.size()));
  // An exact multiple has no empty last range; a tensor within one range (empty included) has one digest.
  const Bytes two(b.begin(), b.begin() + 2 * kMiB);
  EXPECT_EQ(tensor_checksum_text(two, kMiB), hex_of(b, 0, kMiB) + hex_of(b, kMiB, 2 * kMiB));
  EXPECT_EQ(tensor_checksum_text(two, 4 * kMiB), xxh3_128_hex(two));
  EXPECT_EQ(tensor_checksum_text({}, kMiB), xxh3_128_hex({}));
  // Fed in pieces that straddle the range boundaries: the same text.
  ChecksumBuilder builder(kMiB);
  for (size_t at = 0; at < b.size(); at += 300001) {
    builder.update(std::span(b).subspan(at, std::min<size_t>(300001, b.size() - at)));
  }
  EXPECT_EQ(builder.text(), tensor_checksum_text(b, kMiB));
}

TEST(ChecksumRanges, ExpectedChecksumNeedsOneDigestPerRange) {
  const Bytes b = random_bytes(3 * kMiB, 4);
  const ExpectedChecksum e(tensor_checksum_text(b, kMiB), kMiB, b.size(), "tensor 't'");
  EXPECT_TRUE(e.ranged());
  ASSERT_EQ(e.range_count(), 3u);
  EXPECT_EQ(e.range_begin(2), 2 * kMiB);
  EXPECT_EQ(e.range_end(2), 3 * kMiB);
  EXPECT_EQ(e.range_at(kMiB), 1u);
  EXPECT_EQ(e.range_at(3 * kMiB), 3u);
  EXPECT_EQ(e.digest(1), hex_of(b, kMiB, 2 * kMiB));
  EXPECT_EQ(error_message([&] { ExpectedChecksum(tensor_checksum_text(b, kMiB), kMiB, 4 * kMiB, "tensor 't'"); },
                          ErrorKind::Format),
            "tensor 't': checksum holds 96 hex characters, 4194304 bytes need 4 xxh3-128 digests (128 characters, "
            "ranges of 1048576 bytes)");
  EXPECT_EQ(error_message([&] { ExpectedChecksum(std::string(64, 'a'), 0, 10, "tensor 'u'"); }, ErrorKind::Format),
            "tensor 'u': checksum holds 64 hex characters, 10 bytes need 1 xxh3-128 digest (32 characters)");
}

TEST(ChecksumRanges, VerifierComparesEachRangeWhenItsLastByteArrives) {
  Bytes b = random_bytes(3 * kMiB + 100, 5);
  const ExpectedChecksum e(tensor_checksum_text(b, kMiB), kMiB, b.size(), "tensor 't'");
  Xxh3Hasher hasher;
  {
    RangeVerifier v(e, hasher);
    for (size_t at = 0; at < b.size(); at += 65537) v.update(std::span(b).subspan(at, std::min<size_t>(65537, b.size() - at)));
    EXPECT_EQ(v.mismatch(), nullptr);
    EXPECT_EQ(v.position(), b.size());
  }
  {
    // A verifier of one segment starts at its first range.
    RangeVerifier v(e, hasher, 2);
    EXPECT_EQ(v.position(), 2 * kMiB);
    v.update(std::span(b).subspan(2 * kMiB));
    EXPECT_EQ(v.mismatch(), nullptr);
    EXPECT_EQ(v.position(), b.size());
  }
  b[2 * kMiB - 1] ^= 0x10;  // last byte of range 1
  RangeVerifier v(e, hasher);
  v.update(std::span(b).first(2 * kMiB - 1));
  EXPECT_EQ(v.mismatch(), nullptr);  // range 1 not complete yet
  v.update(std::span(b).subspan(2 * kMiB - 1));
  const ChecksumMismatch* m = v.mismatch();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->range, 1u);
  EXPECT_EQ(m->from, kMiB);
  EXPECT_EQ(m->to, 2 * kMiB);
  EXPECT_EQ(m->actual, hex_of(b, kMiB, 2 * kMiB));
  EXPECT_EQ(v.position(), 2 * kMiB);  // nothing hashed after the first mismatch
  EXPECT_EQ(error_message([&] { throw_checksum_mismatch("t", "000002", e, *m); }, ErrorKind::Checksum),
            "tensor 't': xxh3-128 of version 000002 bytes [1048576, 2097152) (range 2 of 4) is " + m->actual +
                ", publication says " + std::string(e.digest(1)));
}

TEST(ChecksumRanges, OneDigestPerTensorKeepsTheForkMessage) {
  Bytes b = random_bytes(5000, 6);
  const ExpectedChecksum e(xxh3_128_hex(b), 0, b.size(), "tensor 't'");
  EXPECT_FALSE(e.ranged());
  EXPECT_EQ(e.range_end(0), 5000u);
  Xxh3Hasher hasher;
  const auto verify = [&](std::span<const uint8_t> fed) {
    RangeVerifier v(e, hasher);
    v.update(fed);
    v.require_verified_to(b.size(), "t", "000001");
  };
  verify(b);
  // Bytes that stop short of the end leave the range uncompared: refused, not passed.
  EXPECT_EQ(error_message([&] { verify(std::span(b).first(4999)); }, ErrorKind::State),
            "tensor 't': checksum verified to byte 4999 of 5000");
  b[4999] ^= 1;
  EXPECT_EQ(error_message([&] { verify(b); }, ErrorKind::Checksum),
            "tensor 't': xxh3-128 of version 000001 is " + xxh3_128_hex(b) + ", publication says " + e.text());
  // An empty tensor: one digest, of nothing, complete before any byte.
  const ExpectedChecksum empty(xxh3_128_hex({}), kMiB, 0, "tensor 'e'");
  RangeVerifier v(empty, hasher);
  EXPECT_EQ(v.mismatch(), nullptr);
  EXPECT_EQ(v.position(), 0u);
  EXPECT_EQ(empty.range_at(0), 0u);
  // A verifier of an empty tensor's only segment, as a fold starts it (range_at of the segment's begin), under
  // either format: the digest of nothing is compared at once.
  const ExpectedChecksum whole_wrong(std::string(32, '0'), 0, 0, "tensor 'e'");
  RangeVerifier at_begin(whole_wrong, hasher, whole_wrong.range_at(0));
  ASSERT_NE(at_begin.mismatch(), nullptr);
  const ExpectedChecksum wrong(std::string(32, '0'), kMiB, 0, "tensor 'e'");
  RangeVerifier w(wrong, hasher);
  ASSERT_NE(w.mismatch(), nullptr);
  EXPECT_EQ(w.mismatch()->actual, xxh3_128_hex({}));
}

}  // namespace
}  // namespace wsb
