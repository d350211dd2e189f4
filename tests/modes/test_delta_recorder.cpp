// Recording the changes prepare writes into a rank image (modes/sync/delta_recorder.hpp): whatever the ranges and
// threads the writes come in, the recording finds exactly the changed 32-bit words, keeps the digest64 of the new
// bytes (old digest plus the recorded term change), and its pack, applied to the old bytes, gives the new ones; a
// storage that is dense, not word-addressable, or whose pack runs out of room is reported incomplete (copied in
// full), a dense one as dense (its digest left to be taken from its new bytes), every other one's digest exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "core/digest64.hpp"
#include "core/errors.hpp"
#include "modes/sync/delta_recorder.hpp"
#include "modes/sync/staged_delta.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/cpu_forms.hpp"

namespace wsb {
namespace {

WSBENCH_BOTH_CPU_FORMS(DeltaRecorderForms);

using Bytes = std::vector<uint8_t>;

uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

/// (segment address, entries) of every segment of `pack`, in table order.
std::vector<std::pair<uint64_t, std::vector<uint64_t>>> segments_of(std::span<const uint8_t> pack) {
  const PackCounts c = pack_counts(pack);
  std::vector<std::pair<uint64_t, std::vector<uint64_t>>> out;
  const uint8_t* table = pack.data() + kPackHeaderBytes + 8 * c.slots;
  for (uint64_t s = 0; s < c.segments; ++s) {
    const uint8_t* seg = table + kPackSegmentBytes * s;
    std::vector<uint64_t> entries;
    for (uint64_t e = 0; e < load64(seg + 16); ++e) entries.push_back(load64(pack.data() + 16 + 8 * (load64(seg + 8) + e)));
    out.emplace_back(load64(seg), std::move(entries));
  }
  return out;
}

/// One storage under test: the live bytes, the target bytes, and the image the recorder writes.
struct Case {
  Bytes live, target, image;
};

Case make_case(size_t bytes, double density, std::mt19937_64& rng) {
  Case c;
  c.live.resize(bytes);
  for (auto& b : c.live) b = static_cast<uint8_t>(rng());
  c.target = c.live;
  std::bernoulli_distribution flip(density);
  for (auto& b : c.target) {
    if (flip(rng)) b ^= static_cast<uint8_t>(1 + rng() % 255);
  }
  c.image = c.live;
  return c;
}

/// Splits [0, bytes) at random points into ranges of 1 to 300 bytes (boundaries anywhere inside words).
std::vector<std::pair<uint64_t, uint64_t>> random_ranges(uint64_t bytes, std::mt19937_64& rng) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (uint64_t at = 0; at < bytes;) {
    const uint64_t n = std::min<uint64_t>(bytes - at, 1 + rng() % 300);
    out.emplace_back(at, n);
    at += n;
  }
  return out;
}

TEST_P(DeltaRecorderForms, RangesThatSplitWordsRecordEachChangedWordOnce) {
  // 100 bytes: twelve whole 64-bit words and a short last one (one 32-bit half).
  Case c;
  c.live.resize(100);
  for (size_t i = 0; i < c.live.size(); ++i) c.live[i] = static_cast<uint8_t>(3 * i + 1);
  c.target = c.live;
  c.target[5] ^= 0x80;   // 32-bit word 1, in 64-bit word 0, which the ranges below split at byte 5
  c.target[6] ^= 0x01;   // same word
  c.target[16] ^= 0x02;  // 32-bit word 4
  c.target[99] ^= 0xFF;  // the last 32-bit word (24), in the short 64-bit word 12
  c.image = c.live;
  DeltaRecorder recorder({1 << 20}, nullptr);
  recorder.begin({DeltaStorage{c.image, 0, 0x1000}});
  recorder.copy(0, 0, std::span(c.target).subspan(0, 5));
  recorder.copy(0, 5, std::span(c.target).subspan(5, 14));
  recorder.copy(0, 19, std::span(c.target).subspan(19));
  const std::vector<DeltaChanges> changes = recorder.finish();
  EXPECT_EQ(c.image, c.target);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].changed_words, 3u);  // 64-bit words 0, 2 and 12
  EXPECT_EQ(changes[0].entries, 3u);
  EXPECT_EQ(changes[0].covered_bytes, 100u);
  EXPECT_FALSE(changes[0].incomplete);
  EXPECT_EQ(digest64_close(digest64_sum(c.live) + changes[0].digest_delta, 100), digest64(c.target));

  const auto pack = recorder.pack(0, {true});
  ASSERT_TRUE(pack.has_value());
  EXPECT_EQ(pack->digest, digest64(pack->bytes));
  uint32_t w1, w4, w24;
  std::memcpy(&w1, &c.target[4], 4);
  std::memcpy(&w4, &c.target[16], 4);
  std::memcpy(&w24, &c.target[96], 4);
  // The split word is resolved after the writes, so its entry comes in a segment of its own.
  auto segments = segments_of(pack->bytes);
  std::vector<uint64_t> entries;
  for (const auto& [address, list] : segments) {
    EXPECT_EQ(address, 0x1000u);
    entries.insert(entries.end(), list.begin(), list.end());
  }
  std::sort(entries.begin(), entries.end(), [](uint64_t x, uint64_t y) { return (x & 0xFFFFFFFF) < (y & 0xFFFFFFFF); });
  EXPECT_EQ(entries, (std::vector<uint64_t>{pack_entry(1, w1), pack_entry(4, w4), pack_entry(24, w24)}));
}

