// The device-delta encoding (modes/sync/staged_delta.hpp): diff_storage records exactly the changed 32-bit words
// (ascending, new values), gives up on dense storages, and digests the live bytes; a pack applies on the host to
// exactly the new bytes; malformed packs are refused before anything is written out of range.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/digest64.hpp"
#include "core/errors.hpp"
#include "modes/sync/staged_delta.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

using Bytes = std::vector<uint8_t>;

TEST(StagedDelta, DiffRecordsExactlyTheChangedWords) {
  Bytes live(44);  // 11 words: the last one is a lone 32-bit tail word after 5 whole 64-bit words
  for (size_t i = 0; i < live.size(); ++i) live[i] = static_cast<uint8_t>(3 * i + 1);
  Bytes next = live;
  next[5] ^= 0x80;   // word 1
  next[6] ^= 0x01;   // word 1 again
  next[16] ^= 0x02;  // word 4
  next[43] ^= 0xFF;  // word 10 (the tail)
  StorageDelta d;
  d.rank = 1;
  d.index = 7;
  uint64_t changed = 0;
  const uint64_t digest = diff_storage(live, next, 100, d, &changed);
  EXPECT_EQ(digest, digest64(live));
  EXPECT_EQ(changed, 3u);
  EXPECT_EQ(d.positions, (std::vector<uint32_t>{1, 4, 10}));
  uint32_t w1, w4, w10;
  std::memcpy(&w1, &next[4], 4);
  std::memcpy(&w4, &next[16], 4);
  std::memcpy(&w10, &next[40], 4);
  EXPECT_EQ(d.values, (std::vector<uint32_t>{w1, w4, w10}));
  EXPECT_EQ(d.storage_bytes, 44u);
  EXPECT_EQ(d.staged_bytes(), 3u * 8 + 32);

  // More changed words than allowed: counted, nothing recorded (the storage is copied in full).
  EXPECT_EQ(diff_storage(live, next, 2, d, &changed), digest64(live));
  EXPECT_EQ(changed, 3u);
  EXPECT_TRUE(d.positions.empty());
  EXPECT_TRUE(d.values.empty());

  // Identity: nothing changed.
  EXPECT_EQ(diff_storage(live, live, 100, d, &changed), digest64(live));
  EXPECT_EQ(changed, 0u);
  EXPECT_TRUE(d.positions.empty());
}

TEST(StagedDelta, DiffRefusesStoragesThatAreNotWordAddressable) {
  Bytes a(10), b(10), c(12);
  StorageDelta d;
  uint64_t changed = 0;
  EXPECT_THROW(diff_storage(a, b, 10, d, &changed), Error);  // not a multiple of 4
  EXPECT_THROW(diff_storage(c, a, 10, d, &changed), Error);  // sizes differ
}

TEST(StagedDelta, PackAppliesToExactlyTheNewBytes) {
  std::mt19937_64 rng(11);
  std::vector<Bytes> live(4), next(4);
  const size_t sizes[] = {4096, 64, 1 << 16, 12};
  std::vector<StorageDelta> deltas(4);
  for (size_t k = 0; k < 4; ++k) {
    live[k].resize(sizes[k]);
    for (auto& x : live[k]) x = static_cast<uint8_t>(rng());
    next[k] = live[k];
    for (size_t i = 0; i < sizes[k] / 50; ++i) next[k][rng() % sizes[k]] ^= static_cast<uint8_t>(1 + rng() % 255);
    deltas[k].rank = static_cast<int>(k % 2);
    deltas[k].index = k;
    uint64_t changed = 0;
    diff_storage(live[k], next[k], sizes[k], deltas[k], &changed);
  }
  std::vector<const StorageDelta*> ptrs;
  std::vector<uint64_t> addresses;
  for (size_t k = 0; k < 4; ++k) {
    ptrs.push_back(&deltas[k]);
    addresses.push_back(reinterpret_cast<uintptr_t>(live[k].data()));
  }
  Bytes pack(pack_bytes(ptrs));
  uint64_t entries = 0;
  for (const auto& d : deltas) entries += d.positions.size();
  EXPECT_EQ(pack.size(), 16 + 4 * 32 + 8 * entries);
  const uint64_t digest = pack_deltas(ptrs, addresses, pack);
  EXPECT_EQ(digest, digest64(pack));
  uint64_t header[2];
  std::memcpy(header, pack.data(), 16);
  EXPECT_EQ(header[0], 4u);
  EXPECT_EQ(header[1], entries);
  apply_pack_on_host(pack);
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(live[k], next[k]) << k;

  // A pack whose counts do not fill it, or a word beyond its storage, is refused.
  Bytes short_pack(pack.begin(), pack.end() - 4);
  EXPECT_THROW(apply_pack_on_host(short_pack), Error);
  Bytes beyond = pack;
  const uint32_t far = 1u << 30;
  std::memcpy(beyond.data() + 16 + 4 * 32, &far, 4);  // first entry's word index
  const std::string refusal = test::error_text([&] { apply_pack_on_host(beyond); });
  EXPECT_NE(refusal.find("word 1073741824 beyond its"), std::string::npos) << refusal;
}

}  // namespace
}  // namespace wsb
