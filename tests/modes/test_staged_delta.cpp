// The device-delta pack (modes/sync/staged_delta.hpp): its counts are read and checked against its size, it applies
// on the host to exactly the entries its segments name, and a malformed pack is refused before anything is written.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/errors.hpp"
#include "modes/sync/staged_delta.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

using Bytes = std::vector<uint8_t>;

void put64(Bytes& b, uint64_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

/// A pack of two segments over `a` (12 bytes) and `b` (8 bytes), with one slot no segment names.
Bytes two_segment_pack(std::vector<uint8_t>& a, std::vector<uint8_t>& b) {
  Bytes pack(pack_bytes(2, 4));
  put64(pack, 0, 2);
  put64(pack, 8, 4);
  put64(pack, 16, pack_entry(0, 0x11111111));
  put64(pack, 24, pack_entry(2, 0x22222222));
  put64(pack, 32, pack_entry(1, 0x99999999));  // not named by any segment: ignored
  put64(pack, 40, pack_entry(1, 0x33333333));
  const uint64_t table = 16 + 8 * 4;
  put64(pack, table, reinterpret_cast<uintptr_t>(a.data()));
  put64(pack, table + 8, 0);
  put64(pack, table + 16, 2);
  put64(pack, table + 24, a.size());
  put64(pack, table + 32, reinterpret_cast<uintptr_t>(b.data()));
  put64(pack, table + 40, 3);
  put64(pack, table + 48, 1);
  put64(pack, table + 56, b.size());
  return pack;
}

TEST(StagedDelta, EntriesAndSizes) {
  EXPECT_EQ(pack_entry(7, 0xAABBCCDD), 0xAABBCCDD00000007ull);
  EXPECT_EQ(pack_bytes(0, 0), 16u);
  EXPECT_EQ(pack_bytes(3, 10), 16u + 80 + 96);
}

TEST(StagedDelta, PackAppliesExactlyTheEntriesItsSegmentsName) {
  Bytes a(12, 0xAB), b(8, 0xCD);
  const Bytes pack = two_segment_pack(a, b);
  const PackCounts counts = pack_counts(pack);
  EXPECT_EQ(counts.segments, 2u);
  EXPECT_EQ(counts.slots, 4u);
  apply_pack_on_host(pack);
  EXPECT_EQ(a, (Bytes{0x11, 0x11, 0x11, 0x11, 0xAB, 0xAB, 0xAB, 0xAB, 0x22, 0x22, 0x22, 0x22}));
  EXPECT_EQ(b, (Bytes{0xCD, 0xCD, 0xCD, 0xCD, 0x33, 0x33, 0x33, 0x33}));
}

TEST(StagedDelta, MalformedPacksAreRefusedBeforeAnyWrite) {
  Bytes a(12, 0xAB), b(8, 0xCD);
  const Bytes pack = two_segment_pack(a, b);
  test::expect_error([&] { apply_pack_on_host(Bytes(15)); }, ErrorKind::Mismatch,
                     {"staged delta pack of 15 bytes: shorter than its header"});
  Bytes short_pack(pack.begin(), pack.end() - 8);
  test::expect_error([&] { apply_pack_on_host(short_pack); }, ErrorKind::Mismatch,
                     {"staged delta pack of 104 bytes: 2 segments and 4 entry slots do not fill it"});
  Bytes huge = pack;
  put64(huge, 8, uint64_t{1} << 61);  // a slot count whose byte size wraps
  test::expect_error([&] { apply_pack_on_host(huge); }, ErrorKind::Mismatch, {"do not fill it"});

  // The second segment's word lies beyond its storage: refused, and the first segment was not applied either.
  Bytes beyond = pack;
  put64(beyond, 40, pack_entry(2, 0x33333333));
  test::expect_error([&] { apply_pack_on_host(beyond); }, ErrorKind::Mismatch,
                     {"staged delta pack of 112 bytes: segment 1: word 2 beyond its 8 bytes"});
  EXPECT_EQ(a, Bytes(12, 0xAB));

  Bytes past = pack;
  put64(past, 16 + 32 + 32 + 8, 3);  // segment 1: first slot 3, 2 entries
  put64(past, 16 + 32 + 32 + 16, 2);
  test::expect_error([&] { apply_pack_on_host(past); }, ErrorKind::Mismatch,
                     {"segment 1: 2 entries from slot 3 do not fit its 4 slots"});
  Bytes long_segment = pack;
  put64(long_segment, 16 + 32 + 16, kSegmentEntries + 1);
  test::expect_error([&] { apply_pack_on_host(long_segment); }, ErrorKind::Mismatch, {"at most 4096 per segment"});
  EXPECT_EQ(b, Bytes(8, 0xCD));
}

}  // namespace
}  // namespace wsb