/// Every range of every storage (random_ranges) in a shuffled order, dealt round-robin to four threads and written
/// with copy(): range k from a piece built in a scratch buffer first (as the loader builds a transformed storage)
/// when k % every == built, straight from the target otherwise. Returns once every write is done.
void write_on_four_threads(DeltaRecorder& recorder, std::vector<Case>& cases, const std::vector<size_t>& sizes,
                           std::mt19937_64& rng, size_t every, size_t built) {
  std::vector<std::tuple<size_t, uint64_t, uint64_t>> work;
  for (size_t i = 0; i < cases.size(); ++i) {
    for (const auto& [at, n] : random_ranges(sizes[i], rng)) work.emplace_back(i, at, n);
  }
  std::shuffle(work.begin(), work.end(), rng);
  std::vector<std::jthread> threads;
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t k = t; k < work.size(); k += 4) {
        const auto [i, at, n] = work[k];
        const auto target = std::span<const uint8_t>(cases[i].target).subspan(at, n);
        if (k % every != built) {
          recorder.copy(i, at, target);
        } else {
          const Bytes scratch(target.begin(), target.end());
          recorder.copy(i, at, scratch);
        }
      }
    });
  }
}

TEST_P(DeltaRecorderForms, ManyThreadsAndStoragesGiveExactPacksAndDigests) {
  std::mt19937_64 rng(23);
  // Word-addressable sizes, one with a short last 64-bit word, a tiny one, one that is not word-addressable, and
  // one dense enough to pass kDenseLimit.
  const std::vector<size_t> sizes{64 << 10, 4100, 4, 12, 1001, 8192, 32 << 10, 4096};
  const std::vector<double> densities{0.005, 0.02, 1.0, 0.2, 0.01, 0.0, 0.9, 0.01};
  std::vector<Case> cases;
  for (size_t i = 0; i < sizes.size(); ++i) cases.push_back(make_case(sizes[i], densities[i], rng));
  DeltaRecorder recorder({1 << 20, 1 << 20}, nullptr);
  for (int round = 0; round < 2; ++round) {  // the same recorder twice: blocks and thread states are reused
    SCOPED_TRACE(round);
    std::vector<DeltaStorage> storages;
    for (size_t i = 0; i < cases.size(); ++i) {
      cases[i].image = cases[i].live;
      storages.push_back(DeltaStorage{cases[i].image, static_cast<int>(i % 2), 0x10000 * (i + 1)});
    }
    recorder.begin(storages);
    // Half the ranges written from the target, half from a scratch copy.
    write_on_four_threads(recorder, cases, sizes, rng, 2, 1);
    const std::vector<DeltaChanges> changes = recorder.finish();
    std::vector<bool> include(cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(cases[i].image, cases[i].target);
      uint64_t words32 = 0, words64 = 0;
      for (size_t w = 0; 8 * w < sizes[i]; ++w) {
        const size_t k = std::min<size_t>(8, sizes[i] - 8 * w);
        words64 += std::memcmp(&cases[i].live[8 * w], &cases[i].target[8 * w], k) != 0;
      }
      for (size_t w = 0; 4 * w + 4 <= sizes[i]; ++w) {
        words32 += std::memcmp(&cases[i].live[4 * w], &cases[i].target[4 * w], 4) != 0;
      }
      EXPECT_EQ(changes[i].covered_bytes, sizes[i]);
      // Incomplete: not word-addressable (1001 bytes), or more entries than kDenseLimit of the storage's bytes
      // allows (the dense ones, and the tiny ones with any change). Each of them changed, so each turned dense:
      // its digest is to be taken from its new bytes, and it stopped counting changed words part way.
      const auto cap = static_cast<uint64_t>(kDenseLimit * static_cast<double>(sizes[i]) / 8);
      const bool incomplete = sizes[i] % 4 != 0 || words32 > cap;
      EXPECT_EQ(changes[i].incomplete, incomplete);
      EXPECT_EQ(changes[i].dense, incomplete);
      if (incomplete) {
        EXPECT_GE(changes[i].changed_words, 1u);
        EXPECT_LE(changes[i].changed_words, words64);
      } else {
        EXPECT_EQ(digest64_close(changes[i].new_sum(digest64_sum(cases[i].live)), sizes[i]),
                  digest64(cases[i].target));
        EXPECT_EQ(changes[i].changed_words, words64);
        EXPECT_EQ(changes[i].entries, words32);
      }
      include[i] = changes[i].changed() && !changes[i].incomplete;
    }
    EXPECT_FALSE(include[2] || include[3]);  // 4 and 12 bytes: any change is dense
    EXPECT_FALSE(include[4]);                // 1001 bytes
    EXPECT_FALSE(include[5]);                // nothing changed
    EXPECT_FALSE(include[6]);                // dense
    EXPECT_TRUE(include[0] && include[1] && include[7]);
    // Each group's pack, applied to the live bytes of the storages it covers, gives their target bytes.
    std::vector<Case> applied = cases;
    for (int g = 0; g < 2; ++g) {
      const auto pack = recorder.pack(g, include);
      ASSERT_TRUE(pack.has_value());
      EXPECT_EQ(pack->digest, digest64(pack->bytes));
      Bytes relocated(pack->bytes.begin(), pack->bytes.end());
      // Point the segments at copies of the live bytes.
      const PackCounts counts = pack_counts(relocated);
      uint8_t* table = relocated.data() + 16 + 8 * counts.slots;
      for (uint64_t s = 0; s < counts.segments; ++s) {
        const uint64_t address = load64(table + 32 * s);
        const size_t i = address / 0x10000 - 1;
        ASSERT_EQ(static_cast<int>(i % 2), g);
        EXPECT_LE(load64(table + 32 * s + 16), kSegmentEntries);
        const uint64_t host = reinterpret_cast<uintptr_t>(applied[i].live.data());
        std::memcpy(table + 32 * s, &host, 8);
      }
      apply_pack_on_host(relocated);
    }
    for (size_t i = 0; i < cases.size(); ++i) {
      // Storages left out of the packs are untouched: they are copied in full instead.
      EXPECT_EQ(applied[i].live, include[i] ? cases[i].target : cases[i].live) << i;
    }
  }
}

TEST_P(DeltaRecorderForms, ADenseStorageStopsComparingAndIsCopiedAsItIs) {
  // Two storages of 64 KiB + 4 bytes (a short last 64-bit word; cap: kDenseLimit * 65540 / 8 = 4096 entries).
  // In `all` every byte changes; in `late` only bytes [45568, 65540) do (4993 changed 32-bit words).
  std::mt19937_64 rng(31);
  Case all = make_case((64 << 10) + 4, 0.0, rng), late = make_case((64 << 10) + 4, 0.0, rng);
  const uint64_t n = all.target.size();
  for (auto& b : all.target) b ^= 0x5A;
  for (uint64_t p = 45568; p < n; ++p) late.target[p] ^= 0xA5;
  DeltaRecorder recorder({1 << 20}, nullptr);
  recorder.begin({DeltaStorage{all.image, 0, 0x1000}, DeltaStorage{late.image, 0, 0x100000}});
  // One thread, 256-byte ranges; the changed 32-bit words are counted at the end of each range. `all` turns dense
  // once a sixteenth of it is written (4096 bytes, 512 64-bit words compared) as its changes already run at four
  // times the density its cap allows; `late` only with the range that passes its cap, the 65th that changes
  // anything (2080 64-bit words compared). Nothing is compared after.
  for (uint64_t at = 0; at < 32768; at += 256) recorder.copy(0, at, std::span<const uint8_t>(all.target).subspan(at, 256));
  for (uint64_t at = 0; at + 256 <= n; at += 256) recorder.copy(1, at, std::span<const uint8_t>(late.target).subspan(at, 256));
  recorder.copy(1, n - n % 256, std::span<const uint8_t>(late.target).subspan(n - n % 256));
  // The rest of `all`: 301-byte ranges that split 64-bit words between them.
  for (uint64_t at = 32768; at < n;) {
    const uint64_t len = std::min<uint64_t>(n - at, 301);
    recorder.copy(0, at, std::span<const uint8_t>(all.target).subspan(at, len));
    at += len;
  }
  const std::vector<DeltaChanges> changes = recorder.finish();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(all.image, all.target);
  EXPECT_EQ(late.image, late.target);
  EXPECT_EQ(changes[0].changed_words, 512u);
  EXPECT_EQ(changes[1].changed_words, 2080u);
  for (size_t i = 0; i < 2; ++i) {
    const Case& c = i == 0 ? all : late;
    SCOPED_TRACE(i);
    EXPECT_EQ(changes[i].covered_bytes, n);
    EXPECT_TRUE(changes[i].incomplete);
    EXPECT_TRUE(changes[i].dense);
    EXPECT_EQ(c.image, c.target);
  }
  // Their entries stopped part way: they never go in a pack.
  const auto pack = recorder.pack(0, {true, true});
  ASSERT_TRUE(pack.has_value());
  EXPECT_EQ(pack->segments, 0u);
}

TEST_P(DeltaRecorderForms, DenseStoragesWrittenInSplitRangesOnManyThreadsAreExact) {
  std::mt19937_64 rng(41);
  // Every byte changed, a quarter of them (~68% of 32-bit words: dense), and one byte in 64 (~6% of 32-bit words,
  // entries of ~1/64 of the bytes: below the cap of kDenseLimit / 8 of them). The dense ones' bytes must come out
  // exact whatever order the threads reach them in and wherever the ranges split words; the sparse one stays
  // staged, its digest exact.
  const std::vector<size_t> sizes{(1 << 20) + 4, 256 << 10, 192 << 10};
  const std::vector<double> densities{1.0, 0.25, 1.0 / 64};
  std::vector<Case> cases;
  for (size_t i = 0; i < sizes.size(); ++i) cases.push_back(make_case(sizes[i], densities[i], rng));
  DeltaRecorder recorder({16 << 20}, nullptr);
  std::vector<DeltaStorage> storages;
  for (size_t i = 0; i < cases.size(); ++i) storages.push_back(DeltaStorage{cases[i].image, 0, 0x100000 * (i + 1)});
  recorder.begin(storages);
  // Two ranges in three written from the target, the third from a scratch copy.
  write_on_four_threads(recorder, cases, sizes, rng, 3, 0);
  const std::vector<DeltaChanges> changes = recorder.finish();
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(cases[i].image, cases[i].target);
    EXPECT_EQ(changes[i].covered_bytes, sizes[i]);
    EXPECT_EQ(changes[i].dense, i < 2);
    EXPECT_EQ(changes[i].incomplete, i < 2);
  }
  EXPECT_EQ(digest64_close(changes[2].new_sum(digest64_sum(cases[2].live)), sizes[2]), digest64(cases[2].target));
}

TEST_P(DeltaRecorderForms, ASegmentHoldsAtMostKSegmentEntries) {
  std::mt19937_64 rng(5);
  Case c = make_case(200 << 10, 0.0, rng);
  for (size_t w = 0; w < 5000; ++w) c.target[40 * w] ^= 0x01;  // 5000 changed 32-bit words, 40 bytes apart
  DeltaRecorder recorder({4 << 20}, nullptr);
  recorder.begin({DeltaStorage{c.image, 0, 0x2000}});
  recorder.copy(0, 0, c.target);
  EXPECT_EQ(recorder.finish()[0].entries, 5000u);
  const auto pack = recorder.pack(0, {true});
  ASSERT_TRUE(pack.has_value());
  const auto segments = segments_of(pack->bytes);
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(segments[0].second.size(), kSegmentEntries);
  EXPECT_EQ(segments[1].second.size(), 5000 - kSegmentEntries);
  EXPECT_EQ(segments[0].second[0], pack_entry(0, load64(&c.target[0]) & 0xFFFFFFFF));
}

TEST_P(DeltaRecorderForms, APackThatRunsOutOfRoomLeavesItsStoragesIncompleteAndTheOthersDigestsExact) {
  std::mt19937_64 rng(9);
  Case a = make_case(256 << 10, 0.05, rng), b = make_case(4096, 0.05, rng);
  // 4 KiB: the smallest pack; ~20% of the 64 Ki words of `a` change, far more than fit.
  DeltaRecorder recorder({4096, 1 << 20}, nullptr);
  recorder.begin({DeltaStorage{a.image, 0, 0x1000}, DeltaStorage{b.image, 1, 0x2000}});
  recorder.copy(0, 0, a.target);
  recorder.copy(1, 0, b.target);
  const auto changes = recorder.finish();
  EXPECT_TRUE(changes[0].incomplete);
  EXPECT_FALSE(changes[1].incomplete);
  EXPECT_EQ(a.image, a.target);
  // Out of room, `a` turned dense: its digest is to be taken from its new bytes.
  EXPECT_TRUE(changes[0].dense);
  EXPECT_FALSE(changes[1].dense);
  EXPECT_EQ(digest64_close(changes[1].new_sum(digest64_sum(b.live)), b.live.size()), digest64(b.target));
  EXPECT_FALSE(recorder.pack(0, {true, true}).has_value());
  EXPECT_TRUE(recorder.pack(1, {true, true}).has_value());  // the other area is unaffected
}

TEST_P(DeltaRecorderForms, RangesBeyondAStorageAreRefused) {
  Bytes image(16), src(8);
  DeltaRecorder recorder({1 << 20}, nullptr);
  recorder.begin({DeltaStorage{image, 0, 0}});
  test::expect_error([&] { recorder.copy(0, 12, src); }, ErrorKind::Mismatch,
                     {"delta recorder: bytes [12, 20) of storage 0 beyond its 16 bytes"});
  test::expect_error([&] { recorder.copy(1, 0, src); }, ErrorKind::Mismatch, {"delta recorder: storage 1 of 1"});
  test::expect_error([&] { recorder.begin({DeltaStorage{image, 1, 0}}); }, ErrorKind::Mismatch,
                     {"delta recorder: staging group 1 of 1"});
  recorder.begin({DeltaStorage{image, 0, 0}});
  test::expect_error([&] { recorder.pack(0, {true}); }, ErrorKind::State, {"before finish"});
}

}  // namespace
}  // namespace wsb
